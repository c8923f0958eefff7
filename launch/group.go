package launch

// A joined group at work: its readers, losses, collectives (Gather,
// Reduce), point-to-point messages and the ranks it gave up on.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"
)

// reader forwards messages and turns an unexpected end of the connection
// (or an abort message) into the group's lost signal.
func (g *Group) reader(c *conn) {
	for {
		var m msg
		if err := readMsg(c.br, maxMsgBytes, &m); err != nil {
			g.mu.Lock()
			closing := g.closing
			g.mu.Unlock()
			if !closing {
				reason := "exited or was killed (its rendezvous connection closed)"
				if g.Rank != 0 {
					reason = "exited or was killed (lost the rendezvous connection to it)"
				}
				if g.keepGoing {
					g.setDead(c.rank, reason)
				} else {
					g.markLost(&PeerLost{Rank: c.rank, Reason: reason})
				}
			}
			close(c.in)
			return
		}
		if g.outOfBand(c, m) || g.failureMessage(c, m) {
			continue
		}
		switch m.Type {
		case kAbort, kReject:
			if g.keepGoing { // that process gives up; the others go on
				g.setDead(c.rank, m.Reason)
				c.c.Close()
				continue
			}
			g.markLost(&PeerLost{Rank: -1, Reason: m.Reason, Final: m.Final, Reported: m.Reported, Origin: m.Origin})
		case kBye:
			g.mu.Lock()
			if g.Rank != 0 {
				g.closing = true
			}
			g.mu.Unlock()
			c.in <- m
		default:
			c.in <- m
		}
	}
}

func (g *Group) markLost(err error) {
	g.lostOnce.Do(func() {
		g.lostErr = err
		// Rank 0 tells everyone else so nobody waits for a dead peer. The
		// notices are counted before lost closes: a process that sees Lost
		// and calls Flush must find them counted, or it exits before they
		// are sent (and the others blame rank 0).
		defer close(g.lost)
		if g.Rank == 0 {
			for _, p := range g.peers {
				if p != nil {
					g.notices.add()
					go func() {
						defer g.notices.done()
						m := msg{Type: kAbort, Reason: err.Error()}
						if pl := (*PeerLost)(nil); errors.As(err, &pl) {
							m.Final, m.Reported, m.Origin = pl.Final, pl.Reported, pl.Origin
						}
						p.send(m, time.Now().Add(2*time.Second))
					}()
				}
			}
		}
	})
}

// Flush waits until rank 0's notices about a lost process are sent (each
// bounded by 2 s). A process about to exit calls it: exiting first would
// close rank 0's connections before the notice, and the others would
// blame rank 0 instead of the process that died.
func (g *Group) Flush() { g.notices.wait() }

// Lost is closed when another process goes away; Err then says which.
func (g *Group) Lost() <-chan struct{} { return g.lost }

// Err is the reason Lost was closed.
func (g *Group) Err() error {
	select {
	case <-g.lost:
		return g.lostErr
	default:
		return nil
	}
}

// Abort tells the other processes this one is giving up.
func (g *Group) Abort(reason string) {
	if g.Size == 1 {
		return
	}
	for _, p := range g.peers {
		if p != nil {
			p.send(msg{Type: kAbort, Reason: fmt.Sprintf("process rank %d: %s", g.Rank, reason)}, time.Now().Add(2*time.Second))
		}
	}
}

func (g *Group) recv(c *conn, want kind, deadline time.Time) (msg, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case m, ok := <-c.in:
		if !ok {
			if err := g.Err(); err != nil {
				return msg{}, err
			}
			return msg{}, &PeerLost{Rank: c.rank, Reason: "closed its connection"}
		}
		if m.Type != want {
			return msg{}, fmt.Errorf("rendezvous: process rank %d sent %q, expected %q", c.rank, m.Type, want)
		}
		return m, nil
	case <-g.lost:
		return msg{}, g.lostErr
	case <-t.C:
		return msg{}, &PeerLost{Rank: c.rank, Reason: fmt.Sprintf("did not answer within %v (stuck?)", g.timeout)}
	}
}

// SetTimeout changes the bound on each later wait (joining used the
// Config's).
func (g *Group) SetTimeout(d time.Duration) {
	if d > 0 {
		g.timeout = d
	}
}

// Gather sends payload to rank 0, which gets every process's by rank; the
// others get nil.
func (g *Group) Gather(payload []byte) ([][]byte, error) {
	if g.Size == 1 {
		return [][]byte{payload}, nil
	}
	deadline := time.Now().Add(g.timeout)
	if g.Rank != 0 {
		return nil, g.lostOr(g.peers[0].send(msg{Type: kGather, Payload: payload}, deadline))
	}
	out := make([][]byte, g.Size)
	out[0] = payload
	for r := 1; r < g.Size; r++ {
		m, err := g.recv(g.peers[r], kGather, deadline)
		if err != nil {
			return nil, err
		}
		out[r] = bytes.Clone(m.Payload)
	}
	return out, nil
}

// Op is how Reduce combines the processes' values.
type Op string

const (
	Sum Op = "sum"
	Min Op = "min"
	Max Op = "max"
)

