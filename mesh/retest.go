package mesh

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// retest measures each outlier again and judges it against the same
// medians: a pair slow only while others ran is not a bad pair. The
// controls go first, alone; then, with Opts.RetestAtOnce, the outliers'
// write-bw several at once, clearing those fine beside others; then the
// rest alone, each measuring the part that was slow (retestPart),
// cheapest first, until the budget in time or count is spent; the rest
// stay inconclusive.
func (c *Coordinator) retest(ctx context.Context, a *analysis) {
	m := c.Mesh
	idx := c.retestOrder(a)
	if c.Opts.MaxRetests >= 0 && len(idx) > c.Opts.MaxRetests {
		m.NotRetested = len(idx) - c.Opts.MaxRetests
		idx = idx[:c.Opts.MaxRetests]
	}
	controls := c.controls(idx)
	r := &retestRun{c: c, clock: c.Opts.Clock, total: len(controls) + len(idx)}
	if r.clock == nil {
		start := time.Now()
		r.clock = func() time.Duration { return time.Since(start) }
	}
	r.t0 = r.clock()
	defer func() { c.attribute(ctx, r.failed, true, c.Opts.Grace) }()
	if !r.alone(ctx, controls, nil) {
		m.NotRetested += len(idx) // interrupted
		return
	}
	rest, bw := idx, map[int]sharedBW(nil)
	if c.Opts.RetestAtOnce > 1 {
		rest, bw = r.atOnce(ctx, a, idx)
	}
	if !r.alone(ctx, rest, bw) {
		return
	}
	c.retestStalled(ctx, a, append(controls, idx...), r.spent)
}

// retestRun is one mesh's retests: the budget's clock and what is done.
type retestRun struct {
	c           *Coordinator
	clock       func() time.Duration
	t0          time.Duration
	done, total int
	failed      []int // retests that failed while both ranks were there
}

// spent says whether the budget in time is used up.
func (r *retestRun) spent() bool {
	b := r.c.Opts.RetestBudget
	return b > 0 && r.clock()-r.t0 >= b
}

func (r *retestRun) progress(k int) {
	r.done += k
	if r.c.Opts.Retest != nil {
		r.c.Opts.Retest(r.done, r.total)
	}
}

// alone retests the directions idx one at a time: a control whatever the
// budget, an outlier while it lasts (those left are counted not
// retested). A direction in bw has its write-bw from the pass at once
// (fine there): only its latency is measured. It says whether it got
// through idx.
func (r *retestRun) alone(ctx context.Context, idx []int, bw map[int]sharedBW) bool {
	m := r.c.Mesh
	for k, i := range idx {
		p := &m.Pairs[i]
		if ctx.Err() != nil || !p.Control && r.spent() {
			for _, j := range idx[k:] {
				if !m.Pairs[j].Control {
					m.NotRetested++
				}
			}
			return false
		}
		part := retestPart(p)
		shared, ok := bw[i]
		if ok {
			part = LatPart
		}
		o := r.c.directionPart(ctx, p.From, p.To, 0, part)
		if ok {
			o = merge(shared.out, o)
		}
		rt := o.figures()
		rt.Beside = shared.beside // 0 where not shared
		p.Retest = &rt            // judged by Analyze
		if _, gone := r.c.left(p.From, p.To); rt.Error != "" && !rt.Interrupted && !gone {
			r.failed = append(r.failed, i)
		}
		r.progress(1)
	}
	return true
}

// sharedBW is a retest's write-bw measured at once with others: beside
// is how many.
type sharedBW struct {
	out    Outcome
	beside int
}

