package mesh

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"time"
)

// Quick mode (`mesh --quick`, issue 47): instead of the N−1 rounds of the
// tournament, a few rounds of random perfect matchings (both directions of
// each pair at once), then adaptive rounds that pair each suspect with
// ranks already known good until it is named or cleared. docs/mesh.md,
// "Quick mode", defines the kinds and gives the simulated figures.

// QuickRank is what the planner knows of a rank: its host and, where the
// ranks were given a NIC list, the index of its NIC in it (its rail) and
// the device's name. NIC < 0: no index (every rank on one class).
type QuickRank struct {
	Host   string
	NIC    int
	Device string
}

// QuickOptions tune the search; the zero value of a field takes its
// default (DefaultQuickOptions).
type QuickOptions struct {
	Seed uint64
	// RandomRounds is how many random matchings open the search (4).
	RandomRounds int
	// MaxRounds bounds all rounds, random and adaptive (RandomRounds+32).
	MaxRounds int
	// Budget bounds the expected wall time with Cost (0: no bound).
	Budget time.Duration
	Cost   QuickCost
	// Fraction: a direction or test below it × the reference is slow (0.85).
	Fraction float64
	// Sigmas: a random round's direction must also be this many robust
	// spreads below the reference to make a suspect (3).
	Sigmas float64
	// Confirm and Clear: a suspect rank or pair is tested against known-good
	// partners (a pair: again) until its slow tests outnumber its fine ones
	// by Confirm (6: blamed) or its fine ones the slow by Clear (2: cleared).
	Confirm, Clear int
	// OffRail pairs any rank with any other host's; by default a rank on
	// NIC i meets only ranks on NIC i (rail-aligned, as NCCL's traffic).
	OffRail bool
	// Controls is how many pairs of known-good ranks of each class an
	// adaptive round measures beside its tests, for the round's reference (32).
	Controls int
}

// DefaultQuickOptions are the figures the simulations in quicksim_test.go
// were run with.
var DefaultQuickOptions = QuickOptions{RandomRounds: 4, Fraction: 0.85, Sigmas: 3, Confirm: 6, Clear: 2, Controls: 32,
	Cost: DefaultQuickCost}

// QuickCost is a round's expected wall time: Measure (both directions at
// once) plus the control plane's PerRound + PerRank × ranks.
type QuickCost struct{ Measure, PerRound, PerRank time.Duration }

// DefaultQuickCost: 0.25 s measurements; 20 ms a round + 50 µs a rank of
// control plane, an assumption until measured (harness_test.go measured
// 58 ms a round at 1000 in-process ranks; this says 70 ms).
var DefaultQuickCost = QuickCost{Measure: 250 * time.Millisecond, PerRound: 20 * time.Millisecond, PerRank: 50 * time.Microsecond}

// Round is the expected wall time of one round of n ranks.
func (c QuickCost) Round(n int) time.Duration {
	return c.Measure + c.PerRound + time.Duration(n)*c.PerRank
}

// QuickResult is one pair's figures in a round: the bandwidth of each
// direction (A writes to B, B writes to A), measured at once. A direction
// that returned nothing is 0 (or Failed for both).
type QuickResult struct {
	Pair   Pair
	AB, BA float64
	Failed bool
}

// QuickMeasurer measures a round of disjoint pairs, both directions of
// each at once, and returns a result per pair (missing ones count failed).
type QuickMeasurer interface {
	MeasureRound(round int, pairs []Pair) []QuickResult
}

// QuickKind is what a quick verdict names.
type QuickKind string

const (
	QuickNIC  QuickKind = "NIC"  // one rank's NIC; its host's other ranks fine
	QuickNode QuickKind = "node" // a rank that is its host's only one: NIC and node alike
	QuickHost QuickKind = "host" // most (and at least 2) of a host's ranks slow
	QuickRail QuickKind = "rail" // NIC index i slow across the hosts, in every random round
	QuickLink QuickKind = "link" // two ranks fine with others, slow together
)

// QuickSuspect is one named suspect. Ratio is its typical figure against
// the reference (geometric mean of its slow tests, or of the rail's
// medians).
type QuickSuspect struct {
	Kind  QuickKind
	Ranks []int // the rank(s): NIC, node, host's slow ranks, a link's two
	Host  string
	Rail  int // QuickRail: the NIC index
	Ratio float64
}

