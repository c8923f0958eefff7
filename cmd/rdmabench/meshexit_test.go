package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/results"
)

// meshRank starts one mesh rank as a process of its own (the test binary
// as rdmabench), with a fixed server port so that the test knows when it
// stands at the rendezvous: the server listens before the join.
func startMeshRank(t *testing.T, rank, size int, rdv string, extra ...string) (cmd *exec.Cmd, serverPort string, stderr *syncbuf.Buffer) {
	t.Helper()
	serverPort = testport.Free(t)
	args := append([]string{"mesh", "--rendezvous", rdv, "-p", serverPort}, extra...)
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RDMABENCH_RUN_MAIN=1", "WORLD_SIZE="+strconv.Itoa(size), "RANK="+strconv.Itoa(rank), "LOCAL_RANK="+strconv.Itoa(rank))
	stderr = &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = &syncbuf.Buffer{}, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, serverPort, stderr
}

// waitListening waits until something accepts on 127.0.0.1:port.
func waitListening(t *testing.T, port string, cmd *exec.Cmd, log *syncbuf.Buffer) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", port), time.Second); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("the rank listens on no port %s after 20 s: %s", port, log)
}

// exitOf waits for cmd at most limit and returns its exit status and how
// long that took.
func exitOf(t *testing.T, cmd *exec.Cmd, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0, time.Since(start)
		case errors.As(err, &ee):
			return ee.ExitCode(), time.Since(start)
		}
		t.Fatal(err)
	case <-time.After(limit):
		cmd.Process.Kill()
		<-done
		t.Fatalf("still running %v after the signal", limit)
	}
	return -1, 0
}

// Ctrl-C or SIGTERM at the rendezvous ends a rank at once, with one line
// and exit 130 (issue 48): launch.Join took no context and the mesh
// waited for --rendezvous-timeout (2 min) whatever the signal.
func TestMeshInterruptAtRendezvous(t *testing.T) {
	cases := []struct {
		name   string
		rank   int
		sig    syscall.Signal
		accept bool // a port that accepts and says nothing (a rank 0 that never answers)
		want   string
	}{
		{"rank 1, no rank 0, SIGTERM", 1, syscall.SIGTERM, false, "interrupted while waiting for rank 0 at"},
		{"rank 1, a rank 0 that never answers, SIGINT", 1, syscall.SIGINT, true, "interrupted after joining rank 0 at"},
		{"rank 0, nobody joins, SIGINT", 0, syscall.SIGINT, false, "interrupted while waiting for process ranks [1 2] to join"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdv := testport.Addr(t)
			if tc.accept {
				silentServer(t, rdv)
			}
			cmd, port, stderr := startMeshRank(t, tc.rank, 3, rdv, "--save", filepath.Join(t.TempDir(), "m.json"))
			waitListening(t, port, cmd, stderr)
			time.Sleep(100 * time.Millisecond) // into the join's wait
			cmd.Process.Signal(tc.sig)
			code, took := exitOf(t, cmd, 10*time.Second)
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			if code != exitcode.Interrupted || took > 2*time.Second || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("exit %d %v after the signal, stderr %q; want exit 130 within 2 s and one line %q", code, took.Round(time.Millisecond), stderr, tc.want)
			}
		})
	}
}