// atOnce measures the write-bw of the outliers in idx that were slow in
// it or failed, but for a culprit's, Opts.RetestAtOnce at a time
// (batches of two at least), and judges it. An outlier of write-bw alone
// that is fine beside others is done: that is its retest. One slow in
// latency too keeps that write-bw (in bw) and is retested alone for its
// latency. One slow or failed beside others says nothing (the others may
// have slowed it): it has no retest until it is measured alone, and stays
// not retested if the budget ends first. It returns the outliers left to
// retest alone, in idx's order.
func (r *retestRun) atOnce(ctx context.Context, a *analysis, idx []int) (rest []int, bw map[int]sharedBW) {
	m := r.c.Mesh
	culprit := culpritRanks(m)
	// A culprit's outliers by the first measurements are likely to be
	// confirmed, not cleared: measured at once and then alone, a slow
	// NIC's 2(n-1) would cost twice (its own rank in each batch, one at
	// a time) and spend the budget.
	var want []int
	for _, i := range idx {
		p := &m.Pairs[i]
		if retestPart(p).Runs(BWPart) && !culprit[p.From] && !culprit[p.To] {
			want = append(want, i)
		}
	}
	var batches [][]int
	for _, b := range r.c.batches(want, r.c.Opts.RetestAtOnce) {
		if len(b) > 1 { // one alone is the retest alone's
			batches = append(batches, b)
			r.total += len(b)
		}
	}
	got := r.measureBatches(ctx, batches)
	if len(got) > 0 {
		a.judgeRetests()
	}
	done := map[int]bool{}
	bw = map[int]sharedBW{}
	for i, s := range got {
		p := &m.Pairs[i]
		fine := p.Retest.Error == "" && !p.Retest.SlowBW
		switch {
		case fine && retestPart(p) == BWPart:
			p.Retest.Beside, p.Retest.SlowLat = s.beside, false
			done[i] = true
		case fine:
			bw[i] = s
			p.Retest = nil
		default:
			p.Retest = nil
		}
	}
	for _, i := range idx {
		if !done[i] {
			rest = append(rest, i)
		}
	}
	r.total = r.done + len(rest)
	return rest, bw
}

// measureBatches measures each batch's write-bw, its directions at
// once, while the budget lasts; each is its direction's retest, to be
// judged.
func (r *retestRun) measureBatches(ctx context.Context, batches [][]int) map[int]sharedBW {
	m := r.c.Mesh
	got := map[int]sharedBW{}
	for _, batch := range batches {
		if ctx.Err() != nil || r.spent() {
			break
		}
		outs := make([]Outcome, len(batch))
		var wg sync.WaitGroup
		for k, i := range batch {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p := &m.Pairs[i]
				outs[k] = r.c.measureTask(ctx, p.From, Task{Server: p.To, Part: BWPart, Beside: len(batch) - 1})
			}()
		}
		wg.Wait()
		for k, i := range batch {
			got[i] = sharedBW{out: outs[k], beside: len(batch) - 1}
			rt := outs[k].figures()
			m.Pairs[i].Retest = &rt
		}
		r.progress(len(batch))
	}
	return got
}

// batches splits the directions idx into groups of at most k, no rank and
// no NIC in two directions of a group (a NIC's ranks would share it), in
// idx's order as far as that allows.
func (c *Coordinator) batches(idx []int, k int) [][]int {
	// Each rank's key once: NIC() formats a string, and each pass over
	// the directions left would ask it again.
	keys := make([]string, len(c.Mesh.Ranks))
	for r := range keys {
		keys[r] = c.shareKey(r)
	}
	var out [][]int
	for left := idx; len(left) > 0; {
		busy := map[string]bool{}
		var b, next []int
		for _, i := range left {
			p := c.Mesh.Pairs[i]
			ka, kb := keys[p.From], keys[p.To]
			if len(b) < k && !busy[ka] && !busy[kb] {
				b = append(b, i)
				busy[ka], busy[kb] = true, true
			} else {
				next = append(next, i)
			}
		}
		out, left = append(out, b), next
	}
	return out
}

// shareKey is what rank r shares with the ranks on its NIC: the NIC, or
// the rank itself where its device is not known.
func (c *Coordinator) shareKey(r int) string {
	if rk := c.Mesh.Ranks[r]; rk.Device != "" {
		return rk.NIC()
	}
	return fmt.Sprint("rank ", r)
}

