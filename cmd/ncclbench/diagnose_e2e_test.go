// End to end on the stand-in: the straggler report (-I 1), and the hung
// rank named when -T fires.

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/straggler"
)

// The stand-in paces every operation (RDMABENCH_FAKE_NCCL_PACE_MS), so
// that an iteration is long against a busy host's scheduling hiccups, and
// the delays injected are long against an iteration.
const paceMs = 5

// stragglerRun runs n ranks with -I 1 and --save, and returns rank 0's
// text output and the saved document.
func stragglerRun(t *testing.T, ps []*proc, save string) (string, *bench.Run) {
	t.Helper()
	wait(t, ps, 60*time.Second)
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	b, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	var run bench.Run
	if err := json.Unmarshal(b, &run); err != nil {
		t.Fatal(err)
	}
	if run.Straggler == nil {
		t.Fatalf("no straggler analysis in %s", b)
	}
	return ps[0].stdout.String(), &run
}

// stragglerLines is the report under the table.
func stragglerLines(out string) string {
	var b strings.Builder
	on := false
	for _, l := range strings.Split(out, "\n") {
		on = on || strings.HasPrefix(l, "# Stragglers:")
		if on && strings.HasPrefix(l, "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// onlyNamed checks that the report names rank alone, and returns its findings.
func onlyNamed(t *testing.T, rep *straggler.Report, rank int) []straggler.Finding {
	t.Helper()
	var mine []straggler.Finding
	for _, f := range rep.Stragglers {
		if f.Rank.Rank != rank {
			t.Errorf("rank %d named too: %+v", f.Rank.Rank, f)
			continue
		}
		mine = append(mine, f)
	}
	if len(mine) == 0 {
		t.Fatalf("rank %d not named: %+v", rank, rep)
	}
	return mine
}

// A rank whose every collective the stand-in holds 40 ms longer is named,
// with its host and GPU, by at least half that much, in the text under the
// table and in the JSON: queued (-z 0) and timed one by one (-z 3, where
// the host issues each after a barrier, so only its finish is late).
func TestSlowRankNamed(t *testing.T) {
	const slowMs = 40
	for _, z := range []string{"0", "3"} {
		t.Run("-z "+z, func(t *testing.T) {
			save := filepath.Join(t.TempDir(), "run.json")
			ps := start(t, 4, []string{fmt.Sprintf("RDMABENCH_FAKE_NCCL_PACE_MS=%d", paceMs), fmt.Sprintf("RDMABENCH_FAKE_NCCL_SLOW=2:%d", slowMs)},
				"all_reduce", "-b", "1K", "-e", "1K", "-n", "8", "-w", "1", "-c", "0", "-I", "1", "-z", z, "--save", save)
			out, run := stragglerRun(t, ps, save)
			t.Log("\n" + stragglerLines(out))
			dev := run.Devices[2]
			slow := false
			for _, f := range onlyNamed(t, run.Straggler, 2) {
				if f.Rank.Host != dev.Host || f.Rank.Device != dev.Device || f.Rank.Pid != dev.Pid {
					t.Errorf("named as %+v, the device is %+v", f.Rank, dev)
				}
				if f.MedianLagUs < slowMs*1e3/2 || !f.Consistent || f.Late*2 < f.Iterations {
					t.Errorf("finding %+v: want late by >= %d ms in most of the iterations", f, slowMs/2)
				}
				slow = slow || f.Kind == straggler.SlowFinish
			}
			if !slow {
				t.Errorf("not named slow to finish")
			}
			text := stragglerLines(out)
			want := fmt.Sprintf("#   rank 2 (%s GPU %d, pid %d): slow to finish steadily, costing ", dev.Host, dev.Device, dev.Pid)
			if !strings.Contains(text, want) || strings.Contains(text, "no straggler") {
				t.Errorf("report under the table lacks %q:\n%s", want, out)
			}
		})
	}
}

// A rank stopped from outside for a second in the middle of a timed loop
// and continued, as a preempted process is, is named once for how much
// it cost, not for how often.
func TestPreemptedRankNamed(t *testing.T) {
	const stop = time.Second
	dir := t.TempDir()
	save, trace := filepath.Join(dir, "run.json"), filepath.Join(dir, "trace")
	ps := start(t, 4, []string{fmt.Sprintf("RDMABENCH_FAKE_NCCL_PACE_MS=%d", paceMs), "RDMABENCH_FAKE_NCCL_TRACE=" + trace},
		"all_reduce", "-b", "1K", "-e", "1K", "-n", "40", "-w", "0", "-c", "0", "-I", "1", "--save", save)
	defer killAll(ps)
	// Operation 0 is the untimed one before the timed loop of 40: stop
	// rank 2 after 15 of them. The two loops take 2 x 40 x 5 ms without
	// the stop: it is more than half of the timed span, which names a rank
	// late once.
	waitForFile(t, trace+".2", "the timed loop", func(b []byte) bool { return bytes.Count(b, []byte("\n")) >= 15 })
	// A trace line is written as an operation ends and the next begins
	// with its data exchange: a process stopped before its data went out
	// holds every rank back alike, which no timeline can tell from a slow
	// network. Half an operation later the stand-in holds its stream after
	// the exchange, as a GPU still busy with a kernel.
	time.Sleep(paceMs * time.Millisecond / 2)
	ps[2].cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(stop)
	ps[2].cmd.Process.Signal(syscall.SIGCONT)
	out, run := stragglerRun(t, ps, save)
	t.Log("\n" + stragglerLines(out))
	var most float64
	for _, f := range onlyNamed(t, run.Straggler, 2) {
		most = max(most, f.MaxLagUs)
		if f.Consistent {
			t.Errorf("named for how often: %+v", f)
		}
	}
	if most < float64(stop.Microseconds())/2 {
		t.Errorf("late by at most %v, want about %v:\n%s", time.Duration(most)*time.Microsecond, stop, stragglerLines(out))
	}
}

// Twenty healthy runs name nobody, and say so with the margin. A run is
// 2 x 60 iterations of 5 ms: a host that deschedules a process for less
// than 600 ms at once cannot make it look preempted.
func TestHealthyRunsNameNobody(t *testing.T) {
	begin := time.Now()
	closest := 0.0
	for i := range 20 {
		save := filepath.Join(t.TempDir(), "run.json")
		ps := start(t, 3, []string{fmt.Sprintf("RDMABENCH_FAKE_NCCL_PACE_MS=%d", paceMs)},
			"all_reduce", "-b", "1K", "-e", "1K", "-n", "60", "-w", "0", "-c", "0", "-I", "1", "--save", save)
		out, run := stragglerRun(t, ps, save)
		closest = max(closest, run.Straggler.Margin)
		if len(run.Straggler.Stragglers) != 0 {
			t.Errorf("run %d named %+v:\n%s", i, run.Straggler.Stragglers, stragglerLines(out))
		}
		if text := stragglerLines(out); !strings.Contains(text, "# Stragglers: no straggler over 120 iterations of 3 ranks (margin ") {
			t.Errorf("run %d: report under the table:\n%s", i, out)
		}
	}
	t.Logf("20 runs in %v; the closest to a straggler reached %.0f%% of the bar", time.Since(begin).Round(time.Millisecond), 100*closest)
}

// One of four processes frozen (SIGSTOP) under -T 2: every other process
// reports the same one line, which names the frozen process once, says
// which collective it held up, and carries no forwarded prefixes or
// "(then: ...)" behind it. Queued (-z 0), which of the collectives ran is
// not known; waiting for each (-z 2), the one is.
func TestFrozenRankNamed(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		frozenRank(t, "0", "timeout: collectives #", "(ncclAllReduce of 1024 bytes) were not seen to finish within 2s (-T; queued", "process ranks 0-1, 3 entered them and wait")
	})
	t.Run("one at a time", func(t *testing.T) {
		frozenRank(t, "2", "timeout: collective #", "(ncclAllReduce of 1024 bytes) did not finish within 2s (-T): ", "process ranks 0-1, 3 entered it and wait")
	})
}

// killAll ends processes a test stopped or left running.
func killAll(ps []*proc) {
	for _, p := range ps {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
	}
}

// waitForFile polls path until ok holds for its contents, at most 30 s.
func waitForFile(t *testing.T, path, what string, ok func([]byte) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if ok(b) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func frozenRank(t *testing.T, blocking string, wants ...string) {
	const frozen = 2
	logFile := filepath.Join(t.TempDir(), "nccl.log")
	ps := start(t, 4, nil, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000000", "-w", "0", "-c", "0", "-T", "2", "-z", blocking, "--nccl-log", logFile)
	defer killAll(ps)
	waitForFile(t, logFile, "the run to start", func(b []byte) bool { return bytes.Contains(b, []byte("Init COMPLETE")) })
	time.Sleep(1500 * time.Millisecond) // past a publication of where each process is
	ps[frozen].cmd.Process.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	survivors := []*proc{ps[0], ps[1], ps[3]}
	wait(t, survivors, 40*time.Second)
	// -T 2, then a census that waits 2 s for the frozen process.
	if d := time.Since(stopped); d > 20*time.Second {
		t.Errorf("the survivors took %v to give up", d)
	}
	var verdict string
	for i, p := range survivors {
		r := []int{0, 1, 3}[i]
		errText := strings.TrimSpace(p.stderr.String())
		line, _, _ := strings.Cut(errText, "\n")
		prefix := "ncclbench: rank " + string(rune('0'+r)) + ": "
		if p.code != exitFail || !strings.HasPrefix(line, prefix) {
			t.Errorf("rank %d: exit %d:\n%s", r, p.code, errText)
			continue
		}
		v := strings.TrimPrefix(line, prefix)
		if verdict == "" {
			verdict = v
		} else if v != verdict {
			t.Errorf("rank %d says\n%s\nrank 0 says\n%s", r, v, verdict)
		}
		for _, bad := range []string{"(then:", "process rank 0: ", "process rank 1: ", "process rank 3: "} {
			if strings.Contains(errText, bad) {
				t.Errorf("rank %d: %q piled up:\n%s", r, bad, errText)
			}
		}
		if n := strings.Count(errText, "process rank 2 ("); n != 1 {
			t.Errorf("rank %d names the frozen process %d times:\n%s", r, n, errText)
		}
	}
	for _, want := range append(wants, "process rank 2 (", "did not answer for 2s, stopped or hung (last heard ") {
		if !strings.Contains(verdict, want) {
			t.Errorf("the verdict lacks %q:\n%s", want, verdict)
		}
	}
	t.Log(verdict)
}
