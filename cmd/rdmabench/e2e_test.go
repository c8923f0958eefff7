package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testenv"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/internal/hwtest"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

// The test binary doubles as rdmabench, so tests can run a server in a
// separate process and kill it.
// envHooks are the engine's test hooks as these tests set them: from the
// environment, so that a server the tests start as a process of its own
// (RDMABENCH_RUN_MAIN) gets them too. The shipped binary reads none.
func envHooks() engine.Hooks {
	h := engine.Hooks{SlowQP: -1}
	h.CorruptMessage, _ = strconv.ParseUint(os.Getenv("RDMABENCH_VERIFY_CORRUPT"), 10, 64)
	h.StallAt, _ = strconv.ParseUint(os.Getenv("RDMABENCH_STALL_AT"), 10, 64)
	if n, err := strconv.Atoi(os.Getenv("RDMABENCH_SLOW_QP")); err == nil {
		h.SlowQP = n
	}
	return h
}

func TestMain(m *testing.M) {
	engine.TestHooks = envHooks
	if os.Getenv("RDMABENCH_RUN_MAIN") == "1" {
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	if addr := os.Getenv(triggerEnv); addr != "" {
		os.Exit(serveTriggers(addr))
	}
	hwtest.Main(m, removeFakeCUDA, testenv.RemoveFakeVerbs)
}

func needRDMA(t testing.TB) { hwtest.NeedRDMA(t) }

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = runMain(args, &o, &e)
	return code, o.String(), e.String()
}

// jsonRun is the report as results/ defines it: tests decode the JSON
// strictly into it, so a field the report writes and the schema lacks (or
// a renamed one) fails them.
type jsonRun = results.Run

func decodeRun(t *testing.T, out string) jsonRun {
	t.Helper()
	var r jsonRun
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	if r.Schema != results.Schema {
		t.Fatalf("schema %d, want %d", r.Schema, results.Schema)
	}
	if !reflect.DeepEqual(r.Version, toolInfo()) {
		t.Errorf("version %+v, want %+v (what rdmabench version says)", r.Version, toolInfo())
	}
	return r
}

// checkResults asserts every size is present with plausible figures.
func checkResults(t *testing.T, r jsonRun, sizes []int, latency bool) {
	t.Helper()
	if len(r.Results) != len(sizes) {
		t.Fatalf("%d results, want %d", len(r.Results), len(sizes))
	}
	for i, res := range r.Results {
		if res.Size != sizes[i] || res.Iterations == 0 {
			t.Errorf("result %d: size %d iterations %d, want size %d", i, res.Size, res.Iterations, sizes[i])
		}
		if latency {
			l := res.Lat
			if l == nil {
				t.Fatalf("size %d: no lat_us", res.Size)
			}
			ordered := []float64{l.Min, l.P50, l.P90, l.P99, l.P99_9, l.P99_99}
			for j := 1; j < len(ordered); j++ {
				if ordered[j] < ordered[j-1] {
					t.Errorf("size %d: percentiles out of order: %v", res.Size, ordered)
				}
			}
			// p99.99 comes from a bucket that may sit a hair above the
			// exact max (3 significant figures).
			if l.Min <= 0 || l.Mean < l.Min || l.Mean > l.Max || l.P99_99 > l.Max*1.001 || l.Stdev < 0 {
				t.Errorf("size %d: implausible latency %+v", res.Size, *l)
			}
		} else if res.BWAvgGbps <= 0 || res.BWBurstGbps < res.BWAvgGbps || res.MsgRateMpps <= 0 {
			t.Errorf("size %d: implausible bandwidth %+v", res.Size, res)
		}
	}
}

func TestE2ELoopbackAllTests(t *testing.T) {
	needRDMA(t)
	for _, test := range []string{"send-bw", "write-bw", "read-bw", "send-lat", "write-lat", "read-lat"} {
		t.Run(test, func(t *testing.T) {
			code, out, errOut := run(test, "--loopback", "-n", "300", "-s", "4K", "--json", "--timeout", "60s")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			r := decodeRun(t, out)
			if string(r.Test) != strings.ReplaceAll(test, "-", "_") || r.Device == "" || r.MTU == 0 || r.Error != "" {
				t.Errorf("run header %+v", r)
			}
			checkResults(t, r, []int{4096}, strings.HasSuffix(test, "-lat"))
		})
	}
}

