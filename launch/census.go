package launch

import (
	"bytes"
	"sync"
	"time"
)

// Out-of-band messages: answered by the connection's reader goroutine, so
// that a process whose main thread waits inside a collective still answers,
// and one that is stopped (SIGSTOP) does not.
//
//	ping/pong   clock offsets (rank 0 asks)
//	census      rank 0 asks every process for its status
//	status      a process's status: an answer, or published unasked
//	stall       a process missed a deadline and asks rank 0 for a census

// epoch anchors Clock: the wall clock once, then the monotonic clock, so
// that a step of the wall clock during a run does not move it.
var epoch = time.Now()

// Clock is this process's clock in nanoseconds: wall-clock time at start,
// advanced by the monotonic clock. Offsets between processes' Clocks are
// what MeasureClocks estimates.
func Clock() int64 { return epoch.UnixNano() + int64(time.Since(epoch)) }

// ClockOffset is another process's Clock minus rank 0's, from the round
// trip with the smallest delay; the true offset is within ErrNs (half that
// round trip) of OffsetNs.
type ClockOffset struct {
	OffsetNs int64
	ErrNs    int64
}

// census is rank 0's record of what each process said about itself.
type census struct {
	mu      sync.Mutex
	seq     int
	status  []Status
	note    chan struct{} // an answer to the current census came in
	stalled chan struct{} // closed at the first stall
	stallMu sync.Once
}

// Status is what rank 0 heard from a process: its Config.Status payload.
type Status struct {
	Rank int
	// Answered: it answered the last census; Payload is then that answer,
	// otherwise the last thing it published (nil: nothing ever).
	Answered bool
	Payload  []byte
	Heard    time.Time // when Payload came in; zero: never
}

func (g *Group) initCensus() {
	g.cen = &census{status: make([]Status, g.Size), note: make(chan struct{}, 1), stalled: make(chan struct{})}
	for r := range g.cen.status {
		g.cen.status[r].Rank = r
	}
}

// outOfBand handles the reader's out-of-band messages; false: m is not one.
func (g *Group) outOfBand(c *conn, m msg) bool {
	switch m.Type {
	case kPing: // not rank 0: answer at once with our clock
		go c.send(msg{Type: kPong, Seq: m.Seq, Clock: Clock()}, time.Now().Add(2*time.Second))
	case kPong:
		select {
		case c.pong <- m:
		default: // a late answer to an earlier ping
		}
	case kCensus:
		var p []byte
		if g.status != nil {
			p = g.status()
		}
		go c.send(msg{Type: kStatus, Seq: m.Seq, Payload: p}, time.Now().Add(2*time.Second))
	case kStatus, kStall:
		if g.cen == nil {
			return true
		}
		g.cen.mu.Lock()
		s := &g.cen.status[c.rank]
		if m.Payload != nil {
			s.Payload, s.Heard = bytes.Clone(m.Payload), time.Now()
		}
		if m.Type == kStatus && m.Seq != 0 && m.Seq == g.cen.seq {
			s.Answered = true
			select {
			case g.cen.note <- struct{}{}:
			default:
			}
		}
		g.cen.mu.Unlock()
		if m.Type == kStall {
			g.cen.stallMu.Do(func() { close(g.cen.stalled) })
		}
	default:
		return false
	}
	return true
}

// MeasureClocks estimates every process's clock offset from rank 0's with
// rounds round trips each, NTP-style (the shortest round trip wins), each
// bounded by deadline. Rank 0 only; others get nil. Index 0 is rank 0
// itself (0, 0).
func (g *Group) MeasureClocks(rounds int, deadline time.Time) ([]ClockOffset, error) {
	if g.Rank != 0 {
		return nil, nil
	}
	out := make([]ClockOffset, g.Size)
	for r := 1; r < g.Size; r++ {
		best := int64(-1)
		for k := 1; k <= rounds; k++ {
			t0 := Clock()
			if err := g.peers[r].send(msg{Type: kPing, Seq: k}, deadline); err != nil {
				return nil, g.lostOr(&PeerLost{Rank: r, Reason: "could not be written to: " + err.Error()})
			}
			var m msg
			for m.Seq != k {
				t := time.NewTimer(time.Until(deadline))
				select {
				case m = <-g.peers[r].pong:
				case <-g.lost:
					t.Stop()
					return nil, g.lostErr
				case <-t.C:
					return nil, &PeerLost{Rank: r, Reason: "did not answer the clock measurement in time"}
				}
				t.Stop()
			}
			t1 := Clock()
			if rtt := t1 - t0; best < 0 || rtt < best {
				best = rtt
				out[r] = ClockOffset{OffsetNs: m.Clock - (t0+t1)/2, ErrNs: (rtt + 1) / 2}
			}
		}
	}
	return out, nil
}

// Publish sends this process's status to rank 0 unasked, for rank 0 to
// know where it was last if it stops answering (not rank 0).
func (g *Group) Publish(status []byte, deadline time.Time) error {
	if g.Rank == 0 || g.Size == 1 {
		return nil
	}
	return g.peers[0].send(msg{Type: kStatus, Payload: status}, deadline)
}

// RequestCensus asks rank 0 to ask everyone where they are, with this
// process's status (not rank 0; nil: what it published last stands).
func (g *Group) RequestCensus(status []byte, deadline time.Time) error {
	if g.Rank == 0 || g.Size == 1 {
		return nil
	}
	return g.peers[0].send(msg{Type: kStall, Payload: status}, deadline)
}

// Stalled is closed on rank 0 when a process asked for a census (nil
// elsewhere: it never fires).
func (g *Group) Stalled() <-chan struct{} {
	if g.cen == nil {
		return nil
	}
	return g.cen.stalled
}

// Census asks every process for its status and waits until all answered
// or deadline (rank 0 only). Rank 0's own is Config.Status's, now.
func (g *Group) Census(deadline time.Time) []Status {
	if g.cen == nil {
		return nil
	}
	c := g.cen
	c.mu.Lock()
	c.seq++
	seq := c.seq
	for r := range c.status {
		c.status[r].Answered = false
	}
	if g.status != nil {
		c.status[0] = Status{Rank: 0, Answered: true, Payload: g.status(), Heard: time.Now()}
	}
	c.mu.Unlock()
	for r := 1; r < g.Size; r++ {
		go g.peers[r].send(msg{Type: kCensus, Seq: seq}, deadline)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	for {
		c.mu.Lock()
		all := true
		for _, s := range c.status {
			all = all && s.Answered
		}
		out := append([]Status(nil), c.status...)
		c.mu.Unlock()
		if all {
			return out
		}
		select {
		case <-c.note:
		case <-t.C:
			return out
		}
	}
}

// Conclude ends the run on every process with reason, as it stands (rank
// 0 only): the others see it as Err, without a prefix of their own.
func (g *Group) Conclude(reason string) {
	if g.Rank != 0 {
		return
	}
	g.markLost(&PeerLost{Rank: -1, Reason: reason, Final: true})
}