func (s QuickSuspect) String() string {
	switch s.Kind {
	case QuickRail:
		return fmt.Sprintf("rail %d (NIC index %d on every host): %.2f x the other rails", s.Rail, s.Rail, s.Ratio)
	case QuickHost:
		return fmt.Sprintf("host %s: %d of its ranks slow (%v), %.2f x their partners", s.Host, len(s.Ranks), s.Ranks, s.Ratio)
	case QuickLink:
		return fmt.Sprintf("link %d-%d: both ranks fine with others, %.2f x together", s.Ranks[0], s.Ranks[1], s.Ratio)
	default:
		return fmt.Sprintf("%s of rank %d (%s): %.2f x known-good partners", s.Kind, s.Ranks[0], s.Host, s.Ratio)
	}
}

// QuickVerdict is the search's outcome.
type QuickVerdict struct {
	Suspects []QuickSuspect
	// Rounds run, of them RandomRounds random matchings; Wall is their
	// expected time under the options' Cost.
	Rounds, RandomRounds int
	Wall                 time.Duration
	// Unresolved: ranks and pairs still suspect when the budget ran out.
	UnresolvedRanks []int
	UnresolvedPairs []Pair
	// PairCoverage is the chance that one given pair of the same class
	// (rail) was measured in the random rounds: what a fault of one pair
	// alone had of being seen.
	PairCoverage float64
	// CannotSee says what this search could not have found.
	CannotSee []string
}

// Blames says whether the verdict names anything.
func (v QuickVerdict) Blames() bool { return len(v.Suspects) > 0 }

type quickTestKind int

const (
	qtRandom quickTestKind = iota
	qtRank                 // suspect (A or B, the other known good)
	qtLink                 // a suspect pair again
	qtControl
	qtMutual // two suspects, where no known-good rank is left for them
)

type quickTest struct {
	pair    Pair
	kind    quickTestKind
	suspect int // qtRank: the suspect rank
}

type quickState struct {
	slow, fine int
	score      int     // slow − fine tests
	oneWay     int     // tests slow one way only: no step
	logSum     float64 // of slow tests' ratios
	used       map[int]bool
	done       bool
	blamed     bool
}

// Quick is the planner: Next yields a round, Record takes its results,
// until Next says done; then Verdict.
type Quick struct {
	opt    QuickOptions
	layout []QuickRank
	class  []int
	nclass int
	byCls  [][]int
	hostOf []int
	hosts  []string
	rng    *rand.Rand

	round   int
	pending []quickTest
	done    bool

	spreads  []float64
	spread   float64
	ref      []float64   // per class: median of the random rounds' medians
	clsMed   [][]float64 // random round → class → median direction
	suspect  map[int]int // rank → its slow pairs in the random rounds
	good     []bool
	ranks    map[int]*quickState
	links    map[Pair]*quickState
	linkList []Pair
	rails    map[int]float64
}

// NewQuick plans a quick search over the layout.
func NewQuick(layout []QuickRank, opt QuickOptions) (*Quick, error) {
	d := DefaultQuickOptions
	if opt.RandomRounds <= 0 {
		opt.RandomRounds = d.RandomRounds
	}
	if opt.MaxRounds <= 0 {
		opt.MaxRounds = opt.RandomRounds + 32
	}
	if opt.Fraction <= 0 {
		opt.Fraction = d.Fraction
	}
	if opt.Sigmas <= 0 {
		opt.Sigmas = d.Sigmas
	}
	if opt.Confirm <= 0 {
		opt.Confirm = d.Confirm
	}
	if opt.Clear <= 0 {
		opt.Clear = d.Clear
	}
	if opt.Controls <= 0 {
		opt.Controls = d.Controls
	}
	if opt.Cost == (QuickCost{}) {
		opt.Cost = d.Cost
	}
	n := len(layout)
	if n < 2 {
		return nil, fmt.Errorf("quick mode needs 2 ranks or more, not %d", n)
	}
	q := &Quick{opt: opt, layout: layout, class: make([]int, n), hostOf: make([]int, n),
		rng: rand.New(rand.NewPCG(opt.Seed, 0x51c4)), suspect: map[int]int{}, good: make([]bool, n),
		ranks: map[int]*quickState{}, links: map[Pair]*quickState{}}
	hostIdx := map[string]int{}
	onRail := !opt.OffRail
	for _, r := range layout {
		onRail = onRail && r.NIC >= 0
	}
	clsIdx := map[int]int{}
	for i, r := range layout {
		h, ok := hostIdx[r.Host]
		if !ok {
			h = len(q.hosts)
			hostIdx[r.Host] = h
			q.hosts = append(q.hosts, r.Host)
		}
		q.hostOf[i] = h
		c := 0
		if onRail {
			if c, ok = clsIdx[r.NIC]; !ok {
				c = len(clsIdx)
				clsIdx[r.NIC] = c
			}
		}
		q.class[i] = c
	}
	q.nclass = max(1, len(clsIdx))
	q.byCls = make([][]int, q.nclass)
	for i, c := range q.class {
		q.byCls[c] = append(q.byCls[c], i)
	}
	return q, nil
}

