package main

// End-to-end tests on CPU: the test binary re-executes itself as ncclbench,
// in 1, 2 or 4 processes that meet through the real rendezvous and load the
// fake NCCL/CUDA library (nccl/testdata/fakenccl) through the real loader.
// The ranks exchange data for real over loopback TCP. Nothing here is a GPU
// measurement, and the output says so.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/expect"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testenv"
	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/fakelib"
	"github.com/rdmabench/rdmabench/ncclog"
	"github.com/rdmabench/rdmabench/results"
)

var (
	fakeLib string
	// tmpRoot is the processes' TMPDIR: a rank the tests kill with SIGKILL
	// cannot remove its NCCL log folder, and must not leave it in /tmp.
	tmpRoot string
)

func TestMain(m *testing.M) {
	if os.Getenv("NCCLBENCH_TEST_MAIN") == "1" {
		os.Exit(run(append([]string{"ncclbench"}, os.Args[1:]...), os.Stdout, os.Stderr))
	}
	dir, err := os.MkdirTemp("", "ncclbench-e2e-")
	if err != nil {
		panic(err)
	}
	tmpRoot = filepath.Join(dir, "tmp")
	if err = os.Mkdir(tmpRoot, 0o700); err == nil {
		fakeLib, err = fakelib.Build(dir)
	}
	if err != nil {
		os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// syncBuf lets a test read a process's output while it is still running.
type syncBuf = syncbuf.Buffer

type proc struct {
	stdout, stderr syncBuf
	code           int
	cmd            *exec.Cmd
}

// cleanEnv drops anything a launcher or the user's NCCL setup could have
// left in the environment.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k := kv[:strings.IndexByte(kv, '=')]
		if strings.HasPrefix(k, "NCCL_") || strings.HasPrefix(k, "OMPI_") || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "PMI_") ||
			strings.HasPrefix(k, "RDMABENCH_FAKE") || k == "RANK" || k == "WORLD_SIZE" || k == "LOCAL_RANK" || k == "MASTER_ADDR" || k == "MASTER_PORT" {
			continue
		}
		env = append(env, kv)
	}
	return append(append(env, "NCCLBENCH_TEST_MAIN=1", "TMPDIR="+tmpRoot), extra...)
}

// spawn starts one ncclbench process on the test library with env added
// to a clean environment.
func spawn(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{}
	p.cmd = exec.Command(os.Args[0], append(args, "--nccl-lib", fakeLib)...)
	p.cmd.Env = cleanEnv(env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// torchrunEnv is what torchrun sets for rank r of n meeting at port.
func torchrunEnv(r, n int, port string, env ...string) []string {
	return append(append([]string{}, env...), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "LOCAL_RANK="+strconv.Itoa(r),
		"MASTER_ADDR=127.0.0.1", "MASTER_PORT="+port)
}

// start launches n ranks torchrun-style.
func start(t *testing.T, n int, env []string, args ...string) []*proc {
	t.Helper()
	port := testport.Free(t)
	ps := make([]*proc, n)
	for r := 0; r < n; r++ {
		e := env
		if n > 1 {
			e = torchrunEnv(r, n, port, env...)
		}
		ps[r] = spawn(t, e, args...)
	}
	return ps
}

// wait collects the processes, killing them at the deadline.
func wait(t *testing.T, ps []*proc, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for r, p := range ps {
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Until(deadline)):
			for _, q := range ps {
				q.cmd.Process.Kill()
			}
			<-done
			t.Fatalf("rank %d did not exit within %v\nstdout:\n%s\nstderr:\n%s", r, within, p.stdout.String(), p.stderr.String())
		}
		p.code = p.cmd.ProcessState.ExitCode()
	}
}

func runRanks(t *testing.T, n int, env []string, args ...string) []*proc {
	t.Helper()
	ps := start(t, n, env, args...)
	wait(t, ps, 60*time.Second)
	return ps
}

func runOne(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = cleanEnv(env...)
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	cmd.Run()
	p.code = cmd.ProcessState.ExitCode()
	return p
}

func rows(out string) [][]string {
	var rs [][]string
	for _, line := range strings.Split(out, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		rs = append(rs, strings.Fields(line))
	}
	return rs
}

