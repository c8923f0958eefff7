package launch

import (
	"fmt"
	"sync"
	"time"
)

// Which process failed first.
//
// An error on one process soon becomes an error on every process: the one
// that hit it aborts its NCCL communicator, and its peers then see their
// connections to it close, each with an error of its own that names nobody
// for certain (NCCL's "remote process exited or there was a network
// error"). If every process waited a moment for word of a dead peer and
// then announced its own error, whichever spoke first would be blamed.
//
// So a process reports its error to rank 0 before it tears anything down
// (Fail), and does not go on until rank 0 has recorded the report: every
// error that its teardown causes elsewhere is then recorded after it. Rank
// 0 keeps the first report, waits FailGrace for a process that died
// outright (a closed rendezvous connection beats any error its death
// caused), and then tells every process the first report; each waits for
// that word (Lost) and ends with it.

// FailGrace is how long rank 0 waits, after the first report of an error,
// for a process that died outright.
const FailGrace = time.Second

type failures struct {
	mu       sync.Mutex
	reported bool // this process has called Fail
	first    bool // rank 0: a report is recorded and its verdict scheduled
	ack      chan struct{}
}

// Fail reports this process's error to rank 0 and returns once rank 0 has
// recorded it (or by deadline, when rank 0 cannot be reached). Only the
// first call of a process reports; a group of one has nobody to tell. The
// verdict arrives later on Lost, as a PeerLost whose Origin is the process
// whose report came first.
func (g *Group) Fail(reason string, deadline time.Time) {
	if g.Size == 1 {
		return
	}
	g.fail.mu.Lock()
	again := g.fail.reported
	g.fail.reported = true
	g.fail.mu.Unlock()
	if again || g.Err() != nil {
		return
	}
	if g.Rank == 0 {
		g.recordFailure(0, reason)
		return
	}
	if err := g.peers[0].send(msg{Type: kFailed, Reason: reason}, deadline); err != nil {
		return
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-g.fail.ack:
	case <-g.lost:
	case <-t.C:
	}
}

// recordFailure is rank 0's record of a report: the first one becomes the
// verdict after FailGrace unless a process is lost before then.
func (g *Group) recordFailure(rank int, reason string) {
	g.fail.mu.Lock()
	first := !g.fail.first
	g.fail.first = true
	g.fail.mu.Unlock()
	if !first {
		return
	}
	select {
	case <-g.lost: // already lost and told: nothing to add
		return
	default:
	}
	verdict := &PeerLost{Rank: -1, Reported: true, Origin: rank, Reason: fmt.Sprintf("process rank %d: %s", rank, reason)}
	g.notices.add()
	time.AfterFunc(FailGrace, func() {
		defer g.notices.done()
		g.markLost(verdict)
	})
}

// failureMessage handles the reports and their answers; false for any
// other message.
func (g *Group) failureMessage(c *conn, m msg) bool {
	switch m.Type {
	case kFailed: // rank 0: a process reports its error
		if g.Rank == 0 {
			g.recordFailure(c.rank, m.Reason)
			go c.send(msg{Type: kFailedNoted}, time.Now().Add(2*time.Second))
		}
	case kFailedNoted:
		select {
		case g.fail.ack <- struct{}{}:
		default:
		}
	default:
		return false
	}
	return true
}