// Next is the next round's pairs, disjoint; false when the search is done.
func (q *Quick) Next() ([]Pair, bool) {
	if q.done || q.round >= q.opt.MaxRounds || (q.opt.Budget > 0 && time.Duration(q.round+1)*q.opt.Cost.Round(len(q.layout)) > q.opt.Budget) {
		q.done = true
		return nil, false
	}
	busy := make([]bool, len(q.layout))
	var tests []quickTest
	if q.round < q.opt.RandomRounds {
		for c := range q.byCls {
			for _, p := range q.match(q.byCls[c], busy) {
				tests = append(tests, quickTest{pair: p, kind: qtRandom})
			}
		}
	} else {
		tests = q.adaptive(busy)
		if len(tests) == 0 {
			q.done = true
			return nil, false
		}
		for c := range q.byCls {
			var free []int
			for _, r := range q.byCls[c] {
				if q.good[r] && !busy[r] {
					free = append(free, r)
				}
			}
			ps := q.match(free, busy)
			if len(ps) > q.opt.Controls {
				for _, p := range ps[q.opt.Controls:] {
					busy[p.A], busy[p.B] = false, false
				}
				ps = ps[:q.opt.Controls]
			}
			for _, p := range ps {
				tests = append(tests, quickTest{pair: p, kind: qtControl})
			}
		}
	}
	q.pending = tests
	pairs := make([]Pair, len(tests))
	for i, t := range tests {
		pairs[i] = t.pair
	}
	return pairs, true
}

// match pairs the free ranks at random, never two of one host; one may rest.
func (q *Quick) match(ranks []int, busy []bool) []Pair {
	perm := make([]int, 0, len(ranks))
	for _, r := range ranks {
		if !busy[r] {
			perm = append(perm, r)
		}
	}
	q.rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	var out []Pair
	used := make([]bool, len(perm))
	for i, a := range perm {
		if used[i] {
			continue
		}
		for j := i + 1; j < len(perm) && j < i+64; j++ {
			if !used[j] && q.hostOf[perm[j]] != q.hostOf[a] {
				used[i], used[j] = true, true
				busy[a], busy[perm[j]] = true, true
				out = append(out, pairOf(a, perm[j]))
				break
			}
		}
	}
	return out
}

// adaptive plans the tests of the suspects still open.
func (q *Quick) adaptive(busy []bool) []quickTest {
	var tests []quickTest
	pools := make([][]int, q.nclass)
	for c := range q.byCls {
		for _, r := range q.byCls[c] {
			if q.good[r] {
				pools[c] = append(pools[c], r)
			}
		}
		q.rng.Shuffle(len(pools[c]), func(i, j int) { pools[c][i], pools[c][j] = pools[c][j], pools[c][i] })
	}
	open := make([]int, 0, len(q.ranks))
	for r, s := range q.ranks {
		if !s.done {
			open = append(open, r)
		}
	}
	sort.Ints(open)
	waiting := make([][]int, q.nclass)
	for _, r := range open {
		s := q.ranks[r]
		if busy[r] {
			continue
		}
		for _, g := range pools[q.class[r]] {
			if !busy[g] && !s.used[g] && q.hostOf[g] != q.hostOf[r] {
				busy[r], busy[g] = true, true
				s.used[g] = true
				tests = append(tests, quickTest{pair: pairOf(r, g), kind: qtRank, suspect: r})
				break
			}
		}
		if !busy[r] {
			waiting[q.class[r]] = append(waiting[q.class[r]], r)
		}
	}
	// Suspects with no known-good partner free (a rail all suspect) meet
	// each other: a fine pair clears both a step, a slow one says nothing.
	for _, w := range waiting {
		ps := q.match(w, busy)
		for _, p := range ps {
			tests = append(tests, quickTest{pair: p, kind: qtMutual})
		}
		if len(ps) == 0 {
			for _, r := range w {
				q.ranks[r].done = true // nobody left to tell it by: unresolved
			}
		}
	}
	for _, p := range q.linkList {
		l := q.links[p]
		if l.done {
			continue
		}
		if q.blamedRank(p.A) || q.blamedRank(p.B) {
			l.done = true // explained by a rank
			continue
		}
		if !q.resolved(p.A) || !q.resolved(p.B) || busy[p.A] || busy[p.B] {
			continue
		}
		busy[p.A], busy[p.B] = true, true
		tests = append(tests, quickTest{pair: p, kind: qtLink})
	}
	return tests
}

