package mesh

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// Leader is rank 0 of a mesh, as Work is every other rank: it gathers the
// ranks' Info, makes the document's ranks of them, tells the ranks the
// bound, runs the rounds with a Coordinator over the Link, and tells the
// ranks the mesh is over.
type Leader struct {
	Link Link
	Size int
	// Self is rank 0's own Info; Addr0 its address as the others reached
	// it (the rendezvous host).
	Self  Info
	Addr0 string
	// Peer is rank r's address as rank 0 saw its connection, and its host
	// name (from its hello).
	Peer func(r int) (addr, host string)
	// GatherBy bounds the wait for the others' Info.
	GatherBy time.Time
	Rounds   [][]Pair
	// Bound is what Start announces: how long the mesh may take at most.
	Bound time.Duration
	// Local measures rank 0's own directions; DirectionBound is how long
	// another rank's direction may take before that rank is given up.
	Local          func(ctx context.Context, t Task) Outcome
	DirectionBound time.Duration
	Opts           Options
	// Gathered, if set, is called with the document once its ranks are in,
	// before the first round (to say what is about to run).
	Gathered func(m *results.Mesh)
	// Plan, if set, gives the rounds and the bound once the ranks are in
	// (which ranks share a NIC or a host is known only then), in place of
	// Rounds and Bound.
	Plan func(m *results.Mesh) ([][]Pair, time.Duration)
	// Quick, if set, runs a quick search with these options in place of
	// the Rounds (mesh --quick).
	Quick *QuickOptions
}

// Lead runs the mesh into m, whose settings (kind, launcher, sizes) the
// caller filled in: Lead adds the ranks, the pairs and the verdicts, and
// Error "interrupted" when ctx ended it.
func (ld *Leader) Lead(ctx context.Context, m *results.Mesh) {
	infos := GatherInfo(ctx, ld.Link, ld.Size, ld.GatherBy)
	infos[0] = ld.Self
	addrs := make([]string, ld.Size)
	m.Ranks = m.Ranks[:0]
	for r, in := range infos {
		rk := in.Rank
		rk.Rank = r
		if r == 0 {
			rk.Addr = ld.Addr0
		} else {
			rk.Addr, rk.Host = ld.Peer(r)
		}
		if in.Error != "" {
			rk.Dead = in.Error
		}
		addrs[r] = net.JoinHostPort(rk.Addr, strconv.Itoa(in.ServerPort))
		m.Ranks = append(m.Ranks, rk)
	}
	if ld.Plan != nil {
		ld.Rounds, ld.Bound = ld.Plan(m)
	}
	if ld.Gathered != nil {
		ld.Gathered(m)
	}
	Start(ld.Link, ld.Size, ld.Bound, "")
	c := &Coordinator{
		Runner: &LinkRunner{Link: ld.Link, Local: ld.Local, Bound: ld.DirectionBound},
		Opts:   ld.Opts, Mesh: m, Rounds: ld.Rounds, Addrs: addrs,
	}
	if ld.Quick != nil {
		c.RunQuick(ctx, *ld.Quick)
	} else {
		c.Run(ctx)
	}
	if ctx.Err() != nil && m.Error == "" {
		m.Error = "interrupted"
	}
	Finish(ld.Link, ld.Size)
}
