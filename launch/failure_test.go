package launch

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func waitLost(t *testing.T, g *Group) *PeerLost {
	t.Helper()
	select {
	case <-g.Lost():
	case <-time.After(FailGrace + 3*time.Second):
		t.Fatalf("rank %d heard no verdict", g.Rank)
	}
	var pl *PeerLost
	if !errors.As(g.Err(), &pl) {
		t.Fatalf("rank %d: %v, want a PeerLost", g.Rank, g.Err())
	}
	return pl
}

// The first report wins at every process, whoever reports after it, rank
// 0 included: the second reporter's error is the first one's consequence.
func TestFailFirstReportWins(t *testing.T) {
	for _, first := range []int{0, 1, 2} {
		gs := joinAll(t, 3, 5*time.Second)
		gs[first].Fail("stream error", time.Now().Add(2*time.Second))
		for r := range gs {
			if r != first {
				gs[r].Fail("lost connection to the first", time.Now().Add(2*time.Second))
			}
		}
		for r, g := range gs {
			pl := waitLost(t, g)
			if !pl.Reported || pl.Origin != first || pl.Reason != fmt.Sprintf("process rank %d: stream error", first) {
				t.Errorf("first %d: rank %d heard %+v", first, r, pl)
			}
		}
	}
}

// A process that dies outright within the grace beats an earlier report:
// its death caused the reporter's error.
func TestFailDeathBeatsReport(t *testing.T) {
	gs := joinAll(t, 3, 5*time.Second)
	gs[1].Fail("lost connection to rank 2", time.Now().Add(2*time.Second))
	gs[2].peers[0].c.Close() // rank 2 dies after rank 1 saw its NCCL connection drop
	for _, r := range []int{0, 1} {
		pl := waitLost(t, gs[r])
		if pl.Reported || !strings.Contains(pl.Error(), "rank 2 exited or was killed") {
			t.Errorf("rank %d heard %+v", r, pl)
		}
	}
}

// Fail waits for rank 0's record of the report: a process that aborts
// right after it cannot have its consequences recorded first.
func TestFailWaitsForTheRecord(t *testing.T) {
	gs := joinAll(t, 2, 5*time.Second)
	gs[1].Fail("stream error", time.Now().Add(2*time.Second))
	gs[0].fail.mu.Lock()
	recorded := gs[0].fail.first
	gs[0].fail.mu.Unlock()
	if !recorded {
		t.Fatal("Fail returned before rank 0 recorded the report")
	}
	// A second report of the same process is not sent again.
	gs[1].Fail("later error", time.Now().Add(2*time.Second))
	if pl := waitLost(t, gs[1]); pl.Origin != 1 || !strings.Contains(pl.Reason, "stream error") {
		t.Errorf("heard %+v", pl)
	}
}