func TestSingleRankTable(t *testing.T) {
	p := runRanks(t, 1, nil, "all_reduce", "-b", "8", "-e", "1K", "-f", "2", "-n", "3", "-w", "1")[0]
	if p.code != 0 {
		t.Fatalf("exit %d: %s", p.code, p.stderr.String())
	}
	out := p.stdout.String()
	expect.Contains(t, "output", out,
		"# WARNING: not a GPU measurement (test library)",
		"#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong",
		"# Out of bounds values : 0 OK",
		"# Avg bus bandwidth    : 0 ",
		"# Note: algbw = size / time. busbw = algbw x 2(n-1)/n",
		"NCCL version:   2.29.1",
	)
	rs := rows(out)
	if len(rs) != 8 {
		t.Fatalf("%d rows, want 8 (8..1024 by 2):\n%s", len(rs), out)
	}
	for i, r := range rs {
		if len(r) != 13 || r[0] != strconv.Itoa(8<<i) || r[1] != strconv.Itoa(2<<i) || r[2] != "float" || r[3] != "sum" || r[4] != "-1" || r[8] != "0" || r[12] != "0" {
			t.Errorf("row %d: %v", i, r)
		}
		if r[7] != "0.00" || r[11] != "0.00" {
			t.Errorf("row %d: busbw must be 0 with one rank: %v", i, r)
		}
	}
}

func jsonRun(t *testing.T, p *proc) *results.NCCLRun {
	t.Helper()
	var r results.NCCLRun
	if err := json.Unmarshal(p.stdout.Bytes(), &r); err != nil {
		t.Fatalf("bad JSON (%v):\n%s\nstderr:\n%s", err, p.stdout.String(), p.stderr.String())
	}
	return &r
}

// Every collective on 2 and 4 ranks: correct data, and the bandwidth
// columns follow nccl-tests' formulas.
func TestCollectivesMultiRank(t *testing.T) {
	factors := map[string]func(n float64) float64{
		"all_reduce": func(n float64) float64 { return 2 * (n - 1) / n },
		"all_gather": func(n float64) float64 { return (n - 1) / n }, "reduce_scatter": func(n float64) float64 { return (n - 1) / n },
		"alltoall":  func(n float64) float64 { return (n - 1) / n },
		"broadcast": func(float64) float64 { return 1 }, "reduce": func(float64) float64 { return 1 }, "sendrecv": func(float64) float64 { return 1 },
	}
	for _, n := range []int{2, 4} {
		for _, c := range bench.Collectives {
			c, n := c, n
			t.Run(fmt.Sprintf("%s/%d", c.Name, n), func(t *testing.T) {
				args := []string{c.Name, "-b", "64", "-e", "4K", "-f", "8", "-n", "2", "-w", "1", "--json"}
				if c.HasRoot {
					args = append(args, "-r", strconv.Itoa(n-1))
				}
				if c.HasOp {
					args = append(args, "-o", "all")
				}
				ps := runRanks(t, n, nil, args...)
				for r, p := range ps {
					if p.code != 0 {
						t.Fatalf("rank %d exit %d: %s", r, p.code, p.stderr.String())
					}
				}
				run := jsonRun(t, ps[0])
				if !run.NotGPU || run.Config.NRanks != n || len(run.Devices) != n {
					t.Errorf("run header: %+v", run)
				}
				want := 3
				if c.HasOp {
					want *= 5
				}
				if len(run.Results) != want {
					t.Fatalf("%d results, want %d", len(run.Results), want)
				}
				for _, p := range run.Results {
					for half, x := range []results.NCCLResult{p.OutOfPlace, p.InPlace} {
						// In place, alltoall and sendrecv receive into what they
						// send: undefined in NCCL, so not checked (nccl-tests: N/A).
						if undefined := half == 1 && c.InPlaceUndefined; x.Checked == undefined || x.Wrong != 0 {
							t.Errorf("size %d %s half %d: checked %v wrong %d", p.Size, p.Redop, half, x.Checked, x.Wrong)
						}
						if x.TimeUs <= 0 {
							t.Errorf("size %d: time %g", p.Size, x.TimeUs)
							continue
						}
						// algbw is the whole size over the time; busbw the rule.
						if got := x.AlgBW * 1e9 * x.TimeUs / 1e6; math.Abs(got-float64(p.Size)) > 1e-6*float64(p.Size)+1e-9 {
							t.Errorf("size %d: algbw %g x time %g = %g bytes", p.Size, x.AlgBW, x.TimeUs, got)
						}
						if f := factors[c.Name](float64(n)); math.Abs(x.BusBW-x.AlgBW*f) > 1e-9*x.AlgBW+1e-12 {
							t.Errorf("size %d: busbw %g, want algbw %g x %g", p.Size, x.BusBW, x.AlgBW, f)
						}
					}
					wantRoot := -1
					if c.HasRoot {
						wantRoot = n - 1
					}
					if p.Root != wantRoot {
						t.Errorf("root %d, want %d", p.Root, wantRoot)
					}
				}
				if run.OutOfBounds != 0 {
					t.Errorf("out of bounds %d", run.OutOfBounds)
				}
				var log ncclog.Report
				if err := json.Unmarshal(run.NCCLLog, &log); err != nil || log.Version != "2.29.1" || len(log.Channels) == 0 {
					t.Errorf("nccl log analysis missing: %v %s", err, run.NCCLLog)
				}
			})
		}
	}
}

