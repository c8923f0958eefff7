package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/csrc"
)

// Inline follows the size asked for, capped by what the device granted: rxe
// grants 16 bytes when asked for 0, and -I 0 must still send nothing inline.
func TestE2EInlineUsesTheSizeAskedFor(t *testing.T) {
	needRDMA(t)
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"send-lat", "-I", "0"}, 0},
		{[]string{"send-lat"}, 236},
		{[]string{"send-lat", "-c", "UD", "-s", "64"}, 188},
		{[]string{"write-lat"}, 220},
		{[]string{"write-bw", "-s", "8"}, 0},
	} {
		_, out, _ := run(append(tt.args, "--loopback", "-n", "50", "--json")...)
		r := decodeRun(t, out)
		if r.Inline != tt.want || (r.InlineGranted != 0 && r.InlineGranted < r.Inline) || r.PeerInline == nil || *r.PeerInline != tt.want {
			t.Errorf("%v: inline %d (granted %d, peer %v), want %d", tt.args, r.Inline, r.InlineGranted, r.PeerInline, tt.want)
		}
	}
	_, out, _ := run("send-lat", "-I", "0", "--loopback", "-n", "50")
	if !strings.Contains(out, "Max inline data : 0[B] (the device granted") {
		t.Errorf("the header does not say what the device granted:\n%s", out)
	}
}

// The header names what a latency sample spans and the warm-up dropped;
// --warmup 0 keeps every sample.
func TestE2ELatencyDefinitionAndWarmup(t *testing.T) {
	needRDMA(t)
	_, out, _ := run("send-lat", "--loopback", "-n", "200")
	for _, want := range []string{"Latency         : half the round trip: post of the SEND", "perftest's sample includes them", "Warm-up         : 20 iterations dropped"} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q:\n%s", want, out)
		}
	}
	_, out, _ = run("write-lat", "--loopback", "-n", "200", "--warmup", "0", "--json")
	r := decodeRun(t, out)
	if r.Warmup != 0 || len(r.Results) != 1 || r.Results[0].Iterations != 200 {
		t.Errorf("--warmup 0: warm-up %d, %d samples, want 0 and 200", r.Warmup, r.Results[0].Iterations)
	}
	_, out, _ = run("write-bw", "--loopback", "-n", "100")
	if !strings.Contains(out, "BW burst[MiB/sec]") || strings.Contains(out, "BW peak[") {
		t.Errorf("bandwidth table names its burst column wrongly:\n%s", out)
	}
}

// Post lists that do not divide the window, with and without moderation,
// never wait for a completion that was not asked for.
func TestE2EPostListsComplete(t *testing.T) {
	needRDMA(t)
	for _, pl := range [][]string{{"-l", "7"}, {"-l", "48"}, {"-l", "64"}, {"-l", "48", "-Q", "7"}, {"-l", "64", "-t", "100"}} {
		args := append([]string{"write-bw", "--loopback", "-s", "64", "-n", "3001", "--timeout", "30s"}, pl...)
		rs := runJSON(t, args...)
		if len(rs) != 1 || rs[0].Iterations != 3001 {
			t.Errorf("%v: %+v", pl, rs)
		}
	}
}

// Threads sharing one CQ: exact counts, every byte verified, for send and
// write.
func TestE2ESharedCQVerifyExact(t *testing.T) {
	needRDMA(t)
	for _, test := range []string{"send-bw", "write-bw"} {
		rs := runJSON(t, test, "--loopback", "--threads", "2", "-q", "4", "--shared-cq", "--verify", "-n", "500", "-s", "4K")
		r := rs[0]
		if r.Iterations != 2000 || r.BadBytes == nil || *r.BadBytes != 0 {
			t.Errorf("%s: %d messages, bad bytes %v; want 2000 and 0", test, r.Iterations, r.BadBytes)
		}
		if test == "send-bw" && r.Received != 2000+4*50 { // the receiver counts the warm-up too
			t.Errorf("%s: the receiver counted %d messages, want %d", test, r.Received, 2000+4*50)
		}
	}
	code, _, errOut := run("send-lat", "--loopback", "--shared-cq", "-q", "2")
	if code != 2 || !strings.Contains(errOut, "--shared-cq applies to bandwidth tests") {
		t.Errorf("send-lat --shared-cq: exit %d %q", code, errOut)
	}
}

