package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/nccl/bench"
)

// -T and --rendezvous-timeout take seconds as nccl-tests' users type them,
// and Go durations.
func TestDurationFlags(t *testing.T) {
	coll, _ := bench.FindCollective("all_reduce")
	for _, tc := range []struct {
		args    []string
		timeout time.Duration
		rdv     time.Duration
		wantErr string
	}{
		{nil, 600 * time.Second, 120 * time.Second, ""},
		{[]string{"-T", "30"}, 30 * time.Second, 120 * time.Second, ""},
		{[]string{"-T", "0"}, 0, 120 * time.Second, ""},
		{[]string{"--timeout", "1m", "--rendezvous-timeout", "2.5"}, time.Minute, 2500 * time.Millisecond, ""},
		{[]string{"-T", "-1"}, 0, 0, `invalid argument "-1" for "-T, --timeout" flag: must not be negative`},
		{[]string{"--rendezvous-timeout", "forever"}, 0, 0, `invalid argument "forever" for "--rendezvous-timeout" flag: want seconds`},
	} {
		o, err := parseFlags(coll, tc.args, io.Discard)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr == "" && (o.Timeout != tc.timeout || o.RdvTimeout != tc.rdv):
			t.Errorf("%q: -T %v --rendezvous-timeout %v, want %v %v", tc.args, o.Timeout, o.RdvTimeout, tc.timeout, tc.rdv)
		case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}