// Types and ops on the text table, with 2 GPUs per process.
func TestGPUsPerProcessAllTypes(t *testing.T) {
	ps := runRanks(t, 2, nil, "all_reduce", "-g", "2", "-b", "256", "-e", "256", "-d", "all", "-o", "all", "-n", "1", "-w", "0")
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	out := ps[0].stdout.String()
	if strings.Count(out, "fake-cpu") != 4 || !strings.Contains(out, "nGpus 2") {
		t.Errorf("want 4 devices, nGpus 2:\n%s", out)
	}
	rs := rows(out)
	if len(rs) != 10*5 {
		t.Fatalf("%d rows, want 50", len(rs))
	}
	for _, r := range rs {
		if r[8] != "0" || r[12] != "0" {
			t.Errorf("wrong results: %v", r)
		}
	}
	if ps[1].stdout.Len() != 0 {
		t.Errorf("rank 1 printed to stdout: %s", ps[1].stdout.String())
	}
}

func TestAlltoallFallback(t *testing.T) {
	ps := runRanks(t, 3, []string{"RDMABENCH_FAKE_NCCL_VERSION=22704"}, "alltoall", "-b", "96", "-e", "96K", "-f", "32", "-n", "2", "-w", "1", "--json", "-d", "double")
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	run := jsonRun(t, ps[0])
	if !strings.Contains(run.Config.AlltoAll, "ncclSend/ncclRecv") || run.NCCLVersion != "2.27.4" {
		t.Errorf("alltoall impl %q version %s", run.Config.AlltoAll, run.NCCLVersion)
	}
	for _, p := range run.Results {
		if p.OutOfPlace.Wrong != 0 || p.InPlace.Wrong != 0 {
			t.Errorf("size %d wrong", p.Size)
		}
	}
}

// Wrong results are counted and give nccl-tests' exit code.
func TestWrongResultsExitCode(t *testing.T) {
	ps := runRanks(t, 2, []string{"RDMABENCH_FAKE_NCCL_CORRUPT=1"}, "reduce_scatter", "-b", "64", "-e", "256", "-f", "2", "-n", "1", "-w", "0")
	for r, p := range ps {
		if p.code != exitWrong {
			t.Errorf("rank %d: exit %d, want %d; %s", r, p.code, exitWrong, p.stderr.String())
		}
	}
	out := ps[0].stdout.String()
	if !strings.Contains(out, "# Out of bounds values : 6 FAILED") {
		t.Errorf("no failure summary:\n%s", out)
	}
	for _, r := range rows(out) {
		if r[8] != "1" || r[12] != "1" {
			t.Errorf("row %v: want one wrong element per half", r)
		}
	}
	// Out of bounds values counts halves with wrong values on each process,
	// summed over processes, as nccl-tests: two corrupting processes, 3 rows.
	ps = runRanks(t, 3, []string{"RDMABENCH_FAKE_NCCL_CORRUPT=0,2"}, "all_gather", "-b", "192", "-e", "768", "-f", "2", "-n", "1", "-w", "0")
	if out := ps[0].stdout.String(); ps[0].code != exitWrong || !strings.Contains(out, "# Out of bounds values : 12 FAILED") {
		t.Errorf("two processes wrong: exit %d\n%s", ps[0].code, out)
	}
	// -c 0: no check, N/A, exit 0.
	ps = runRanks(t, 2, []string{"RDMABENCH_FAKE_NCCL_CORRUPT=1"}, "all_reduce", "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-c", "0")
	if ps[0].code != 0 || !strings.Contains(ps[0].stdout.String(), "N/A") {
		t.Errorf("-c 0: exit %d\n%s", ps[0].code, ps[0].stdout.String())
	}
}

// A rank killed mid-run makes the others stop with a clear error, quickly.
// With NCCL < 2.14 (no ncclCommInitRankConfig) communicators are blocking:
// a full launch queue holds the main thread inside NCCL, and the watchdog
// ends the process instead.
func TestKilledRank(t *testing.T) {
	for _, version := range []string{"22901", "21304"} {
		t.Run(version, func(t *testing.T) { killedRank(t, version) })
	}
}