func (q *Quick) blamedRank(r int) bool { s := q.ranks[r]; return s != nil && s.blamed }
func (q *Quick) resolved(r int) bool   { s := q.ranks[r]; return s == nil || s.done }

func quickMedian(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

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
			q.ranks[r] = &quickState{used: map[int]bool{}}
		}
	}
	sort.Slice(q.linkList, func(i, j int) bool {
		a, b := q.linkList[i], q.linkList[j]
		return a.A < b.A || a.A == b.A && a.B < b.B
	})
}

// Verdict names what the search found; call it once Next said done.
func (q *Quick) Verdict() QuickVerdict {
	n := len(q.layout)
	v := QuickVerdict{Rounds: q.round, RandomRounds: min(q.round, q.opt.RandomRounds),
		Wall: time.Duration(q.round) * q.opt.Cost.Round(n)}
	railIdx := func(c int) int {
		if r := q.byCls[c]; len(r) > 0 && q.layout[r[0]].NIC >= 0 {
			return q.layout[r[0]].NIC
		}
		return c
	}
	var rails []int
	for c := range q.rails {
		rails = append(rails, c)
	}
	sort.Ints(rails)
	for _, c := range rails {
		v.Suspects = append(v.Suspects, QuickSuspect{Kind: QuickRail, Rail: railIdx(c), Ratio: q.rails[c]})
	}
	perHost := make([]int, len(q.hosts))
	for _, h := range q.hostOf {
		perHost[h]++
	}
	blamedOn := map[int][]int{}
	var open []int
	for r, s := range q.ranks {
		if s.blamed {
			blamedOn[q.hostOf[r]] = append(blamedOn[q.hostOf[r]], r)
		} else if s.score > -q.opt.Clear {
			open = append(open, r)
		}
	}
	sort.Ints(open)
	v.UnresolvedRanks = open
	hs := make([]int, 0, len(blamedOn))
	for h := range blamedOn {
		hs = append(hs, h)
	}
	sort.Ints(hs)
	ratio := func(s *quickState) float64 { return math.Exp(s.logSum / float64(max(1, s.slow))) }
	for _, h := range hs {
		rs := blamedOn[h]
		sort.Ints(rs)
		if len(rs) >= 2 && 2*len(rs) > perHost[h] {
			sum := 0.0
			for _, r := range rs {
				sum += math.Log(ratio(q.ranks[r]))
			}
			v.Suspects = append(v.Suspects, QuickSuspect{Kind: QuickHost, Ranks: rs, Host: q.hosts[h], Ratio: math.Exp(sum / float64(len(rs)))})
			continue
		}
		for _, r := range rs {
			k := QuickNIC
			if perHost[h] == 1 {
				k = QuickNode
			}
			v.Suspects = append(v.Suspects, QuickSuspect{Kind: k, Ranks: []int{r}, Host: q.hosts[h], Ratio: ratio(q.ranks[r])})
		}
	}
	for _, p := range q.linkList {
		l := q.links[p]
		switch {
		case l.blamed:
			v.Suspects = append(v.Suspects, QuickSuspect{Kind: QuickLink, Ranks: []int{p.A, p.B}, Host: q.hosts[q.hostOf[p.A]] + "," + q.hosts[q.hostOf[p.B]], Ratio: ratio(l)})
		case !l.done && !q.blamedRank(p.A) && !q.blamedRank(p.B):
			v.UnresolvedPairs = append(v.UnresolvedPairs, p)
		}
	}
	v.PairCoverage, v.CannotSee = q.cannotSee(v.RandomRounds)
	return v
}