func TestE2ESizeSweepText(t *testing.T) {
	needRDMA(t)
	code, out, errOut := run("write-bw", "--loopback", "-a", "-n", "20", "--warmup", "2", "--report-gbits")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "BW average[Gb/sec]") {
		t.Errorf("no Gb/s header:\n%s", out)
	}
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 5 {
			if n, err := strconv.Atoi(f[0]); err == nil && n >= 2 {
				rows++
			}
		}
	}
	if rows != 23 {
		t.Errorf("%d size rows, want 23 (2 B to 8 MiB):\n%s", rows, out)
	}
}

func TestE2EDurationMode(t *testing.T) {
	needRDMA(t)
	for _, test := range []string{"write-bw", "send-lat"} {
		start := time.Now()
		code, out, errOut := run(test, "--loopback", "-D", "3", "-s", "64", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", test, code, errOut)
		}
		if el := time.Since(start); el < 3*time.Second || el > 30*time.Second {
			t.Errorf("%s -D 3 took %v", test, el)
		}
		checkResults(t, decodeRun(t, out), []int{64}, strings.HasSuffix(test, "-lat"))
	}
}

// waitListen waits until something listens on the TCP port, reading
// /proc/net/tcp rather than connecting.
func waitListen(t *testing.T, port string) {
	t.Helper()
	p, _ := strconv.Atoi(port)
	listening := regexp.MustCompile(fmt.Sprintf(":%04X 0+:0000 0A ", p))
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile("/proc/net/tcp")
		b6, _ := os.ReadFile("/proc/net/tcp6")
		if listening.Match(append(b, b6...)) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("nothing listens on port %s after 10 s", port)
}

// startServer runs "rdmabench serve" as a child process on a free port.
func startServer(t *testing.T, extra ...string) (port string, cmd *exec.Cmd, log *syncbuf.Buffer) {
	t.Helper()
	port = testport.Free(t)
	args := append([]string{"serve", "--bind", "127.0.0.1", "-p", port}, extra...)
	cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RDMABENCH_RUN_MAIN=1")
	// The process's output is copied into log by exec's goroutine while
	// the test reads it: a plain bytes.Buffer would be a data race.
	log = &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() && cmd.ProcessState == nil {
			// A server still running when its test failed may be the stuck
			// part: SIGQUIT makes Go write every goroutine's stack first.
			cmd.Process.Signal(syscall.SIGQUIT)
			exited := make(chan struct{})
			go func() { cmd.Wait(); close(exited) }()
			select {
			case <-exited:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				<-exited
			}
			t.Logf("server log (last 200 lines, its SIGQUIT stack dump at the end):\n%s", lastLines(log.String(), 200))
			return
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; i < 100; i++ { // wait for the listener
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, 100*time.Millisecond); err == nil {
			c.Close()
			return port, cmd, log
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server did not listen: %s", log)
	return
}

// waitForLog waits until log holds every one of wants, up to limit: a
// server writes its log line when it has handled the event, which may be
// after the client that caused it has returned.
func waitForLog(log *syncbuf.Buffer, limit time.Duration, wants ...string) bool {
	has := func() bool {
		s := log.String()
		for _, w := range wants {
			if !strings.Contains(s, w) {
				return false
			}
		}
		return true
	}
	for end := time.Now().Add(limit); !has(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			return false
		}
	}
	return true
}

func TestE2EClientServer(t *testing.T) {
	needRDMA(t)
	port, _, log := startServer(t)
	// Garbage first: the server must log it and keep serving.
	c, err := net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	c.Close()
	// A valid greeting followed by an oversized message.
	c, err = net.Dial("tcp", "127.0.0.1:"+port)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(fmt.Sprintf("RDMABENCH/%d\n\xff\xff\xff\xff", proto.ProtocolVersion)))
	bufio.NewReader(c).ReadString('\n')
	c.Close()
	for _, test := range []string{"send-bw", "write-lat", "read-bw"} {
		code, out, errOut := run(test, "-p", port, "-n", "200", "-s", "1K", "--json", "127.0.0.1")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s\nserver: %s", test, code, errOut, log)
		}
		checkResults(t, decodeRun(t, out), []int{1024}, strings.HasSuffix(test, "-lat"))
	}
	if !waitForLog(log, 10*time.Second, "not an rdmabench endpoint", "rejected") {
		t.Errorf("server log lacks the rejected garbage and oversized message:\n%s", log)
	}
}

