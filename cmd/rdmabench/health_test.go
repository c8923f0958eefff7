package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/health"
)

func runHealthTest(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runWithEnviron(t, runHealth, environ, args...)
}

// On the rxe capture: healthy when nothing is measured, "cannot check"
// when a measurement was asked of a capture, unhealthy with the fault's
// code when the job's environment names a wrong GID.
func TestHealthOnCapture(t *testing.T) {
	code, out, errOut := runHealthTest(t, nil, rxeArgs("--no-bw")...)
	if code != 0 || errOut != "" || !strings.Contains(out, "rdmabench health: healthy (exit 0)") || strings.Contains(out, "reason:") {
		t.Errorf("healthy: exit %d %q\n%s", code, errOut, out)
	}
	if code, out, _ := runHealthTest(t, nil, rxeArgs("--no-bw", "--oneline")...); code != 0 || out != "" {
		t.Errorf("healthy --oneline: exit %d %q", code, out)
	}
	code, out, _ = runHealthTest(t, nil, rxeArgs()...)
	if code != 3 || !strings.Contains(out, "UNCHECKED RB901  bw.loopback") || !strings.Contains(out, "cannot check (exit 3)") {
		t.Errorf("capture with a measurement asked: exit %d\n%s", code, out)
	}
	env := writeFile(t, "job.sh", "export NCCL_IB_GID_INDEX=0\n")
	code, out, _ = runHealthTest(t, nil, rxeArgs("--no-bw", "--env-file", env)...)
	if code != 1 || !strings.Contains(out, "FAULT     RB121  nccl.gid_index") || !strings.Contains(out, "reason: rdmabench: RB121 ") {
		t.Errorf("wrong GID: exit %d\n%s", code, out)
	}
	code, out, _ = runHealthTest(t, nil, rxeArgs("--no-bw", "--env-file", env, "--oneline")...)
	if code != 1 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "rdmabench: RB121 ") || strings.ContainsAny(strings.TrimSuffix(out, "\n"), "\"\n") {
		t.Errorf("--oneline: exit %d %q", code, out)
	}
	code, out, _ = runHealthTest(t, nil, rxeArgs("--no-bw", "--env-file", env, "--json")...)
	var doc health.Document
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 1 || doc.Status != "unhealthy" || doc.Exit != 1 || len(doc.Faults) != 1 || doc.Faults[0].Code != "RB121" || !strings.HasPrefix(doc.Reason, "rdmabench: RB121") {
		t.Errorf("--json: exit %d %v %+v\n%s", code, err, doc, out)
	}
}

func TestHealthUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.json")
	t.Setenv("NODE_NAME", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--min-share", "2"}, "--min-share 2: want a share in (0, 1]"},
		{[]string{"--nccl"}, "--nccl needs --nccl-gpus 2 or more"},
		{[]string{"--expect-busbw", "10"}, "go with --nccl"},
		{[]string{"--baseline", missing, "--expect-bw", "10"}, "give one expectation"},
		{[]string{"--baseline", missing}, "--baseline: open"},
		{[]string{"-s", "0"}, "--size: bad size"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--taint"}, "--taint goes with --node-condition"},
		{[]string{"--node-name", "n1"}, "--node-name and --kubeconfig go with --node-condition"},
		{[]string{"--every", "-1s"}, `invalid argument "-1s" for "--every" flag: must not be negative`},
		{[]string{"--node-condition"}, "--node-condition: which node? give --node-name NAME or set $NODE_NAME"},
		{[]string{"--node-condition", "--node-name", "n1", "--kubeconfig", missing}, "kubeconfig " + missing + ": stat " + missing + ": no such file or directory"},
	} {
		code, _, errOut := runHealthTest(t, nil, rxeArgs(tc.args...)...)
		if code != 2 || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d %q, want %q", tc.args, code, errOut, tc.want)
		}
	}
}

