package mesh

import (
	"math"
	"sort"

	"github.com/rdmabench/rdmabench/results"
)

// rankPair is one pair of a rank as the culprit rule reads it.
type rankPair struct {
	failed bool
	// resid is, per figure, the pair's confirmed badness (a mean over its
	// directions) less the partner's other pairs' median; n how many
	// directions and nref how many partner pairs; ok false with neither.
	resid perFigure[float64]
	// dirs are its directions' own residuals (n of them), for the
	// rank's typical: a mean of two directions set against a median of
	// single ones reads low wherever the figures have a long slow tail
	// (bandwidth under contention, capped at the line rate: 0.91x for
	// every rank of a healthy 256-rank mesh on 2 CPUs).
	dirs perFigure[[2]float64]
	n    perFigure[int]
	nref perFigure[int]
	ok   perFigure[bool]
	// confirmed: a direction of it was an outlier in the figure and its
	// retest alone still is (or failed while both ranks were there);
	// alone: its figure is its retests' only.
	confirmed, alone perFigure[bool]
}

// confirmedOutlier says whether direction p was an outlier in fig and its
// retest alone is one too, or failed while both ranks were there.
func confirmedOutlier(m *results.Mesh, fig figure, p *results.MeshPair) bool {
	if p == nil || !*fig.slow(&p.MeshFigures) || p.Retest == nil {
		return false
	}
	if p.Retest.Error != "" {
		return !p.Retest.Interrupted && m.Ranks[p.From].Dead == "" && m.Ranks[p.To].Dead == ""
	}
	return *fig.slow(p.Retest)
}

// rankPairs are rank rk's pairs with a partner there, measured or failed,
// but for its partners on its own NIC.
func rankPairs(m *results.Mesh, rfs perFigure[*refs], dirs *dirTable[*results.MeshPair], rk int) []rankPair {
	var out []rankPair
	for s := range m.Ranks {
		ab, ba := dirs.get(Direction{From: rk, To: s}), dirs.get(Direction{From: s, To: rk})
		failed := (ab != nil && blamable(m, ab)) || (ba != nil && blamable(m, ba))
		if s == rk || !(failed || (ab != nil && ab.Measured()) || (ba != nil && ba.Measured())) {
			continue // not scheduled, or a rank had left
		}
		if rfs[bwFigure].cls.Of(rk, s) == results.ClassSameNIC { // both figures' classes are the mesh's
			// Two processes of one NIC share the NIC and the host: their
			// pair tells neither apart, only the processes, whose pairs
			// differ by what the host did while each ran (make demo's
			// 0.32-0.38 Gb/s). No evidence against a rank.
			continue
		}
		rp := rankPair{failed: failed}
		for i, rf := range rfs {
			var sum float64
			k := 0
			alone := true
			for _, p := range []*results.MeshPair{ab, ba} {
				if p == nil || !p.Measured() {
					continue
				}
				if y, ok := rf.confirmed(p); ok {
					rp.dirs[i][k] = y
					sum, k = sum+y, k+1
					alone = alone && p.Retest != nil && retestMeasured(rf.fig, p.Retest)
				}
			}
			rp.alone[i] = alone
			ref, nref, ok := rf.medExcept(s, rk)
			if k == 0 || !ok {
				continue
			}
			rp.resid[i], rp.n[i], rp.nref[i], rp.ok[i] = sum/float64(k)-ref, k, nref, true
			for d := range k {
				rp.dirs[i][d] -= ref
			}
			for _, p := range []*results.MeshPair{ab, ba} {
				rp.confirmed[i] = rp.confirmed[i] || confirmedOutlier(m, rf.fig, p)
			}
		}
		out = append(out, rp)
	}
	return out
}

// culprits are the ranks whose own figures say so: in a figure, the
// typical of their pairs (the value more than half of them reach, a failed
// pair the worst) is beyond the practical threshold against the partners'
// other pairs, and either most of their pairs are bad (beyond the cut
// each, or failed: two bad links of a rank's 19 are two links, not a node)
// or the typical is beyond the noise of a median of them (a node only
// somewhat slower, found by its many pairs together where each alone is
// within the noise). Each pair is read as confirmed: a direction a
// retest cleared is no evidence against the rank, one not retested none
// at all. So a rank at 1.02x its partners can never be one.
func (r Rules) culprits(m *results.Mesh, rfs perFigure[*refs], dirs *dirTable[*results.MeshPair]) []results.Culprit {
	j := culpritJudge{rfs: rfs, noise: pairNoise(m, rfs)}
	j.byHost = r.slowOnHosts(m, rfs, dirs, j.noise)
	var out []results.Culprit
	for rk := range len(m.Ranks) {
		// A rank that left later is judged by what it measured before.
		if c, ok := j.judge(rk, rankPairs(m, rfs, dirs, rk)); ok {
			out = append(out, c)
		}
	}
	return out
}

// culpritJudge is what judging a rank by its pairs needs: each figure's
// references, the noise of a pair's residual (pairNoise) and the ranks
// slow as one of their host's NICs (slowOnHosts).
type culpritJudge struct {
	rfs    perFigure[*refs]
	noise  perFigure[float64]
	byHost perFigure[map[int]float64]
}

