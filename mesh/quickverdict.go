package mesh

// What the quick search concludes, and what --plan says of it.

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

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
