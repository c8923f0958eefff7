package main

import (
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/engine"
)

// A SPEC is read by the command line's own parser: its flags mean what they
// mean on the command line, and what is not a load's is refused in one line.
func TestParseLoadSpec(t *testing.T) {
	tests := []struct {
		spec    string
		test    engine.Test
		size    int
		qps     int
		txDepth int
		tc      int
		wantErr string
	}{
		{spec: "write-bw", test: engine.WriteBW, size: 65536, qps: 1, txDepth: 128},
		{spec: "write-bw -q 4 -s 1M", test: engine.WriteBW, size: 1 << 20, qps: 4, txDepth: 128},
		{spec: "  read-bw   --size=16K -t 32 ", test: engine.ReadBW, size: 16384, qps: 1, txDepth: 32},
		{spec: "send-bw -s 4K -T 96", test: engine.SendBW, size: 4096, qps: 1, txDepth: 128, tc: 96},
		{spec: "", wantErr: `--load "": want a bandwidth test`},
		{spec: "frob -s 1", wantErr: `"frob" is not a bandwidth test`},
		{spec: "send-lat", wantErr: `"send-lat" is not a bandwidth test`},
		{spec: "write-bw -s 1X", wantErr: `bad size "1X"`},
		{spec: "write-bw --bogus", wantErr: "unknown flag: --bogus"},
		{spec: "write-bw server", wantErr: "takes no HOST"},
		{spec: "write-bw -n 10 -D 2", wantErr: "--iters --duration belong to the measurement"},
		{spec: "write-bw --json", wantErr: "--json belongs to the measurement"},
		{spec: "write-bw --load read-bw", wantErr: "a load has no loads of its own"},
		{spec: "write-bw --help", wantErr: "see write-bw --help"},
		{spec: "write-bw -q 0", wantErr: "QP count 0"},
		{spec: "read-bw -c UD", wantErr: "UD carries SEND only"},
	}
	for _, tt := range tests {
		p, err := parseLoadSpec(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%q: error %v, want one line containing %q", tt.spec, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.spec, err)
			continue
		}
		if p.Test != tt.test || len(p.Sizes) != 1 || p.Sizes[0] != tt.size || p.MaxQPs() != tt.qps || p.TxDepth != tt.txDepth || p.TC != tt.tc {
			t.Errorf("%q: plan %s sizes %v qps %v tx %d tc %d", tt.spec, p.Test, p.Sizes, p.QPs, p.TxDepth, p.TC)
		}
	}
}

// Bad SPECs and combinations end the command with one line and exit 2
// before any device is opened.
func TestLoadBadInputs(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"write-lat", "--load", "write-bw -s 1X", "--loopback"}, `rdmabench write-lat: --load "write-bw -s 1X": bad size`},
		{[]string{"send-lat", "--load", "", "--loopback"}, "want a bandwidth test and its flags"},
		{[]string{"write-bw", "--load", "write-bw", "--loopback"}, "--load applies to latency tests"},
		{[]string{"send-lat", "--load", "write-bw", "--rate", "100", "--loopback"}, "--load and --rate: one at a time"},
		{[]string{"send-lat", "--load", "write-bw", "-D", "2", "--loopback"}, "--load runs -n ping-pongs idle, then -n loaded: no -D"},
		{[]string{"send-lat", "--load", "write-bw", "--load", "write-bw", "--load", "write-bw", "--load", "write-bw", "--load", "write-bw", "--loopback"}, "5 loads (want at most 4)"},
		{[]string{"send-lat", "--load", "write-bw", "--repeat", "2", "--loopback"}, "--load and --repeat exclude each other"},
	}
	for _, tt := range tests {
		code, out, errOut := run(tt.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", tt.args, code, out, errOut, tt.want)
		}
	}
}
