package main

import (
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// jsonResult is one result as results/ defines it.
type jsonResult = results.Result

func runJSON(t *testing.T, args ...string) []jsonResult {
	t.Helper()
	code, out, errOut := run(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	return decodeRun(t, out).Results
}

// Every QP moves its share, with its own figure; a QP held to one request
// in flight (the test hook) shows as the minimum with Jain's index below 1,
// in iteration and duration mode.
func TestE2EPerQPOwnClocks(t *testing.T) {
	needRDMA(t)
	for _, extra := range [][]string{{"--threads", "2"}, {"--threads", "2", "--shared-cq"}, {"--threads", "1"}} {
		args := append([]string{"write-bw", "--loopback", "-q", "4", "-n", "200", "-s", "16K"}, extra...)
		rs := runJSON(t, args...)
		if len(rs) != 1 || len(rs[0].PerQPGbps) != 4 || rs[0].Spread == nil {
			t.Fatalf("%v: %+v", extra, rs)
		}
		for _, g := range rs[0].PerQPGbps {
			if g <= 0 {
				t.Errorf("%v: a QP moved nothing: %v", extra, rs[0].PerQPGbps)
			}
		}
		if j := rs[0].Spread.Jain; j <= 0.25 || j > 1 {
			t.Errorf("%v: Jain %v outside (1/n, 1]", extra, j)
		}
		if rs[0].Iterations != 800 {
			t.Errorf("%v: %d messages, want 4 QPs × 200", extra, rs[0].Iterations)
		}
	}
	t.Setenv("RDMABENCH_SLOW_QP", "2")
	for _, mode := range [][]string{{"-n", "300"}, {"-D", "2"}} {
		for _, threads := range []string{"1", "2"} {
			args := append([]string{"write-bw", "--loopback", "-q", "4", "-s", "16K", "--threads", threads}, mode...)
			r := runJSON(t, args...)[0]
			if len(r.PerQPGbps) != 4 || r.Spread == nil {
				t.Fatalf("%v: %+v", args, r)
			}
			if r.Spread.MinGbps != r.PerQPGbps[2] || r.Spread.Jain >= 0.99 || r.PerQPGbps[2] >= 0.8*r.Spread.MedianGbps {
				t.Errorf("%v: slowed QP 2 not the clear minimum: per QP %v, spread %+v", args, r.PerQPGbps, *r.Spread)
			}
		}
	}
}

func TestE2ESweepHasEveryCell(t *testing.T) {
	needRDMA(t)
	rs := runJSON(t, "send-bw", "--loopback", "-a", "-n", "4", "--warmup", "0", "--qps", "1,2,3", "--threads", "2")
	if len(rs) != 23*3 {
		t.Fatalf("%d cells, want 23 sizes × 3 QP counts", len(rs))
	}
	seen := map[[2]int]bool{}
	for _, r := range rs {
		seen[[2]int{r.Size, r.QPs}] = true
		if r.BWAvgGbps <= 0 || r.Iterations != uint64(4*r.QPs) {
			t.Errorf("cell %d B × %d QPs: %+v", r.Size, r.QPs, r)
		}
	}
	for size := 2; size <= 8<<20; size *= 2 {
		for _, q := range []int{1, 2, 3} {
			if !seen[[2]int{size, q}] {
				t.Errorf("missing cell %d B × %d QPs", size, q)
			}
		}
	}
	code, out, errOut := run("write-bw", "--loopback", "-s", "4K", "-n", "50", "--qps", "1,4")
	if code != 0 || !strings.Contains(out, "#qps") || !strings.Contains(out, "Jain") || !strings.Contains(out, "per QP") {
		t.Errorf("text sweep: exit %d %s\n%s", code, errOut, out)
	}
}

func TestE2EBidirectional(t *testing.T) {
	needRDMA(t)
	for _, test := range []string{"write-bw", "send-bw", "read-bw"} {
		rs := runJSON(t, test, "--loopback", "-b", "-n", "200", "-s", "16K", "-q", "2")
		b := rs[0].Bidir
		if b == nil || b.SentGbps <= 0 || b.ReceivedGbps <= 0 || math.Abs(b.SentGbps+b.ReceivedGbps-rs[0].BWAvgGbps) > 1e-9 {
			t.Errorf("%s -b: %+v", test, rs[0])
		}
	}
}

func TestE2EIntervals(t *testing.T) {
	needRDMA(t)
	code, out, errOut := run("write-bw", "--loopback", "-D", "3", "--interval", "1", "-s", "16K")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, " s] "); n != 3 {
		t.Errorf("%d interval lines for -D 3 --interval 1, want 3:\n%s", n, out)
	}
	rs := runJSON(t, "write-bw", "--loopback", "-D", "2", "--interval", "0.5", "-s", "16K")
	if len(rs[0].Intervals) != 4 {
		t.Errorf("%d intervals in JSON for -D 2 --interval 0.5, want 4", len(rs[0].Intervals))
	}
	for i, iv := range rs[0].Intervals {
		if iv.Messages == 0 || iv.Gbps <= 0 {
			t.Errorf("interval %d empty: %+v", i, iv)
		}
	}
}

func TestE2EOperationsAndTransports(t *testing.T) {
	needRDMA(t)
	cases := [][]string{
		{"write-bw", "--imm", "-s", "4K"},
		{"send-bw", "--imm", "-s", "4K"},
		{"atomic-bw"},
		{"atomic-bw", "-A", "CMP_AND_SWAP"},
		{"send-bw", "-c", "UC", "-s", "4K"},
		{"write-bw", "-c", "UC", "-s", "4K"},
		{"send-bw", "-c", "UD", "-s", "1K"},
		{"write-bw", "-s", "8", "-l", "16", "-n", "2000"},
	}
	for _, c := range cases {
		args := append([]string{c[0], "--loopback", "-n", "300"}, c[1:]...)
		rs := runJSON(t, args...)
		if len(rs) != 1 || rs[0].BWAvgGbps <= 0 || rs[0].MsgRateMpps <= 0 {
			t.Errorf("%v: %+v", c, rs)
		}
		if rs[0].CPU == nil || rs[0].CPU.Local.UserPct+rs[0].CPU.Local.SysPct <= 0 {
			t.Errorf("%v: no CPU use reported: %+v", c, rs[0].CPU)
		}
	}
	for _, c := range [][]string{{"atomic-lat"}, {"send-lat", "-c", "UD", "-s", "64"}, {"send-lat", "-c", "UC"}, {"write-lat", "-c", "UC"}} {
		code, out, errOut := run(append([]string{c[0], "--loopback", "-n", "300", "--json"}, c[1:]...)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", c, code, errOut)
			continue
		}
		checkResults(t, decodeRun(t, out), []int{sizeOf(c)}, true)
	}
}

func sizeOf(args []string) int {
	for i, a := range args {
		if a == "-s" {
			n, _ := strconv.Atoi(args[i+1])
			return n
		}
	}
	if args[0] == "atomic-lat" {
		return 8
	}
	return 2
}

func TestE2EUDRejectsMessagesOverMTU(t *testing.T) {
	needRDMA(t)
	code, _, errOut := run("send-bw", "--loopback", "-c", "UD", "-s", "4K", "-n", "10")
	if code == 0 || !strings.Contains(errOut, "UD messages must fit one packet") || !strings.Contains(errOut, "path MTU") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

func TestE2EVerifyCatchesCorruption(t *testing.T) {
	needRDMA(t)
	for _, test := range []string{"write-bw", "send-bw", "read-bw"} {
		rs := runJSON(t, test, "--loopback", "--verify", "-n", "200", "--warmup", "0", "-s", "8K", "-q", "2")
		if rs[0].BadBytes == nil || *rs[0].BadBytes != 0 {
			t.Errorf("%s --verify on a clean run: bad bytes %v", test, rs[0].BadBytes)
		}
		rs = runJSON(t, test, "--loopback", "--verify", "-b", "-n", "100", "-s", "4K")
		if rs[0].BadBytes == nil || *rs[0].BadBytes != 0 || rs[0].Bidir == nil {
			t.Errorf("%s --verify -b: %+v", test, rs[0])
		}
		// The hook damages message 200, the last: it must be caught.
		os.Setenv("RDMABENCH_VERIFY_CORRUPT", "200")
		code, out, errOut := run(test, "--loopback", "--verify", "-n", "200", "--warmup", "0", "-s", "8K")
		os.Unsetenv("RDMABENCH_VERIFY_CORRUPT")
		if code == 0 || strings.Count(errOut, "data verification failed") != 1 || !strings.Contains(out, "BAD BYTES") {
			t.Errorf("%s: corruption not reported: exit %d, stderr %q\n%s", test, code, errOut, out)
		}
	}
}
