package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/engine"
)

// Every duration flag of a test takes a bare number as seconds, as
// perftest's users type it, and a Go duration; a bad one is one line.
func TestTestDurationFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		get     func(engine.Plan) time.Duration
		want    time.Duration
		wantErr string
	}{
		{[]string{"--timeout", "30"}, func(p engine.Plan) time.Duration { return p.Timeout }, 30 * time.Second, ""},
		{[]string{"--timeout", "2m"}, func(p engine.Plan) time.Duration { return p.Timeout }, 2 * time.Minute, ""},
		{[]string{"-D", "2.5"}, func(p engine.Plan) time.Duration { return p.Duration }, 2500 * time.Millisecond, ""},
		{[]string{"-D", "3s"}, func(p engine.Plan) time.Duration { return p.Duration }, 3 * time.Second, ""},
		{[]string{"-D", "2", "--interval", "0.5"}, func(p engine.Plan) time.Duration { return p.Interval }, 500 * time.Millisecond, ""},
		{[]string{"-D", "2", "--interval", "500ms"}, func(p engine.Plan) time.Duration { return p.Interval }, 500 * time.Millisecond, ""},
		{[]string{"--timeout", "-5"}, nil, 0, `invalid argument "-5" for "--timeout" flag: must not be negative`},
		{[]string{"-D", "soon"}, nil, 0, `invalid argument "soon" for "-D, --duration" flag: want seconds`},
		{[]string{"-D", "25h"}, nil, 0, "--duration 90000 outside 0..86400 seconds"},
	} {
		cli, err := parseTest(engine.WriteBW, append([]string{"--loopback"}, tc.args...), io.Discard)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case tc.wantErr == "" && tc.get(cli.plan) != tc.want:
			t.Errorf("%q: %v, want %v", tc.args, tc.get(cli.plan), tc.want)
		case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%q: error %v, want one line starting %q", tc.args, err, tc.wantErr)
		}
	}
}

func TestMeshDurationFlags(t *testing.T) {
	o, code, done := parseMeshFlags([]string{"-D", "1.5", "--timeout", "30", "--rendezvous-timeout", "1m"}, io.Discard)
	if done {
		t.Fatalf("exit %d", code)
	}
	if o.BWDuration != 1500*time.Millisecond || o.Timeout != 30*time.Second || o.rdvTimeout != time.Minute {
		t.Errorf("-D %v --timeout %v --rendezvous-timeout %v, want 1.5s 30s 1m0s", o.BWDuration, o.Timeout, o.rdvTimeout)
	}
	var stderr strings.Builder
	if _, code, done := parseMeshFlags([]string{"--rendezvous-timeout", "0.5"}, &stderr); !done || code != 2 || !strings.Contains(stderr.String(), "--rendezvous-timeout 0.5 outside 1..86400 seconds") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestServeQueueTimeoutRefused(t *testing.T) {
	var stderr strings.Builder
	if code := runServe([]string{"--queue-timeout", "1x"}, io.Discard, &stderr); code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), `invalid argument "1x" for "--queue-timeout" flag`) {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}
