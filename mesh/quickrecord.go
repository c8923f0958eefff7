package mesh

// How the quick search reads a round's figures: each pair against its
// class's reference, the random rounds' spread, the suspects' steps.

import (
	"math"
	"sort"
)

// Record takes the results of the round Next gave last.
func (q *Quick) Record(results []QuickResult) {
	figs := q.figures(results)
	random := q.round < q.opt.RandomRounds
	ref := q.references(figs, random)
	if random {
		q.recordRandom(figs, ref)
		q.round++
		if q.round == q.opt.RandomRounds {
			q.endRandom()
		}
		return
	}
	q.recordAdaptive(figs, ref)
	q.round++
}

// quickFig is a pending task's two directions' figures, as its pair is
// ordered; 0: failed or not measured.
type quickFig struct{ ab, ba float64 }

// figures are the pending tasks' figures from the round's results.
func (q *Quick) figures(results []QuickResult) []quickFig {
	byPair := make(map[Pair]QuickResult, len(results))
	for _, r := range results {
		byPair[pairOf(r.Pair.A, r.Pair.B)] = r
	}
	dir := func(v float64, failed bool) float64 {
		if failed || !(v > 0) || math.IsInf(v, 0) {
			return 0
		}
		return v
	}
	figs := make([]quickFig, len(q.pending))
	for i, t := range q.pending {
		r, ok := byPair[t.pair]
		if !ok {
			continue
		}
		ab, ba := r.AB, r.BA
		if r.Pair.A != t.pair.A {
			ab, ba = ba, ab
		}
		figs[i] = quickFig{dir(ab, r.Failed), dir(ba, r.Failed)}
	}
	return figs
}

// references are the round's reference per class: its pairs (random
// rounds) or its controls (adaptive), the random rounds' where they are
// too few.
func (q *Quick) references(figs []quickFig, random bool) []float64 {
	vals := make([][]float64, q.nclass)
	for i, t := range q.pending {
		if t.kind == qtRandom || t.kind == qtControl {
			c := q.class[t.pair.A]
			for _, v := range []float64{figs[i].ab, figs[i].ba} {
				if v > 0 {
					vals[c] = append(vals[c], v)
				}
			}
		}
	}
	var all []float64
	for c := range vals {
		all = append(all, vals[c]...)
	}
	pooled := quickMedian(all)
	ref := make([]float64, q.nclass)
	for c := range ref {
		switch {
		case len(vals[c]) >= 16:
			ref[c] = quickMedian(vals[c])
		case !random && q.ref != nil && q.ref[c] > 0:
			ref[c] = q.ref[c]
		default:
			ref[c] = pooled
		}
	}
	return ref
}

// recordRandom is a random round: its spread, and each slow pair's
// ranks suspect and its link one to follow.
func (q *Quick) recordRandom(figs []quickFig, ref []float64) {
	q.clsMed = append(q.clsMed, ref)
	var logs []float64
	for i, t := range q.pending {
		for _, v := range []float64{figs[i].ab, figs[i].ba} {
			if v > 0 {
				logs = append(logs, math.Log(v/ref[q.class[t.pair.A]]))
			}
		}
	}
	m := quickMedian(logs)
	for i := range logs {
		logs[i] = math.Abs(logs[i] - m)
	}
	q.spreads = append(q.spreads, 1.4826*quickMedian(logs))
	cut := math.Min(math.Log(q.opt.Fraction), -q.opt.Sigmas*q.spreads[len(q.spreads)-1])
	for i, t := range q.pending {
		r := ref[q.class[t.pair.A]]
		slow := false
		for _, v := range []float64{figs[i].ab, figs[i].ba} {
			slow = slow || v <= 0 || math.Log(v/r) < cut
		}
		if slow {
			q.suspect[t.pair.A]++
			q.suspect[t.pair.B]++
			if _, ok := q.links[t.pair]; !ok {
				q.links[t.pair] = &quickState{}
				q.linkList = append(q.linkList, t.pair)
			}
		}
	}
}