// judge is rank rk's verdict from its pairs rps: a culprit, or false.
func (j *culpritJudge) judge(rk int, rps []rankPair) (results.Culprit, bool) {
	c := results.Culprit{Rank: rk, Pairs: len(rps)}
	var rn perFigure[float64]
	for f := range numFigures {
		rn[f] = j.rankNoise(f, rps)
	}
	bad := j.countBad(&c, rps, rn)
	var slow perFigure[bool]
	for f := range numFigures {
		slow[f] = j.typicalSlow(&c, f, rps, rn[f], bad[f])
		if t, ok := j.byHost[f][rk]; ok && !slow[f] {
			// Slow as one of its host's NICs: its figure is the host's
			// pairs against the other hosts' pairs.
			slow[f] = true
			setRatio(&c, f, t)
		}
	}
	if !slow[bwFigure] && !slow[latFigure] {
		return c, false
	}
	c.SlowBW, c.SlowLat = slow[bwFigure], slow[latFigure]
	if c.FailedPairs == c.Pairs {
		c.BWRatio, c.LatRatio = 0, 0
	}
	return c, true
}

// rankNoise is the noise of a rank's pairs whose references are medians
// of about nref directions: its pairs' partners have fewer other pairs
// of a class than of the whole mesh (a same-rail pair of 2 hosts x 2
// NICs x 2 ranks has one), so their references are noisier than
// pairNoise's median of 2(n-2).
func (j *culpritJudge) rankNoise(f figureKind, rps []rankPair) float64 {
	var inv float64
	k := 0
	for _, rp := range rps {
		if rp.ok[f] && rp.nref[f] > 0 {
			inv, k = inv+1/float64(rp.nref[f]), k+1
		}
	}
	if k == 0 {
		return j.noise[f]
	}
	rf := j.rfs[f]
	dir := rf.sigma * math.Sqrt(0.5+math.Pi/2*inv/float64(k))
	return max(j.noise[f], math.Sqrt(dir*dir+rf.common*rf.common))
}

// countBad counts a rank's bad and failed pairs into c and returns, per
// figure, its pairs bad in it (a failed pair is bad in both).
func (j *culpritJudge) countBad(c *results.Culprit, rps []rankPair, rn perFigure[float64]) perFigure[int] {
	var bad perFigure[int]
	for _, rp := range rps {
		pairBad := rp.failed
		for f := range numFigures {
			rf := j.rfs[f]
			// A pair is bad by what a retest alone confirmed: the
			// rounds' figures of a quiet pair are no evidence when the
			// noise they share is not known (a pair's two directions
			// measured back to back share a busy moment of the host).
			cut := rf.cut(rf.k, rp.n[f], rp.nref[f], rp.alone[f])
			if !rp.alone[f] {
				cut = max(cut, rf.k*rn[f])
			}
			slowHere := rp.ok[f] && rp.confirmed[f] && rp.resid[f] > cut
			if slowHere || rp.failed {
				bad[f]++
			}
			pairBad = pairBad || slowHere
		}
		if pairBad {
			c.BadPairs++
		}
		if rp.failed {
			c.FailedPairs++
		}
	}
	return bad
}

// typicalSlow says whether a rank is slow in figure f by the typical of
// its pairs (sets c's ratio for f from its measured pairs): beyond the
// practical threshold, and most pairs bad or the typical beyond the
// noise of a median of them.
func (j *culpritJudge) typicalSlow(c *results.Culprit, f figureKind, rps []rankPair, rn float64, bad int) bool {
	rf := j.rfs[f]
	// Direction by direction (rankPair.dirs), a failed pair's two the
	// worst.
	var v, measured []float64
	pairs := 0
	for _, rp := range rps {
		switch {
		case rp.failed:
			v, pairs = append(v, math.Inf(1), math.Inf(1)), pairs+1
		case rp.ok[f]:
			d := rp.dirs[f][:rp.n[f]]
			v, measured, pairs = append(v, d...), append(measured, d...), pairs+1
		}
	}
	if pairs < 2 {
		return false
	}
	sort.Float64s(v)
	// The value more than half its pairs reach: one slow link of
	// two pairs (a mesh of 3) does not make the rank slow.
	typical := v[(len(v)-1)/2]
	if len(measured) > 0 {
		sort.Float64s(measured)
		setRatio(c, f, measured[(len(measured)-1)/2])
	}
	// The typical of many pairs has about 1.25/√pairs the spread
	// of one pair's residual.
	sd := rn * 1.2533 / math.Sqrt(float64(pairs))
	most := bad >= 2 && 2*bad > pairs
	return typical > rf.fig.practical && (most || rf.commonKnown && typical > rf.kRank*sd)
}

// setRatio sets c's ratio of figure f to its partners' from a badness
// difference (−log bandwidth, log latency).
func setRatio(c *results.Culprit, f figureKind, badness float64) {
	if f == bwFigure {
		c.BWRatio = math.Exp(-badness)
	} else {
		c.LatRatio = math.Exp(badness)
	}
}

// culpritRanks is the set of m's culprit ranks.
func culpritRanks(m *results.Mesh) map[int]bool {
	out := make(map[int]bool, len(m.Culprits))
	for _, c := range m.Culprits {
		out[c.Rank] = true
	}
	return out
}
