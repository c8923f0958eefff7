package mesh

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/rdmabench/rdmabench/internal/stat"
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
	score      int         // slow − fine tests
	oneWay     int         // tests slow one way only: no step
	logSum     float64     // of slow tests' ratios
	used       map[int]int // known-good partner → its tests with this suspect
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
		if g := q.partner(r, pools[q.class[r]], busy); g >= 0 {
			busy[r], busy[g] = true, true
			s.used[g]++
			tests = append(tests, quickTest{pair: pairOf(r, g), kind: qtRank, suspect: r})
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

// partner is a free known-good rank of another host for suspect r: one
// it has not met yet, else (a small rail: every one met, as on 4 hosts)
// the one it met least. A slow link explains one partner's slow tests,
// not every partner's, so meeting them all again still tells the NIC.
// -1: none free.
func (q *Quick) partner(r int, pool []int, busy []bool) int {
	s, best := q.ranks[r], -1
	for _, g := range pool {
		if busy[g] || q.hostOf[g] == q.hostOf[r] {
			continue
		}
		if s.used[g] == 0 {
			return g
		}
		if best < 0 || s.used[g] < s.used[best] {
			best = g
		}
	}
	return best
}

func (q *Quick) blamedRank(r int) bool { s := q.ranks[r]; return s != nil && s.blamed }

func (q *Quick) resolved(r int) bool { s := q.ranks[r]; return s == nil || s.done }

// quickMedian is stat.Median, NaN for none (no reference, not 0).
func quickMedian(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	return stat.Median(v)
}