// A rank without rank 0 says what it waits for after a few seconds, keeps
// waiting, and exits 3 at --rendezvous-timeout: nothing was measured.
func TestMeshWaitingForRankZero(t *testing.T) {
	t.Parallel()
	rdv := testport.Addr(t)
	cmd, _, stderr := startMeshRank(t, 1, 2, rdv, "--rendezvous-timeout", "6")
	code, _ := exitOf(t, cmd, 20*time.Second)
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if code != exitcode.NotMeasured || len(lines) != 2 ||
		!strings.Contains(lines[0], "rank 1: waiting for rank 0 at "+rdv+" (5 s of the rendezvous timeout, 6 s)") ||
		!strings.Contains(lines[1], "cannot reach rank 0 at "+rdv) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// --analyze re-judges a saved mesh: its --save and --metrics hold the
// mesh judged again (they were silently not written).
func TestMeshAnalyzeWritesOutputs(t *testing.T) {
	dir := t.TempDir()
	save, prom := filepath.Join(dir, "m2.json"), filepath.Join(dir, "m.prom")
	// Four ranks on four hosts: --expect-bw judges pairs across hosts.
	in := filepath.Join("testdata", "badinput", "files", "mesh-4hosts.json")
	code, _, stderr := run("mesh", "--analyze", in, "--expect-bw", "100", "--save", save, "--metrics", prom)
	if code != exitcode.Findings {
		t.Errorf("exit %d (want 1: every direction below --expect-bw): %s", code, stderr)
	}
	m, err := results.ReadMeshFile(save)
	if err != nil {
		t.Fatalf("--save: %v", err)
	}
	outliers := 0
	for _, p := range m.Pairs {
		if p.Outlier() {
			outliers++
		}
	}
	if outliers == 0 {
		t.Errorf("--save holds the mesh as saved, not as judged again: %+v", m)
	}
	b, err := os.ReadFile(prom)
	if err != nil || !strings.Contains(string(b), "rdmabench_mesh_bandwidth_bytes_per_second") {
		t.Errorf("--metrics: %v %.200s", err, b)
	}
}

// Bad input is one line and exit 2, before any rendezvous or file is
// touched.
func TestMeshBadInputLines(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join("testdata", "badinput", "files", "cr-mesh.json")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rendezvous", "127.0.0.1"}, `--rendezvous "127.0.0.1": want host:port`},
		{[]string{"--rendezvous", "127.0.0.1:"}, `port "" is not 1..65535`},
		{[]string{"--rendezvous", "127.0.0.1:70000"}, `port "70000" is not 1..65535`},
		{[]string{"--rendezvous", ":29500"}, "no host"},
		{[]string{"--analyze", in, "--save", in}, "is also an input"},
		{[]string{"--plan", "8", "--save", filepath.Join(dir, "p.json")}, "--plan measures nothing"},
	} {
		// Under a launcher (a rank of two), not alone: the check comes
		// before the rendezvous.
		t.Setenv("WORLD_SIZE", "2")
		t.Setenv("RANK", "1")
		code, _, stderr := run(append([]string{"mesh", "--rendezvous-timeout", "1"}, tc.args...)...)
		if code != exitcode.BadInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line %q", tc.args, code, stderr, tc.want)
		}
	}
	// Outputs are rank 0's (the others' hosts need not have the paths):
	// rank 0 says what is wrong in one line, waits at the rendezvous
	// only to tell the others, and exits 2 whether or not they came.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--save", filepath.Join(dir, "nowhere", "m.json")}, "--save " + filepath.Join(dir, "nowhere", "m.json") + ": directory"},
		{[]string{"--metrics", dir}, "is a directory"},
		{[]string{"--save", filepath.Join(dir, "a"), "--metrics", filepath.Join(dir, "a")}, "the same file as --save"},
	} {
		t.Setenv("WORLD_SIZE", "2")
		t.Setenv("RANK", "0")
		code, _, stderr := run(append([]string{"mesh", "--rendezvous-timeout", "1", "--rendezvous", testport.Addr(t)}, tc.args...)...)
		if code != exitcode.BadInput || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("rank 0 %q: exit %d, stderr %q; want 2 and one line %q", tc.args, code, stderr, tc.want)
		}
	}
	t.Setenv("RANK", "1")
	if code, _, stderr := run("mesh", "--rendezvous-timeout", "1", "--rendezvous", testport.Addr(t), "--save", filepath.Join(dir, "nowhere", "m.json")); code != exitcode.NotMeasured || strings.Contains(stderr, "--save") {
		t.Errorf("rank 1 judged rank 0's --save: exit %d, stderr %q; want 3 (no rank 0) and nothing of --save", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
		t.Error("a refused mesh wrote its output")
	}
}