// cannotSee is the chance a given same-class pair was met by the random
// rounds, and what the search is blind to.
func (q *Quick) cannotSee(rounds int) (float64, []string) {
	m := 0
	for _, c := range q.byCls {
		m = max(m, len(c))
	}
	cover := 0.0
	if m > 1 {
		cover = 1 - math.Pow(1-1/float64(m-1), float64(rounds))
	}
	out := []string{
		fmt.Sprintf("a slow pair (link) alone: %d random rounds met a given pair with probability %.1f%%; the full mesh measures every pair", rounds, 100*cover),
		fmt.Sprintf("a path fault slowing a share s of the pairs crossing it: seen with probability about 1-(1-s)^k, k the crossing pairs the %d rounds measured (quick_test: s=1/32 of a leaf's cross-leaf pairs, 36%% a round)", rounds),
		fmt.Sprintf("slowness milder than %.2f x, and latency (bandwidth only)", q.opt.Fraction),
	}
	if q.nclass > 1 {
		out = append(out, "pairs across rails (NIC i with NIC j): measured only with OffRail (--quick-off-rail)")
	} else if len(q.layout) > 1 {
		out = append(out, "a rail: no NIC indexes, or one class, to compare rails with")
	}
	return cover, out
}

// RunQuick drives a planner with a measurer to its verdict.
func RunQuick(q *Quick, m QuickMeasurer) QuickVerdict {
	for {
		pairs, ok := q.Next()
		if !ok {
			return q.Verdict()
		}
		q.Record(m.MeasureRound(q.round, pairs))
	}
}

// QuickPlan is what `mesh --plan N --quick` prints: the rounds and the
// expected wall time of a quick search over n ranks (layout may be nil).
func QuickPlan(n int, layout []QuickRank, opt QuickOptions) string {
	if opt.RandomRounds <= 0 {
		opt.RandomRounds = DefaultQuickOptions.RandomRounds
	}
	if opt.MaxRounds <= 0 {
		opt.MaxRounds = opt.RandomRounds + 32
	}
	if opt.Cost == (QuickCost{}) {
		opt.Cost = DefaultQuickCost
	}
	confirm, clear := opt.Confirm, opt.Clear
	if confirm <= 0 {
		confirm = DefaultQuickOptions.Confirm
	}
	if clear <= 0 {
		clear = DefaultQuickOptions.Clear
	}
	per := opt.Cost.Round(n)
	healthy := opt.RandomRounds + clear
	fault := opt.RandomRounds + confirm
	link := opt.RandomRounds + clear + confirm
	var b strings.Builder
	fmt.Fprintf(&b, "rdmabench mesh --plan %d --quick: %d random rounds of up to %d pairs at once (perfect matchings", n, opt.RandomRounds, n/2)
	if layout != nil {
		fmt.Fprintf(&b, ", on-rail")
	}
	fmt.Fprintf(&b, "), both directions of each at once, then adaptive rounds: each suspect against known-good ranks of its rail until %d slow tests name it or %d fine ones clear it\n", confirm, clear)
	fmt.Fprintf(&b, " a round: %s measuring + %s control plane (%s + %s a rank) = %s\n",
		opt.Cost.Measure, opt.Cost.PerRound+time.Duration(n)*opt.Cost.PerRank, opt.Cost.PerRound, opt.Cost.PerRank, per)
	fmt.Fprintf(&b, " without noise a healthy fabric takes %d rounds, %s; a slow NIC, node, host or rail %d, %s; a slow link %d, %s; stalls and contention add suspects to clear (15 rounds on average for a healthy 1000-rank mesh in the simulation, docs/mesh.md); at most %d rounds, %s\n",
		healthy, quickRound(time.Duration(healthy)*per), fault, quickRound(time.Duration(fault)*per), link, quickRound(time.Duration(link)*per), opt.MaxRounds, quickRound(time.Duration(opt.MaxRounds)*per))
	m := n - 1
	if layout != nil {
		q, err := NewQuick(layout, opt)
		if err == nil {
			m = 0
			for _, c := range q.byCls {
				m = max(m, len(c)-1)
			}
		}
	}
	if m > 0 {
		fmt.Fprintf(&b, " cannot see: a slow pair alone (met with probability %.1f%%; the full mesh's %d rounds measure every pair), slowness milder than %.2f x, latency",
			100*(1-math.Pow(1-1/float64(m), float64(opt.RandomRounds))), n-1+n%2, fracOr(opt.Fraction))
	}
	return b.String()
}

func fracOr(f float64) float64 {
	if f <= 0 {
		return DefaultQuickOptions.Fraction
	}
	return f
}

func quickRound(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }
