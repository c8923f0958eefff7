package mesh

// The quick search measured by real ranks (issue 47 item 4): each round's
// pairs at once, both directions of each pair at once, write-bw only (the
// search judges bandwidth), through the Coordinator's Runner, so that the
// tasks are numbered (Seq), a rank that leaves is put down as dead and its
// directions fail rather than hang.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// quickMeasurer is a Coordinator as a QuickMeasurer over the ranks the
// search knows (ranks: the search's index → the mesh's rank): ctx ending
// makes the directions running then return as interrupted.
type quickMeasurer struct {
	c     *Coordinator
	ctx   context.Context
	ranks []int
}

// MeasureRound measures the round's pairs, records each direction in the
// mesh's Pairs (write-bw only) and returns their figures: a direction
// that failed is 0, a pair of two failed directions Failed.
func (qm quickMeasurer) MeasureRound(round int, pairs []Pair) []QuickResult {
	c := qm.c
	c.sweepDead(round) // ranks that left while they rested
	out := make([][2]Outcome, len(pairs))
	var wg sync.WaitGroup
	for j, p := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[j] = c.bothWays(qm.ctx, Pair{A: qm.ranks[p.A], B: qm.ranks[p.B]}, round, BWPart, [2]bool{})
		}()
	}
	wg.Wait()
	res := make([]QuickResult, len(pairs))
	for j, p := range pairs {
		ab, ba := out[j][0], out[j][1]
		res[j] = QuickResult{Pair: p, AB: quickBW(ab), BA: quickBW(ba), Failed: ab.Error != "" && ba.Error != ""}
		a, b := qm.ranks[p.A], qm.ranks[p.B]
		c.Mesh.Pairs = append(c.Mesh.Pairs, pairResult(a, b, round, ab), pairResult(b, a, round, ba))
	}
	return res
}

// quickBW is a direction's bandwidth for the search: 0 when it failed.
func quickBW(o Outcome) float64 {
	if o.Error != "" {
		return 0
	}
	return o.BWGbps
}

// QuickLayout is what the search knows of the mesh's ranks still there
// (ranks: the search's index → the mesh's rank): each one's host and its
// rail, the index of its device among the devices' names (mlx5_0 … mlx5_7
// on every host: rails 0 … 7; natural order, so mlx5_10 follows mlx5_9).
// Ranks with one device name are one rail.
func QuickLayout(mranks []results.MeshRank) (layout []QuickRank, ranks []int) {
	var names []string
	seen := map[string]bool{}
	for _, rk := range mranks {
		if name := fmt.Sprintf("%s:%d", rk.Device, rk.Port); !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		return len(a) < len(b) || len(a) == len(b) && a < b
	})
	rail := map[string]int{}
	for i, n := range names {
		rail[n] = i
	}
	for _, rk := range mranks {
		if rk.Dead != "" {
			continue
		}
		layout = append(layout, QuickRank{Host: rk.Host, NIC: rail[fmt.Sprintf("%s:%d", rk.Device, rk.Port)], Device: rk.Device})
		ranks = append(ranks, rk.Rank)
	}
	return layout, ranks
}

// RunQuick runs a quick search with opt over the mesh's ranks still there,
// round after round, into c.Mesh: its pairs (write-bw), Rounds,
// ElapsedS, the ranks that left, and the verdict (Quick). ctx ending
// stops it before the next round, with Error saying so; the verdict is
// then of the rounds measured. c.Rounds is not used.
func (c *Coordinator) RunQuick(ctx context.Context, opt QuickOptions) {
	m := c.Mesh
	start := time.Now()
	layout, ranks := QuickLayout(m.Ranks)
	q, err := NewQuick(layout, opt)
	if err != nil {
		m.Error = err.Error()
		m.Quick = &results.MeshQuick{Seed: opt.Seed}
		return
	}
	qm := quickMeasurer{c: c, ctx: ctx, ranks: ranks}
	for {
		pairs, ok := q.Next()
		if !ok {
			break
		}
		if ctx.Err() != nil {
			m.Error = fmt.Sprintf("interrupted before round %d", q.round+1)
			break
		}
		first := len(m.Pairs)
		res := qm.MeasureRound(q.round+1, pairs)
		// A failure whose server the rendezvous already knows dead is put
		// on it in the document (the search counts it failed either way).
		c.attribute(ctx, c.unexplained(first), false, 0)
		q.Record(res)
		if c.Opts.Round != nil {
			c.Opts.Round(q.round, q.opt.MaxRounds)
		}
	}
	c.attribute(ctx, c.unexplained(0), false, c.Opts.Grace)
	m.Rounds = q.round
	c.sweepDead(q.round + 1)
	m.Quick = QuickDocument(q.Verdict(), ranks)
	m.Quick.Seed, m.Quick.Fraction = opt.Seed, q.opt.Fraction
	for i, s := range m.Quick.Suspects {
		// A rank that left fails every test after: said, not a NIC's speed.
		if len(s.Ranks) == 1 && m.Ranks[s.Ranks[0]].Dead != "" {
			m.Quick.Suspects[i].Text += fmt.Sprintf(" (its tests failed: it left the mesh in round %d)", m.Ranks[s.Ranks[0]].DeadRound)
		}
	}
	m.ElapsedS = time.Since(start).Seconds()
}

// QuickDocument is the verdict as the mesh document carries it, its
// ranks the mesh's (ranks: the search's index → the mesh's rank).
func QuickDocument(v QuickVerdict, ranks []int) *results.MeshQuick {
	to := func(rs []int) []int {
		out := make([]int, len(rs))
		for i, r := range rs {
			out[i] = ranks[r]
		}
		return out
	}
	d := &results.MeshQuick{Rounds: v.Rounds, RandomRounds: v.RandomRounds, ExpectedWallS: v.Wall.Seconds(),
		PairCoverage: v.PairCoverage, CannotSee: v.CannotSee}
	if len(v.UnresolvedRanks) > 0 {
		d.UnresolvedRanks = to(v.UnresolvedRanks)
	}
	for _, p := range v.UnresolvedPairs {
		d.UnresolvedPairs = append(d.UnresolvedPairs, [2]int{ranks[p.A], ranks[p.B]})
	}
	for _, s := range v.Suspects {
		s.Ranks = to(s.Ranks)
		qs := results.QuickSuspect{Kind: results.QuickKind(s.Kind), Ranks: s.Ranks, Host: s.Host, Ratio: s.Ratio, Text: s.String()}
		if s.Kind == QuickRail {
			rail := s.Rail
			qs.Rail = &rail
		}
		d.Suspects = append(d.Suspects, qs)
	}
	return d
}