// fakeNCCLBench is a stand-in ncclbench: it refuses to run unless NCCL's
// shared-memory and peer-to-peer paths are off, then does what body says.
func fakeNCCLBench(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ncclbench")
	script := "#!/bin/sh\n" +
		`[ "$NCCL_SHM_DISABLE" = 1 ] && [ "$NCCL_P2P_DISABLE" = 1 ] || { echo "SHM or P2P on" >&2; exit 9; }` + "\n" +
		`case " $* " in *" -g 4 "*) ;; *) echo "want -g 4: $*" >&2; exit 9;; esac` + "\n" + body + "\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHealthNCCL(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		extra      []string
		code       int
		want       string
	}{
		{"fast enough", `echo '{"tool": "ncclbench", "schema": 2, "avg_bus_bandwidth_gbps": 9.5}'`, nil, 0, "MEASURED         nccl.allreduce host 9.5 GB/s (expected 10"},
		{"too slow", `echo '{"tool": "ncclbench", "schema": 2, "avg_bus_bandwidth_gbps": 5, "not_gpu_measurement": true}'`, nil, 1, "FAULT     RB211  nccl.allreduce host 5 GB/s, below 90% of 10 (--expect-busbw (CPU test library, not a GPU))"},
		{"failed", `echo '{"tool": "ncclbench", "schema": 2, "error": "process rank 1: ncclAllReduce: unhandled system error"}'; exit 3`, nil, 1, "FAULT     RB212  nccl.allreduce host ncclbench: process rank 1: ncclAllReduce: unhandled system error"},
		{"another tool's JSON", `echo '{"avg_bus_bandwidth_gbps": 9.5}'`, nil, 1, `RB212  nccl.allreduce host ncclbench wrote no JSON document: not an ncclbench document (tool "")`},
		{"no JSON", `echo 'ncclbench: cannot load NCCL' >&2; exit 3`, nil, 1, "RB212  nccl.allreduce host ncclbench: exit status 3: ncclbench: cannot load NCCL"},
		{"hangs", `exec sleep 30`, []string{"--nccl-timeout", "300ms"}, 1, "RB212  nccl.allreduce host ncclbench did not finish within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := rxeArgs(append([]string{"--no-bw", "--nccl", "--nccl-gpus", "4", "--expect-busbw", "10", "--ncclbench", fakeNCCLBench(t, tc.body)}, tc.extra...)...)
			code, out, errOut := runHealthTest(t, nil, args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d (want %d) %q\n%s\nwant %q", code, tc.code, errOut, out, tc.want)
			}
		})
	}
	code, out, _ := runHealthTest(t, []string{"PATH=/nonexistent"}, rxeArgs("--no-bw", "--nccl", "--nccl-gpus", "2", "--ncclbench", "/nonexistent/ncclbench")...)
	if code != 3 || !strings.Contains(out, "UNCHECKED RB901  nccl.allreduce --ncclbench: stat /nonexistent/ncclbench") {
		t.Errorf("no ncclbench: exit %d\n%s", code, out)
	}
}

// On the rxe target: the loopback measurement of each port NCCL uses,
// held against --expect-bw and a saved baseline.
func TestE2EHealthLoopback(t *testing.T) {
	needRDMA(t)
	code, out, errOut := runHealthTest(t, os.Environ(), "--expect-bw", "0.000001", "-D", "1")
	if !measuredLine(out, "bw.loopback", "rxe0:1") || strings.Contains(out, "RB201") || strings.Contains(out, "RB202") {
		t.Fatalf("exit %d %q\n%s", code, errOut, out)
	}
	if (code == 1) != strings.Contains(out, "FAULT ") {
		t.Errorf("exit %d does not match the faults:\n%s", code, out)
	}
	code, out, _ = runHealthTest(t, os.Environ(), "--expect-bw", "100000", "-D", "1", "--oneline")
	if code != 1 || !strings.HasPrefix(out, "rdmabench: ") || !strings.Contains(out, "RB201 rxe0:1 ") {
		t.Errorf("--expect-bw 100000: exit %d %q", code, out)
	}
	// A saved healthy run is the expectation. One run's figure on rxe
	// spreads by a fifth, so the share asked here is a third.
	file := filepath.Join(t.TempDir(), "healthy.json")
	if c, _, e := run("write-bw", "--loopback", "-s", "64K", "-D", "1", "--save", file); c != 0 {
		t.Fatalf("write-bw --save: exit %d: %s", c, e)
	}
	code, out, _ = runHealthTest(t, os.Environ(), "--baseline", file, "--min-share", "0.33", "-D", "1")
	if strings.Contains(out, "RB201") || !strings.Contains(out, "(expected ") || !strings.Contains(out, "from baseline healthy.json") {
		t.Errorf("--baseline: exit %d\n%s", code, out)
	}
}

// measuredLine says whether the text has a MEASURED line of check on subject.
func measuredLine(out, check, subject string) bool {
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 4 && f[0] == "MEASURED" && f[1] == check && f[2] == subject {
			return true
		}
	}
	return false
}