// In loopback the two sides' loops get disjoint CPUs; a plan that would
// spin two loops on one CPU is refused unless allowed.
func TestE2ELoopbackSplitsCPUs(t *testing.T) {
	needRDMA(t)
	r := decodeRun(t, mustRun(t, "write-bw", "--loopback", "--cpus", "0,1", "-n", "100", "--json"))
	if len(r.CPUs) != 1 || r.CPUs[0] != 0 || len(r.PeerCPUs) != 1 || r.PeerCPUs[0] != 1 {
		t.Errorf("--cpus 0,1: client %v, peer %v; want 0 and 1", r.CPUs, r.PeerCPUs)
	}
	code, _, errOut := run("write-bw", "--loopback", "--cpus", "0", "-n", "100")
	if code == 0 || !strings.Contains(errOut, "both sides' loops would busy-poll CPUs 0") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("--cpus 0: exit %d, %q", code, errOut)
	}
	r = decodeRun(t, mustRun(t, "write-bw", "--loopback", "--cpus", "0", "--share-cpus", "-n", "100", "--json"))
	if len(r.CPUs) != 1 || len(r.PeerCPUs) != 1 {
		t.Errorf("--cpus 0 --share-cpus: %v, %v", r.CPUs, r.PeerCPUs)
	}
	code, _, errOut = run("write-bw", "--loopback", "--cpus", "0,1", "--threads", "2", "-q", "2", "-n", "100")
	if code == 0 || !strings.Contains(errOut, "2 busy-polling loop threads would share 1 CPUs") {
		t.Errorf("2 threads a side on 1 CPU each: exit %d, %q", code, errOut)
	}
	// The loop threads were pinned; none goes back to the runtime: every
	// thread left runs wherever the process may.
	want := allowedList(t, "self")
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, task := range tasks {
		if got := allowedList(t, strings.TrimPrefix(task, "/proc/")); got != want {
			t.Errorf("thread %s still pinned to %s after the run (process: %s)", task, got, want)
		}
	}
	if csrc.Running() != 0 {
		t.Errorf("%d loops still running", csrc.Running())
	}
}

func allowedList(t *testing.T, who string) string {
	b, err := os.ReadFile("/proc/" + who + "/status")
	if err != nil {
		return "" // the thread ended
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Cpus_allowed_list:") {
			return strings.TrimSpace(strings.TrimPrefix(l, "Cpus_allowed_list:"))
		}
	}
	return ""
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := run(args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return out
}

// Hundreds of QPs work up to the documented maximum: CQs hold what can be
// outstanding, the rx depth is lowered where the device's max_cqe says so
// (and the header says it), and the endpoints fit one control message.
func TestE2EManyQPs(t *testing.T) {
	needRDMA(t)
	out := mustRun(t, "send-bw", "--loopback", "-q", "512", "-n", "20", "--warmup", "0", "-s", "64")
	if !strings.Contains(out, "Note            : rx depth") {
		t.Errorf("-q 512 send: no note on the lowered rx depth:\n%s", out)
	}
	r := decodeRun(t, mustRun(t, "write-bw", "--loopback", "-q", "1024", "-n", "10", "--warmup", "0", "-s", "64", "--json"))
	if r.Results[0].Iterations != 10240 {
		t.Errorf("-q 1024: %d messages", r.Results[0].Iterations)
	}
}

// A server refuses plans beyond its budget before allocating anything, and
// the client prints the reason on one line.
func TestE2EServerBudget(t *testing.T) {
	needRDMA(t)
	port, _, sout := startServer(t, "--max-mem", "1M", "--max-qps", "8")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"write-bw", "--verify", "-s", "8M", "-q", "4"}, "serve --max-mem"},
		{[]string{"write-bw", "-q", "16"}, "the plan needs 16 QPs, this server allows 8 (serve --max-qps)"},
	} {
		code, _, errOut := run(append(tt.args, "-p", port, "-n", "10", "127.0.0.1")...)
		if code == 0 || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want one line with %q", tt.args, code, errOut, tt.want)
		}
	}
	if out := mustRun(t, "write-bw", "-p", port, "-n", "10", "-s", "4K", "127.0.0.1"); !strings.Contains(out, "4096") {
		t.Errorf("a plan within budget: %s", out)
	}
	if !strings.Contains(sout.String(), "serve --max-qps") {
		t.Errorf("server log: %s", sout.String())
	}
}

// Intervals come from the time that really passed, and the moderation is
// lowered so that they are not multiples of -Q.
func TestE2EIntervalsFineGrained(t *testing.T) {
	needRDMA(t)
	r := runJSON(t, "write-bw", "--loopback", "-D", "4", "--interval", "1", "-s", "64K")[0]
	if len(r.Intervals) < 3 || r.MinCQMod == 0 || r.MinCQMod >= 100 {
		t.Fatalf("intervals %+v, min CQ moderation %d", r.Intervals, r.MinCQMod)
	}
	odd := 0
	for i, iv := range r.Intervals {
		if iv.Messages%100 != 0 {
			odd++
		}
		// The last may be the partial one at the run's end.
		if d := iv.EndS - iv.StartS; d > 1.2 || (d < 0.9 && i < len(r.Intervals)-1) || d < 0.5 {
			t.Errorf("interval %d %+v lasted %.3f s", i, iv, d)
		}
	}
	if odd == 0 {
		t.Errorf("every interval is a multiple of -Q 100: %+v", r.Intervals)
	}
}