func TestE2ENotRdmabenchPeer(t *testing.T) {
	// The client opens its device before it connects (the server allows
	// the handshake and plan only HandshakeTimeout): a device first.
	needRDMA(t)
	// A server that accepts and stays silent, as a perftest server does
	// while it waits for its own client's message.
	ln := silentServer(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	start := time.Now()
	code, _, errOut := run("write-bw", "-p", port, "127.0.0.1")
	if code == 0 || !strings.Contains(errOut, "not an rdmabench endpoint") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want one line saying the peer is not rdmabench", code, errOut)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
}

func TestE2EServerKilledMidRun(t *testing.T) {
	needRDMA(t)
	port, srv, _ := startServer(t)
	go func() {
		time.Sleep(4 * time.Second)
		srv.Process.Kill()
	}()
	start := time.Now()
	code, out, errOut := run("write-bw", "-p", port, "-a", "-n", "200", "--warmup", "0", "--json", "--timeout", "60s", "127.0.0.1")
	elapsed := time.Since(start)
	if code == 0 {
		t.Fatalf("client exited 0 after its server was killed")
	}
	if elapsed > 40*time.Second {
		t.Errorf("client took %v to notice", elapsed)
	}
	r := decodeRun(t, out)
	if len(r.Results) == 0 || len(r.Results) == 23 {
		t.Errorf("%d sizes reported; want the ones measured before the kill", len(r.Results))
	}
	if r.Error == "" || !strings.Contains(errOut, "size") {
		t.Errorf("error %q / stderr %q should name the failed size", r.Error, errOut)
	}
	t.Logf("after %v: %d sizes kept; %s", elapsed, len(r.Results), strings.TrimSpace(errOut))
}

func TestE2EHistogramMatchesRawSamples(t *testing.T) {
	needRDMA(t)
	dir := t.TempDir()
	raw, hgrm := filepath.Join(dir, "raw.csv"), filepath.Join(dir, "lat.hgrm")
	code, out, errOut := run("write-lat", "--loopback", "-n", "3000", "-s", "8", "--raw", raw, "--hgrm", hgrm, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	r := decodeRun(t, out)
	checkResults(t, r, []int{8}, true)
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")[1:]
	var samples []float64
	for _, l := range lines {
		f := strings.Split(l, ",")
		ns, err := strconv.ParseFloat(f[3], 64)
		if err != nil {
			t.Fatalf("raw line %q", l)
		}
		samples = append(samples, ns/1e3)
	}
	if len(samples) != 3000 {
		t.Fatalf("%d raw samples, want 3000", len(samples))
	}
	sort.Float64s(samples)
	lat := r.Results[0].Lat
	exact := func(p float64) float64 { return samples[int(math.Ceil(p/100*float64(len(samples))))-1] }
	for _, c := range []struct {
		name      string
		p, fromHd float64
	}{{"p50", 50, lat.P50}, {"p90", 90, lat.P90}, {"p99", 99, lat.P99}} {
		want := exact(c.p)
		if math.Abs(c.fromHd-want) > want*0.002+0.001 {
			t.Errorf("%s: histogram %.3f µs, raw samples %.3f µs", c.name, c.fromHd, want)
		}
	}
	if lat.Max != samples[len(samples)-1] || lat.Min != samples[0] {
		t.Errorf("min/max %.3f/%.3f, raw %.3f/%.3f", lat.Min, lat.Max, samples[0], samples[len(samples)-1])
	}
	h, err := os.ReadFile(hgrm)
	if err != nil || !strings.Contains(string(h), "Percentile") || !strings.Contains(string(h), "#[Max") {
		t.Errorf("hgrm file: %v\n%s", err, h)
	}
}

func TestE2EBadInputs(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"write-bw", "--bogus"}, "unknown flag"},
		{[]string{"write-bw", "-s", "12Q", "--loopback"}, "bad size"},
		{[]string{"write-bw", "-s", "16M", "--loopback"}, "exceeds"},
		{[]string{"write-bw", "-a", "-s", "8", "--loopback"}, "exclude"},
		{[]string{"write-bw"}, "HOST"},
		{[]string{"write-bw", "--loopback", "host"}, "no HOST"},
		{[]string{"write-bw", "-t", "0", "--loopback"}, "depths"},
		{[]string{"write-bw", "-m", "1500", "--loopback"}, "MTU"},
		{[]string{"read-bw", "-u", "0", "--loopback"}, "--qp-timeout 0 outside 1..31"},
		{[]string{"write-bw", "-p", "70000", "--loopback"}, "--port"},
		{[]string{"write-bw", "--hgrm", "x", "--loopback"}, "latency tests"},
		{[]string{"write-lat", "-d", "no_such_dev0", "--loopback"}, noDeviceText()},
		{[]string{"devices", "-d", "no_such_dev0"}, noDeviceText()},
		{[]string{"serve", "extra"}, "no arguments"},
		{[]string{"serve", "--max-handshakes", "0"}, "--max-handshakes must be at least 1"},
		{[]string{"serve", "--queue-timeout", "0s"}, "--queue-timeout"},
		{[]string{"serve", "--token-file", "/nonexistent/token"}, "token file"},
		{[]string{"write-bw", "--token-file", "/nonexistent/token", "127.0.0.1"}, "token file"},
		{[]string{"frobnicate"}, "unknown command"},
		{[]string{"write-bw", "--use-cuda", "gpu0", "--loopback"}, "--use-cuda: GPU \"gpu0\": want a device index"},
		{[]string{"write-bw", "--use-cuda=", "--loopback"}, "--use-cuda needs a GPU"},
		{[]string{"write-bw", "--peer-use-cuda", "-1", "--loopback"}, "GPU index -1 outside"},
		{[]string{"write-bw", "--use-dmabuf", "--loopback"}, "--use-dmabuf registers GPU memory"},
		{[]string{"write-bw", "--use-cuda", "0", "--mem-node", "0", "--loopback"}, "--mem-node places host memory"},
		{[]string{"write-bw", "--peer-mem-node", "5000", "--loopback"}, "--peer-mem-node 5000 outside"},
		{[]string{"write-bw", "--use-cuda", "0", "--peer-use-cuda", "1", "--hugepages", "--loopback"}, "both sides' buffers are on GPUs"},
		{[]string{"send-lat", "--rate", "abc", "--loopback"}, "--rate: bad list"},
		{[]string{"send-lat", "--rate", "1000,0", "--loopback"}, "--rate: bad list"},
		{[]string{"send-lat", "--rate", "200000000", "--loopback"}, "rate 200000000 outside 1..100000000"},
		{[]string{"write-bw", "--rate", "1000", "--loopback"}, "--rate applies to latency tests"},
		{[]string{"send-lat", "--rate", "1000", "-D", "2", "--loopback"}, "no -D"},
		{[]string{"send-lat", "--rate", "1000", "-c", "UC", "--loopback"}, "--rate needs RC"},
		{[]string{"read-lat", "--rate", "1000", "-t", "2000", "--loopback"}, "at most 1024 requests in flight"},
		{[]string{"send-lat", "--rate", "1000", "--repeat", "2", "--loopback"}, "--rate and --repeat exclude each other"},
	}
	for _, tt := range tests {
		code, _, errOut := run(tt.args...)
		if code == 0 || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want non-zero and one line containing %q", tt.args, code, errOut, tt.want)
		}
	}
}

