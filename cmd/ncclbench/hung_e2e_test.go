package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// One of four processes frozen (SIGSTOP) under -T 2: every other process
// reports the same one line, which names the frozen process once, says
// which collective it held up, and carries no forwarded prefixes or
// "(then: ...)" behind it. Queued (-z 0), which of the collectives ran is
// not known; waiting for each (-z 2), the one is.
func TestFrozenRankNamed(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		frozenRank(t, "0", "timeout: collectives #", "(ncclAllReduce of 1024 bytes) were not seen to finish within 2s (-T; queued", "process ranks 0, 1, 3 entered them and wait")
	})
	t.Run("one at a time", func(t *testing.T) {
		frozenRank(t, "2", "timeout: collective #", "(ncclAllReduce of 1024 bytes) did not finish within 2s (-T): ", "process ranks 0, 1, 3 entered it and wait")
	})
}

func frozenRank(t *testing.T, blocking string, wants ...string) {
	const frozen = 2
	logFile := filepath.Join(t.TempDir(), "nccl.log")
	ps := start(t, 4, nil, "all_reduce", "-b", "1K", "-e", "1K", "-n", "100000000", "-w", "0", "-c", "0", "-T", "2", "-z", blocking, "--nccl-log", logFile)
	defer func() {
		for _, p := range ps {
			p.cmd.Process.Signal(syscall.SIGCONT)
			p.cmd.Process.Kill()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logFile)
		if bytes.Contains(b, []byte("Init COMPLETE")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("run never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
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