// controls picks Opts.Controls healthy directions, spread evenly over the
// mesh's pairs, to retest beside the outliers (idx).
func (c *Coordinator) controls(idx []int) []int {
	if c.Opts.Controls <= 0 {
		return nil
	}
	retested := map[int]bool{}
	for _, i := range idx {
		retested[i] = true
	}
	var healthy []int
	for i, p := range c.Mesh.Pairs {
		if !retested[i] && p.Measured() && !p.Outlier() {
			healthy = append(healthy, i)
		}
	}
	k := min(c.Opts.Controls, len(healthy))
	out := make([]int, 0, k)
	for j := range k {
		i := healthy[j*len(healthy)/k]
		c.Mesh.Pairs[i].Control = true
		out = append(out, i)
	}
	return out
}

// latencyTries is how often a latency outlier is measured alone at most.
const latencyTries = 3

// retestStalled measures again the latencies still slow in their retest,
// until they are not or latencyTries are spent: a scheduler stall only
// ever raises a latency, and one that hit a direction twice (one in forty
// of a hundred stalled outliers of a 64-rank mesh) would be left
// inconclusive; a slow path is slow at every try. The retest keeps the
// best try.
func (c *Coordinator) retestStalled(ctx context.Context, a *analysis, idx []int, spent func() bool) {
	m := c.Mesh
	for try := 2; try <= latencyTries; try++ {
		a.judgeRetests() // the retests' SlowLat, no culprits yet
		for _, i := range idx {
			p := &m.Pairs[i]
			if rt := p.Retest; p.Control || rt == nil || rt.Error != "" || !rt.SlowLat || rt.SlowBW {
				continue
			}
			if ctx.Err() != nil || spent() {
				return
			}
			o := c.directionPart(ctx, p.From, p.To, 0, LatPart)
			p.Retest.Tries = max(p.Retest.Tries, 1) + 1
			if o.Error == "" && o.LatP50us < p.Retest.LatP50us {
				p.Retest.LatP50us, p.Retest.LatP99us = o.LatP50us, o.LatP99us
			}
		}
	}
}

// retestOrder is the directions to retest: outliers, but for a latency
// of one direction alone (LoneLatency), and failures while both ranks
// are there (a failure once is no dead path). Those of a rank
// already a culprit by the first measurements go last (a slow node has
// 2(n−1), enough to use up the budget): the retests are for those a
// retest can clear or confirm. Within each, the cheap ones first: a
// latency alone is a ping-pong, a bandwidth a stream of seconds.
func (c *Coordinator) retestOrder(a *analysis) []int {
	m := c.Mesh
	a.analyze()
	at := pairTable(m.Pairs, len(m.Ranks))
	var idx []int
	for i := range m.Pairs {
		p := &m.Pairs[i]
		rev := at.get(Direction{From: p.To, To: p.From})
		if (p.Outlier() || blamable(m, p)) && !LoneLatency(p, rev) {
			idx = append(idx, i)
		}
	}
	culprit := culpritRanks(m)
	rank := func(p results.MeshPair) int {
		r := 0
		if culprit[p.From] || culprit[p.To] {
			r = 2
		}
		if retestPart(&p) != LatPart {
			r++
		}
		return r
	}
	sort.SliceStable(idx, func(i, j int) bool { return rank(m.Pairs[idx[i]]) < rank(m.Pairs[idx[j]]) })
	return idx
}

// retestPart is what a retest of p measures: the one figure that was an
// outlier, or both (a failure, or both slow). A control measures both:
// its retest is the reference of every retest's figures.
func retestPart(p *results.MeshPair) Part {
	switch {
	case p.Control || p.Error != "" || p.SlowBW == p.SlowLat:
		return BothParts
	case p.SlowLat:
		return LatPart
	}
	return BWPart
}