// noDeviceText is what `devices -d no_such_dev0` must say: the name, where
// RDMA exists, else that the kernel has none.
func noDeviceText() string {
	if names, _ := verbs.DeviceNames(); len(names) > 0 {
		return "no_such_dev0"
	}
	return "no RDMA in this kernel"
}

// rdmabenchProcess starts this test binary as rdmabench with args.
func rdmabenchProcess(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RDMABENCH_RUN_MAIN=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, &out, &errOut
}

func TestE2ECtrlCKeepsWhatWasMeasured(t *testing.T) {
	needRDMA(t)
	for _, c := range []struct {
		args    []string
		latency bool
	}{
		{[]string{"send-lat", "--loopback", "-s", "8", "-n", "100000000", "--json"}, true},
		{[]string{"write-bw", "--loopback", "-a", "-n", "100", "--json"}, false},
		// Interrupted in the loaded pass, while the loads drain or while
		// the server's verdict is awaited (or in the idle pass on a slow
		// host): the loads stop and join, the idle figures stand. (At
		// 20000 a Ctrl-C after the loaded pass lost them all.)
		{[]string{"write-lat", "--loopback", "-n", "60000", "--load", "write-bw -s 64K", "--json"}, true},
		// Interrupted in the open-loop pass (200 s at 100/s).
		{[]string{"send-lat", "--loopback", "-n", "20000", "--rate", "100", "--json"}, true},
	} {
		cmd, out, errOut := rdmabenchProcess(t, c.args...)
		time.Sleep(4 * time.Second)
		cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("%v: still running 20 s after Ctrl-C", c.args)
		}
		if code := cmd.ProcessState.ExitCode(); code != 130 {
			t.Errorf("%v: exit %d, want 130; stderr %q", c.args, code, errOut)
		}
		r := decodeRun(t, out.String())
		if !r.Interrupted || len(r.Results) == 0 || !strings.Contains(errOut.String(), "interrupted") {
			t.Fatalf("%v: interrupted %v with %d results; stderr %q", c.args, r.Interrupted, len(r.Results), errOut)
		}
		last := r.Results[len(r.Results)-1]
		if c.latency && (last.Lat == nil || last.Iterations == 0) {
			t.Errorf("latency run lost its samples: %+v", last)
		}
		t.Logf("%v: %d results kept, last %d B × %d", c.args[0], len(r.Results), last.Size, last.Iterations)
	}
}