// recordAdaptive is an adaptive round: each suspect's or link's test
// against known-good partners steps its search.
func (q *Quick) recordAdaptive(figs []quickFig, ref []float64) {
	cut := math.Log(q.opt.Fraction)
	for i, t := range q.pending {
		var s *quickState
		switch t.kind {
		case qtMutual:
			r := ref[q.class[t.pair.A]]
			if f := figs[i]; f.ab > 0 && f.ba > 0 && math.Log(f.ab/r) >= cut && math.Log(f.ba/r) >= cut {
				for _, x := range []int{t.pair.A, t.pair.B} {
					q.step(x, q.ranks[x], false, 0)
				}
			}
			continue
		case qtRank:
			s = q.ranks[t.suspect]
		case qtLink:
			s = q.links[t.pair]
		default:
			continue
		}
		r := ref[q.class[t.pair.A]]
		f := figs[i]
		lg := func(v float64) float64 {
			if v > 0 {
				return math.Log(v / r)
			}
			return math.Inf(-1)
		}
		xa, xb := lg(f.ab), lg(f.ba)
		x := (xa + xb) / 2
		if (xa < cut) != (xb < cut) {
			// One direction slow, the other fine: a stall (or a fault of
			// one direction, the full mesh's to name): no step.
			s.oneWay++
			if s.oneWay >= q.opt.Confirm {
				s.done = true
			}
			continue
		}
		rank := -1
		if t.kind == qtRank {
			rank = t.suspect
		}
		q.step(rank, s, x < cut, x)
	}
}

// step moves a suspect's walk: a slow test one up, a fine one down;
// Confirm up blames, Clear down clears (a stall or a contended test does
// neither). A cleared rank (rank >= 0) becomes a known-good partner.
func (q *Quick) step(rank int, s *quickState, slow bool, x float64) {
	if s.done {
		return
	}
	if slow {
		s.slow++
		s.score++
		s.logSum += math.Max(x, math.Log(0.01))
		if s.score >= q.opt.Confirm {
			s.done, s.blamed = true, true
		}
		return
	}
	s.fine++
	s.score--
	if s.score <= -q.opt.Clear {
		s.done = true
		if rank >= 0 {
			q.good[rank] = true
		}
	}
}

// endRandom fixes the references and the suspects after the random rounds.
func (q *Quick) endRandom() {
	q.spread = quickMedian(q.spreads)
	q.ref = make([]float64, q.nclass)
	for c := range q.ref {
		var m []float64
		for _, r := range q.clsMed {
			m = append(m, r[c])
		}
		q.ref[c] = quickMedian(m)
	}
	// A rail: a class slower than the classes' median in every random
	// round, where there are at least 3 classes of 8 pairs or more.
	q.rails = map[int]float64{}
	if q.nclass >= 3 {
		big := true
		for c := range q.byCls {
			big = big && len(q.byCls[c]) >= 16
		}
		for c := 0; big && c < q.nclass; c++ {
			slow, logSum := true, 0.0
			for _, r := range q.clsMed {
				x := r[c] / quickMedian(r)
				slow = slow && x < q.opt.Fraction
				logSum += math.Log(x)
			}
			if slow {
				q.rails[c] = math.Exp(logSum / float64(len(q.clsMed)))
			}
		}
	}
	// Known good: a rank slow in under a quarter of its random pairs (none
	// of 4); the others are suspects, tested against the known good. A
	// slow pair of two known-good ranks is retested as a link.
	for r := range q.good {
		q.good[r] = 4*q.suspect[r] < q.opt.RandomRounds
		if !q.good[r] {
			q.ranks[r] = &quickState{used: map[int]int{}}
		}
	}
	sort.Slice(q.linkList, func(i, j int) bool {
		a, b := q.linkList[i], q.linkList[j]
		return a.A < b.A || a.A == b.A && a.B < b.B
	})
}