// Reduce combines vals element-wise over all processes by op; every
// process gets the result. It doubles as a barrier.
func (g *Group) Reduce(vals []float64, op Op) ([]float64, error) {
	if g.Size == 1 {
		return append([]float64{}, vals...), nil
	}
	g.seq++
	deadline := time.Now().Add(g.timeout)
	if g.Rank != 0 {
		if err := g.peers[0].send(msg{Type: kReduce, Seq: g.seq, Op: op, Vals: vals}, deadline); err != nil {
			return nil, g.lostOr(err)
		}
		m, err := g.recv(g.peers[0], kReduced, deadline)
		if err != nil {
			return nil, err
		}
		return m.Vals, nil
	}
	acc := append([]float64{}, vals...)
	for r := 1; r < g.Size; r++ {
		m, err := g.recv(g.peers[r], kReduce, deadline)
		if err != nil {
			return nil, err
		}
		if len(m.Vals) != len(acc) || m.Seq != g.seq || m.Op != op {
			return nil, fmt.Errorf("rendezvous: process rank %d is out of step (seq %d/%d)", r, m.Seq, g.seq)
		}
		for i, v := range m.Vals {
			switch op {
			case Min:
				acc[i] = math.Min(acc[i], v)
			case Max:
				acc[i] = math.Max(acc[i], v)
			default:
				acc[i] += v
			}
		}
	}
	for r := 1; r < g.Size; r++ {
		if err := g.peers[r].send(msg{Type: kReduced, Seq: g.seq, Vals: acc}, deadline); err != nil {
			return nil, g.lostOr(err)
		}
	}
	return acc, nil
}

func (g *Group) lostOr(err error) error {
	if err == nil {
		return nil
	}
	if e := g.Err(); e != nil {
		return e
	}
	return err
}

// setDead records why a process of a KeepGoing group went away; the first
// reason stays (Drop's, before the closed connection's).
func (g *Group) setDead(rank int, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.dead[rank]; !ok {
		g.dead[rank] = reason
	}
}

// Dead says whether a process of a KeepGoing group went away, and why.
func (g *Group) Dead(rank int) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	why, ok := g.dead[rank]
	return why, ok
}

// Drop ends rank 0's connection to a process that no longer answers in
// time: the process then fails (it lost rank 0) and Dead reports reason.
func (g *Group) Drop(rank int, reason string) {
	if g.Rank != 0 || rank <= 0 || rank >= g.Size || g.peers[rank] == nil {
		return
	}
	g.setDead(rank, reason)
	g.peers[rank].c.Close()
}

// PeerAddr is the IP address a process connected from, as rank 0 saw it
// (rank 0 only; "" for rank 0 itself): the address other processes can
// reach it at.
func (g *Group) PeerAddr(rank int) string {
	if g.Rank != 0 || rank <= 0 || rank >= len(g.addrs) {
		return ""
	}
	return g.addrs[rank]
}

func (g *Group) link(rank int) (*conn, error) {
	switch {
	case g.Size == 1:
		return nil, errors.New("rendezvous: a process alone has no one to talk to")
	case g.Rank == 0 && rank > 0 && rank < g.Size:
		return g.peers[rank], nil
	case g.Rank != 0 && rank == 0:
		return g.peers[0], nil
	}
	return nil, fmt.Errorf("rendezvous: process rank %d cannot talk to rank %d (only to and from rank 0)", g.Rank, rank)
}

// Send gives payload to a process: rank 0 to any, the others to rank 0.
func (g *Group) Send(rank int, payload []byte, deadline time.Time) error {
	c, err := g.link(rank)
	if err != nil {
		return err
	}
	if why, dead := g.Dead(rank); dead {
		return &PeerLost{Rank: rank, Reason: why}
	}
	if err := c.send(msg{Type: kData, Payload: payload}, deadline); err != nil {
		if why, dead := g.Dead(rank); dead {
			return &PeerLost{Rank: rank, Reason: why}
		}
		return g.lostOr(&PeerLost{Rank: rank, Reason: fmt.Sprintf("could not be written to: %v", err)})
	}
	return nil
}

// Recv waits until deadline for the next payload a process sends with
// Send. A process that went away is a *PeerLost.
func (g *Group) Recv(rank int, deadline time.Time) ([]byte, error) {
	c, err := g.link(rank)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var lost <-chan struct{}
	if !g.keepGoing {
		lost = g.lost
	}
	select {
	case m, ok := <-c.in:
		if !ok {
			if why, dead := g.Dead(rank); dead {
				return nil, &PeerLost{Rank: rank, Reason: why}
			}
			if err := g.Err(); err != nil {
				return nil, err
			}
			return nil, &PeerLost{Rank: rank, Reason: "closed its connection"}
		}
		if m.Type != kData {
			return nil, fmt.Errorf("rendezvous: process rank %d sent %q, expected data", rank, m.Type)
		}
		return m.Payload, nil
	case <-lost:
		return nil, g.lostErr
	case <-t.C:
		return nil, &PeerLost{Rank: rank, Reason: "did not answer in time"}
	}
}