func TestE2EPerftestServerIsNamed(t *testing.T) {
	needRDMA(t)
	if _, err := exec.LookPath("ib_write_bw"); err != nil {
		t.Skip("needs perftest's ib_write_bw")
	}
	port := testport.Free(t)
	srv := exec.Command("timeout", "30", "ib_write_bw", "-p", port)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	waitListen(t, port) // without connecting: perftest serves one connection
	code, _, errOut := run("write-bw", "-p", port, "127.0.0.1")
	if code == 0 || !strings.Contains(errOut, "not an rdmabench endpoint") || !strings.Contains(errOut, "perftest") {
		t.Errorf("exit %d, stderr %q; want a line naming a non-rdmabench (perftest) peer", code, errOut)
	}
}

// With a token, serve runs only clients that hold it; a client without it
// or with another gets one line saying so, and the server logs it and
// serves on. Without a token, serve says on one line that anyone may use it.
func TestE2EToken(t *testing.T) {
	needRDMA(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	port, _, log := startServer(t, "--token-file", tokenFile)
	args := []string{"write-bw", "-p", port, "-n", "100", "-s", "1K", "127.0.0.1"}
	for _, tt := range []struct {
		name, env, want string
	}{
		{"no token", "", "the server requires a token: --token-file or RDMABENCH_TOKEN"},
		{"wrong token", "guess", "the server refused our token"},
	} {
		t.Setenv(tokenEnv, tt.env)
		code, _, errOut := run(args...)
		// Refused at connect, before anything was measured: exit 3.
		if code != exitcode.NotMeasured || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want 3 and one line with %q", tt.name, code, errOut, tt.want)
		}
	}
	t.Setenv(tokenEnv, "")
	if out := mustRun(t, append([]string{args[0], "--token-file", tokenFile}, args[1:]...)...); !strings.Contains(out, "1024") {
		t.Errorf("with the token: %s", out)
	}
	for _, want := range []string{"wrong token", "without answering the token challenge", "done"} {
		if !waitForLog(log, 10*time.Second, want) {
			t.Errorf("server log lacks %q:\n%s", want, log)
		}
	}
	if strings.Contains(log.String(), "anyone who can reach") {
		t.Errorf("a server with a token says it is open:\n%s", log)
	}
	_, _, open := startServer(t)
	if !waitForLog(open, 10*time.Second, "anyone who can reach") {
		t.Errorf("a server without a token does not say it is open:\n%s", open)
	}
}

// --help prints the usage once, exit 0, for every command.
func TestHelpOnce(t *testing.T) {
	for _, cmd := range []string{"write-bw", "send-lat", "serve", "compare", "plot", "fleet", "mesh"} {
		code, _, errOut := run(cmd, "--help")
		if n := strings.Count(strings.ToLower(errOut), "usage: rdmabench"); code != 0 || n != 1 {
			t.Errorf("%s --help: exit %d, %d usage lines:\n%s", cmd, code, n, errOut)
		}
	}
}

// silentServer listens at addr and accepts every connection without a
// word until the test ends: a peer that never answers.
func silentServer(t *testing.T, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	return ln
}