// waitStarted waits up to 30 s for started to say the ranks are running,
// and kills them all and fails the test if it never does.
func waitStarted(t *testing.T, ps []*proc, started func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !started(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, p := range ps {
				p.cmd.Process.Kill()
			}
			t.Fatal("run never started")
		}
	}
}

func killedRank(t *testing.T, version string) {
	ps := start(t, 4, []string{"RDMABENCH_FAKE_NCCL_VERSION=" + version}, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000000", "-w", "1", "-c", "0")
	// Wait until rank 0 has printed the table header: everyone is running.
	waitStarted(t, ps, func() bool { return strings.Contains(ps[0].stdout.String(), "(elements)") })
	time.Sleep(200 * time.Millisecond)
	ps[2].cmd.Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	wait(t, ps, 20*time.Second)
	if d := time.Since(killed); d > 15*time.Second {
		t.Errorf("survivors took %v to exit", d)
	}
	for _, r := range []int{0, 1, 3} {
		p := ps[r]
		errText := strings.TrimSpace(p.stderr.String())
		if p.code == 0 {
			t.Errorf("rank %d exited 0 after a peer died", r)
		}
		if !strings.Contains(errText, "rank 2") || strings.Count(errText, "\n") > 1 {
			t.Errorf("rank %d: error should name rank 2 in one or two lines:\n%s", r, errText)
		}
	}
}

// With --json a failed run still gives a JSON document with the error.
func TestJSONOnFailure(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "nccl.log")
	ps := start(t, 2, nil, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000000", "-w", "0", "-c", "0", "--json", "--nccl-log", logFile)
	// Rank 0's NCCL log says when its communicator is up.
	waitStarted(t, ps, func() bool {
		b, _ := os.ReadFile(logFile)
		return bytes.Contains(b, []byte("Init COMPLETE"))
	})
	time.Sleep(200 * time.Millisecond)
	ps[1].cmd.Process.Signal(syscall.SIGKILL)
	wait(t, ps, 20*time.Second)
	if ps[0].code == 0 {
		t.Fatal("rank 0 exited 0")
	}
	run := jsonRun(t, ps[0])
	if !strings.Contains(run.Error, "rank 1") || !run.NotGPU {
		t.Errorf("error %q", run.Error)
	}
}

func TestMissingNCCL(t *testing.T) {
	p := runOne(t, []string{"LD_LIBRARY_PATH=" + t.TempDir()}, "all_reduce", "-b", "8", "-e", "128M", "-f", "2", "--nccl-lib", filepath.Join(t.TempDir(), "libnccl.so.2"))
	errText := p.stderr.String()
	if p.code == 0 || strings.Count(errText, "\n") != 1 || !strings.Contains(errText, "cannot load NCCL") || !strings.Contains(errText, "--nccl-lib") {
		t.Errorf("exit %d, stderr %q", p.code, errText)
	}
	if p.stdout.Len() != 0 {
		t.Errorf("stdout: %q", p.stdout.String())
	}
	// Without --nccl-lib the system search is reported the same way, unless
	// this machine really has NCCL.
	p = runOne(t, []string{"LD_LIBRARY_PATH=" + t.TempDir()}, "all_reduce", "-b", "8", "-e", "128M", "-f", "2")
	if p.code == 0 {
		t.Skip("NCCL is installed here")
	}
	if errText := p.stderr.String(); strings.Count(errText, "\n") != 1 || !strings.HasPrefix(errText, "ncclbench: ") {
		t.Errorf("stderr %q", errText)
	}
}

func TestNoGPU(t *testing.T) {
	p := runRanks(t, 1, []string{"RDMABENCH_FAKE_NCCL_GPUS=0"}, "all_reduce")[0]
	errText := p.stderr.String()
	if p.code == 0 || strings.Count(errText, "\n") != 1 || !strings.Contains(errText, "no GPU") {
		t.Errorf("exit %d, stderr %q", p.code, errText)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"all_reduce", "-b", "abc"},
		{"all_reduce", "-d", "float128"},
		{"all_reduce", "-o", "xor"},
		{"all_reduce", "-b", "1M", "-e", "1K"},
		{"all_reduce", "--bogus"},
		{"gather"},
		{},
		{"all_reduce", "-t", "2"},
		{"all_reduce", "-z", "4"},
	} {
		p := runOne(t, nil, args...)
		if p.code != exitUsage || !strings.HasPrefix(lastLine(p.stderr.String()), "ncclbench: ") {
			t.Errorf("%v: exit %d, stderr %q", args, p.code, p.stderr.String())
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// The socket fallback warning shows up when the transport is NET/Socket.
func TestSocketFallbackWarning(t *testing.T) {
	ps := runRanks(t, 2, []string{"RDMABENCH_FAKE_NCCL_TRANSPORT=NET/Socket/0"}, "all_gather", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0")
	if ps[0].code != 0 {
		t.Fatalf("exit %d: %s", ps[0].code, ps[0].stderr.String())
	}
	if out := ps[0].stdout.String(); !strings.Contains(out, "TCP SOCKET FALLBACK") || !strings.Contains(out, "NET/Socket/0 (1)") {
		t.Errorf("no fallback warning:\n%s", out)
	}
	if !strings.Contains(ps[1].stderr.String(), "TCP sockets") {
		t.Errorf("rank 1 did not warn: %q", ps[1].stderr.String())
	}
}

// With NCCL_DEBUG set by the user, ncclbench leaves the log alone.
func TestUserNCCLDebug(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "nccl.log")
	p := runRanks(t, 1, []string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_FILE=" + logFile}, "broadcast", "-b", "8", "-e", "8", "-n", "1")[0]
	if p.code != 0 || !strings.Contains(p.stdout.String(), "NCCL log analysis ("+"this process's NCCL log "+logFile) {
		t.Errorf("exit %d:\n%s%s", p.code, p.stdout.String(), p.stderr.String())
	}
	p = runRanks(t, 1, []string{"NCCL_DEBUG=WARN"}, "broadcast", "-b", "8", "-e", "8", "-n", "1")[0]
	if p.code != 0 || !strings.Contains(p.stdout.String(), "NCCL log analysis skipped: NCCL_DEBUG is set") {
		t.Errorf("exit %d:\n%s", p.code, p.stdout.String())
	}
}

func TestAnalyzeCommand(t *testing.T) {
	p := runOne(t, nil, "analyze", filepath.Join("..", "..", "ncclog", "testdata", "nccl-2.19-socket-fallback.log"))
	// A fallback to sockets is a finding: exit 1.
	if p.code != 1 || !strings.Contains(p.stdout.String(), "TCP SOCKET FALLBACK") || !strings.Contains(p.stdout.String(), "2.19.3") {
		t.Errorf("exit %d:\n%s%s", p.code, p.stdout.String(), p.stderr.String())
	}
	p = runOne(t, nil, "analyze", "/nonexistent/nccl.log")
	if p.code == 0 || strings.Count(p.stderr.String(), "\n") != 1 {
		t.Errorf("missing file: exit %d %q", p.code, p.stderr.String())
	}
}

// Other launchers' variables, and a rank 0 that never comes.
func TestLaunchers(t *testing.T) {
	port := testport.Free(t)
	var ps []*proc
	for r := 0; r < 2; r++ {
		ps = append(ps, spawn(t, []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r)},
			"sendrecv", "-b", "1K", "-e", "1K", "-n", "1", "--rendezvous", "127.0.0.1:"+port))
	}
	wait(t, ps, 30*time.Second)
	if ps[0].code != 0 || ps[1].code != 0 || len(rows(ps[0].stdout.String())) != 1 {
		t.Errorf("Open MPI env: exits %d %d\n%s%s", ps[0].code, ps[1].code, ps[0].stdout.String(), ps[1].stderr.String())
	}

	start := time.Now()
	p := runOne(t, []string{"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_LOCALID=1", "SLURM_STEP_ID=0"},
		"all_reduce", "--rendezvous", testport.Addr(t), "--rendezvous-timeout", "1", "--nccl-lib", fakeLib)
	if p.code == 0 || !strings.Contains(p.stderr.String(), "cannot reach rank 0") || time.Since(start) > 10*time.Second {
		t.Errorf("lonely rank 1: exit %d after %v: %q", p.code, time.Since(start), p.stderr.String())
	}
	p = runOne(t, []string{"RANK=1", "WORLD_SIZE=2"}, "all_reduce", "--nccl-lib", fakeLib)
	if p.code != exitUsage || !strings.Contains(p.stderr.String(), "MASTER_ADDR") {
		t.Errorf("no rendezvous address: exit %d %q", p.code, p.stderr.String())
	}
}

// Processes started with different arguments stop at the rendezvous.
func TestMismatchedArguments(t *testing.T) {
	for _, tc := range []struct {
		name   string
		odd    []string // rank 1's arguments
		oddEnv []string // rank 1's environment on top of torchrun's
		want   string
	}{
		{"-e", []string{"-e", "16"}, nil, "same arguments"},
		{"-a", []string{"-a", "0"}, nil, "same arguments"},
		{"WORLD_SIZE", nil, []string{"WORLD_SIZE=3"}, "same WORLD_SIZE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port := testport.Free(t)
			ps := []*proc{
				spawn(t, torchrunEnv(0, 2, port), "all_reduce", "-b", "8", "-e", "8"),
				spawn(t, append(torchrunEnv(1, 2, port), tc.oddEnv...), append([]string{"all_reduce", "-b", "8", "-e", "8"}, tc.odd...)...),
			}
			wait(t, ps, 30*time.Second)
			for r, p := range ps {
				errText := strings.TrimSpace(p.stderr.String())
				if p.code != exitUsage || !strings.Contains(errText, tc.want) || !strings.Contains(errText, "process rank 1 ") || strings.Contains(errText, "\n") {
					t.Errorf("rank %d: exit %d %q", r, p.code, errText)
				}
			}
		})
	}
}

// A peer that stops answering (stopped, not dead) trips the -T deadline:
// the communicator is aborted and the run ends with a timeout error.
func TestHungRankTimeout(t *testing.T) {
	logFile := filepath.Join(t.TempDir(), "nccl.log")
	ps := start(t, 2, nil, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000000", "-w", "0", "-c", "0", "-T", "2", "--nccl-log", logFile)
	defer killAll(ps)
	waitForFile(t, logFile, "the run to start", func(b []byte) bool { return bytes.Contains(b, []byte("Init COMPLETE")) })
	time.Sleep(200 * time.Millisecond)
	ps[1].cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	wait(t, ps[:1], 20*time.Second)
	if d := time.Since(stopped); d > 15*time.Second {
		t.Errorf("rank 0 took %v to give up", d)
	}
	if ps[0].code == 0 || !strings.Contains(ps[0].stderr.String(), "timeout") {
		t.Errorf("rank 0: exit %d %q", ps[0].code, ps[0].stderr.String())
	}
	ps[1].cmd.Process.Kill()
	ps[1].cmd.Process.Signal(syscall.SIGCONT)
	ps[1].cmd.Wait()
}

// oneLine checks that every rank failed with exitFail and at most two lines
// on stderr (no crash dump) containing want.
func oneLine(t *testing.T, ps []*proc, want map[int]string) {
	t.Helper()
	for r, p := range ps {
		errText := strings.TrimSpace(p.stderr.String())
		if p.code != exitFail || strings.Count(errText, "\n") > 1 || !strings.Contains(errText, want[r]) {
			t.Errorf("rank %d: exit %d, want %d and one line with %q:\n%s", r, p.code, exitFail, want[r], errText)
		}
	}
}

// A collective that never completes on one rank (a stuck kernel) trips -T
// on every rank while the launch queue is full. Each rank aborts its
// communicator from the thread that uses it: the stand-in frees the
// communicator in ncclCommAbort, so an abort from another thread followed
// by any call crashes.
func TestStuckCollective(t *testing.T) {
	ps := runRanks(t, 2, []string{"RDMABENCH_FAKE_NCCL_HANG=1:3"}, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000", "-w", "1", "-c", "0", "-T", "1")
	oneLine(t, ps, map[int]string{0: "timeout", 1: "timeout"})
}

// An asynchronous NCCL error on one rank ends the run everywhere, naming
// the rank, without a crash.
func TestAsyncError(t *testing.T) {
	ps := runRanks(t, 3, []string{"RDMABENCH_FAKE_NCCL_ASYNC_ERROR=1:3"}, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000", "-w", "1", "-c", "0")
	// The others name rank 1 by its own words, not by the connection to it
	// they saw close: rank 1 reported its error before its teardown caused
	// theirs (launch.Group.Fail). Rank 1 says its own error, unprefixed.
	oneLine(t, ps, map[int]string{0: "process rank 1: ", 1: "rank 1: ", 2: "process rank 1: "})
	for r, p := range ps {
		if e := p.stderr.String(); !strings.Contains(e, "injected asynchronous error") || (r == 1) != !strings.Contains(e, "process rank") {
			t.Errorf("rank %d does not end with rank 1's own error: %s", r, e)
		}
	}
}

// -T bounds each collective, not the whole timed loop: six collectives of
// 200 ms each (1.2 s in one wait) pass under -T 1, as a long legitimate run
// (8 GB over a socket fallback) must.
func TestTimeoutPerCollective(t *testing.T) {
	ps := runRanks(t, 2, []string{"RDMABENCH_FAKE_NCCL_SLOW=0:200"}, "all_reduce", "-b", "1K", "-e", "1K", "-n", "6", "-w", "0", "-c", "0", "-T", "1")
	for r, p := range ps {
		if p.code != 0 {
			t.Errorf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
}

// The clock starts right after an untimed collective, which ends on every
// rank at once, not after the rendezvous barrier, which releases processes
// one after another and here waits for a rank that sees its collectives end
// 400 ms late. At every rank, the first timed collective is queued as soon
// as the untimed one before it is done.
func TestTimerStartsAfterSyncCollective(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace")
	ps := runRanks(t, 3, []string{"RDMABENCH_FAKE_NCCL_SLOW=2:400", "RDMABENCH_FAKE_NCCL_TRACE=" + trace},
		"all_reduce", "-b", "1K", "-e", "4K", "-f", "2", "-n", "1", "-w", "0", "-c", "0")
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	for r := 0; r < 3; r++ {
		b, err := os.ReadFile(fmt.Sprintf("%s.%d", trace, r))
		if err != nil {
			t.Fatal(err)
		}
		var queued, done []int64
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var seq, q, d int64
			if _, err := fmt.Sscan(line, &seq, &q, &d); err != nil {
				t.Fatalf("trace line %q: %v", line, err)
			}
			queued, done = append(queued, q), append(done, d)
		}
		// 3 sizes x 2 halves x (untimed, timed).
		if len(queued) != 12 {
			t.Fatalf("rank %d: %d operations, want 12", r, len(queued))
		}
		for i := 0; i < 12; i += 2 {
			// A clock started after the barrier waits out rank 2's 400 ms;
			// half of that leaves room for a busy host's scheduling (60 ms
			// with 150 ms late failed 1 run in 20 here, at 61-92 ms).
			if gap := time.Duration(queued[i+1] - done[i]); gap > 200*time.Millisecond {
				t.Errorf("rank %d: timed collective %d queued %v after the untimed one ended", r, i/2, gap)
			}
		}
	}
}

// -z 1, 2 and 3 (nccl-tests' blocking modes) run; in place, sendrecv is
// not checked and says N/A.
func TestBlockingModes(t *testing.T) {
	for _, z := range []string{"1", "2", "3"} {
		ps := runRanks(t, 2, nil, "sendrecv", "-b", "64", "-e", "256", "-f", "4", "-n", "3", "-w", "1", "-z", z)
		for r, p := range ps {
			if p.code != 0 {
				t.Fatalf("-z %s rank %d: exit %d: %s", z, r, p.code, p.stderr.String())
			}
		}
		rs := rows(ps[0].stdout.String())
		if len(rs) != 2 {
			t.Fatalf("-z %s: %d rows:\n%s", z, len(rs), ps[0].stdout.String())
		}
		for _, row := range rs {
			if row[8] != "0" || row[12] != "N/A" {
				t.Errorf("-z %s: row %v: want 0 wrong out of place, N/A in place", z, row)
			}
		}
	}
}

// scaleProcs is how many processes the scale test starts: 128 by default
// (about 7 s on 2 cores), another count with NCCLBENCH_SCALE_PROCS (256
// took 17 s on 2 idle cores and 54 s on busy ones).
func scaleProcs(t *testing.T) int {
	n := 128
	if v := os.Getenv("NCCLBENCH_SCALE_PROCS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 2 {
			t.Fatalf("NCCLBENCH_SCALE_PROCS=%q", v)
		}
	}
	if testing.Short() {
		n = 16
	}
	return n
}

// nuisance connects to port on 127.0.0.1 as a port scanner (idle) and as
// a confused client (garbage), and keeps both open until the returned
// function is called.
func nuisance(t *testing.T, port string) func() {
	t.Helper()
	var conns []net.Conn
	deadline := time.Now().Add(30 * time.Second)
	for len(conns) < 2 && time.Now().Before(deadline) {
		c, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err != nil {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		conns = append(conns, c)
	}
	if len(conns) < 2 {
		t.Fatal("rank 0 never listened")
	}
	conns[1].Write([]byte("\x16\x03\x01 not a hello\n{\"type\":\"hello\",\"hello\":{\"rank\":1}}\n"))
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

// Many processes join through the rendezvous and run a checked all_reduce
// on the stand-in while an idle and a garbage connection are open on the
// rendezvous port. The join time is rank 0's wait for everyone.
func TestScaleJoin(t *testing.T) {
	testenv.HoldCPUs(t)
	n := scaleProcs(t)
	port := testport.Free(t)
	start := time.Now()
	ps := make([]*proc, n)
	for r := 0; r < n; r++ {
		// Every process on "GPU 0": the stand-in does not mind.
		ps[r] = spawn(t, torchrunEnv(r, n, port, "RDMABENCH_FAKE_NCCL_LATENCY_US=0", "NCCL_BENCH_TOKEN=scale-test", "NCCL_MULTI_RANK_GPU_ENABLE=1"),
			"all_reduce", "-b", "8K", "-e", "8K", "-n", "1", "-w", "0")
		if r == 0 {
			defer nuisance(t, port)()
		}
	}
	wait(t, ps, 120*time.Second)
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	out := ps[0].stdout.String()
	var joined float64
	var nprocs int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "# Rendezvous: ") {
			fmt.Sscanf(line, "# Rendezvous: %d processes joined in %f s", &nprocs, &joined)
		}
	}
	if nprocs != n || joined <= 0 {
		t.Fatalf("no join time in the header:\n%s", out)
	}
	rs := rows(out)
	if len(rs) != 1 || rs[0][8] != "0" || rs[0][12] != "0" {
		t.Errorf("rows %v", rs)
	}
	t.Logf("%d processes joined in %.3f s (whole run %.1f s)", n, joined, time.Since(start).Seconds())
	fmt.Fprintf(os.Stderr, "ncclbench scale test: %d processes joined in %.3f s\n", n, joined)
}

// A process without the job token cannot join; the others fail with one
// line instead of waiting for it forever.
func TestJobToken(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "token")
	os.WriteFile(tok, []byte("job-1\n"), 0o600)
	ps := runRanks(t, 2, nil, "all_reduce", "-b", "8", "-e", "8", "-n", "1", "--token-file", tok)
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	port := testport.Free(t)
	var bad []*proc
	for r, env := range []string{"NCCL_BENCH_TOKEN=job-1", "NCCL_BENCH_TOKEN=job-0"} {
		bad = append(bad, spawn(t, torchrunEnv(r, 2, port, env), "all_reduce", "-b", "8", "-e", "8", "-n", "1", "--rendezvous-timeout", "3"))
	}
	wait(t, bad, 30*time.Second)
	oneLine(t, bad, map[int]string{0: "timed out", 1: "auth"})
}

// Under PMI without a local rank, processes on one host take GPUs by their
// order on the host, not all GPU 0.
func TestPMIWithoutLocalRank(t *testing.T) {
	port := testport.Free(t)
	var ps []*proc
	for r := 0; r < 3; r++ {
		ps = append(ps, spawn(t, []string{"PMI_RANK=" + strconv.Itoa(r), "PMI_SIZE=3"}, "all_gather", "-b", "96", "-e", "96", "-n", "1", "--rendezvous", "127.0.0.1:"+port))
	}
	wait(t, ps, 30*time.Second)
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	out := ps[0].stdout.String()
	for r := 0; r < 3; r++ {
		if !regexp.MustCompile(fmt.Sprintf(`#  Rank %2d Group  0 Pid +\d+ on +\S+ device %2d `, r, r)).MatchString(out) {
			t.Errorf("rank %d is not on device %d:\n%s", r, r, out)
		}
	}
}

// --save writes rank 0's document, the bytes --json prints; the table still
// goes to stdout without --json.
func TestSave(t *testing.T) {
	dir := t.TempDir()
	withJSON, plain := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	ps := runRanks(t, 2, nil, "all_reduce", "-b", "64", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "--json", "--save", withJSON)
	if ps[0].code != 0 || ps[1].code != 0 {
		t.Fatalf("exit %d %d: %s %s", ps[0].code, ps[1].code, ps[0].stderr.String(), ps[1].stderr.String())
	}
	if b, err := os.ReadFile(withJSON); err != nil || !bytes.Equal(b, ps[0].stdout.Bytes()) {
		t.Errorf("--save %v: %q, want what --json printed", err, b)
	}
	ps = runRanks(t, 2, nil, "all_reduce", "-b", "64", "-e", "1K", "-f", "4", "-n", "2", "-w", "1", "--save", plain)
	b, err := os.ReadFile(plain)
	var r results.NCCLRun
	if err != nil || json.Unmarshal(b, &r) != nil || len(r.Results) != 3 || !strings.Contains(ps[0].stdout.String(), "Avg bus bandwidth") {
		t.Errorf("--save without --json: %v, %d results; stdout:\n%s", err, len(r.Results), ps[0].stdout.String())
	}
}
