package mesh

import (
	"math"
	"sort"
	"strconv"

	"github.com/rdmabench/rdmabench/internal/stat"
	"github.com/rdmabench/rdmabench/results"
)

// slowOnHosts finds, per figure, the ranks of hosts slow as a whole: a
// host with several NICs whose ranks' typical pairs (read as confirmed)
// are slower than the pairs among the other hosts, beyond the practical
// threshold and the noise, for at least two of its NICs and most of
// them. Its own ranks' pairs are no reference for it: on a mesh of two
// hosts, half the pairs touch the slow one, and a rank's partners' other
// pairs are slow too. The map holds each such rank's typical less the
// reference.
func (r Rules) slowOnHosts(m *results.Mesh, rfs perFigure[*refs], dirs *dirTable[*results.MeshPair], noise perFigure[float64]) perFigure[map[int]float64] {
	var out perFigure[map[int]float64]
	groups := hostGroups(m.Ranks, true)
	at := hostsOf(m, groups)
	for f := range numFigures {
		out[f] = map[int]float64{}
		hp := newHostPairs(confirmedPairs(rfs[f], dirs), at, len(groups))
		for gi, g := range groups {
			if len(g.nics) < 2 {
				continue
			}
			for rk, t := range hp.view(gi).slowRanks(m, g, rfs[f], noise[f]) {
				out[f][rk] = t
			}
		}
	}
	return out
}

// hostsOf is each rank's host as an index of groups, where that host has
// several NICs (-1 elsewhere): a rank is on a host by its name, whether
// or not it is in the host's group (it left, or reported no device).
func hostsOf(m *results.Mesh, groups []*hostGroup) []int {
	byName := map[string]int{}
	for gi, g := range groups {
		if len(g.nics) >= 2 {
			byName[g.host] = gi
		}
	}
	at := make([]int, len(m.Ranks))
	for r, rk := range m.Ranks {
		at[r] = -1
		if gi, ok := byName[hostName(rk)]; ok {
			at[r] = gi
		}
	}
	return at
}

// pairFigure is a pair's confirmed figure, the mean of its directions',
// and its class.
type pairFigure struct {
	p Pair
	y float64
	c results.PairClass
}

// confirmedPairs are the pairs with a confirmed figure in rf's (rf.confirmed).
func confirmedPairs(rf *refs, dirs *dirTable[*results.MeshPair]) []pairFigure {
	var out []pairFigure
	dirs.each(func(d Direction, p *results.MeshPair) {
		if d.From > d.To {
			return
		}
		var sum float64
		k := 0
		for _, q := range []*results.MeshPair{p, dirs.get(Direction{From: d.To, To: d.From})} {
			if q == nil || !q.Measured() {
				continue
			}
			if y, ok := rf.confirmed(q); ok {
				sum, k = sum+y, k+1
			}
		}
		if k > 0 {
			out = append(out, pairFigure{Pair{d.From, d.To}, sum / float64(k), p.Class})
		}
	})
	return out
}

// hostPair is a pair of a host's ranks, or of one of them and another
// host's (-1), with its figure less its class's reference.
type hostPair struct {
	a, b int
	y    float64
}

// hostPairs are a figure's confirmed pairs by class, sorted, and each
// host's own (by hostsOf's index): a host's references are the rest.
type hostPairs struct {
	all [results.NumPairClasses][]float64
	// mine are each host's pairs (another host's rank -1), their class
	// in c; mineY their figures by class, sorted.
	mine  [][]hostPairOf
	mineY [][results.NumPairClasses][]float64
}

type hostPairOf struct {
	hostPair
	c results.PairClass
}

func newHostPairs(pairs []pairFigure, at []int, hosts int) *hostPairs {
	hp := &hostPairs{mine: make([][]hostPairOf, hosts), mineY: make([][results.NumPairClasses][]float64, hosts)}
	for _, pf := range pairs {
		hp.all[pf.c] = append(hp.all[pf.c], pf.y)
		ga, gb := at[pf.p.A], at[pf.p.B]
		for i, g := range [2]int{ga, gb} {
			if g < 0 || i == 1 && gb == ga {
				continue // no host of several NICs, or one host's pair once
			}
			a, b := pf.p.A, pf.p.B
			if ga != g {
				a = -1
			}
			if gb != g {
				b = -1
			}
			hp.mine[g] = append(hp.mine[g], hostPairOf{hostPair{a, b, pf.y}, pf.c})
			hp.mineY[g][pf.c] = append(hp.mineY[g][pf.c], pf.y)
		}
	}
	for c := range hp.all {
		sort.Float64s(hp.all[c])
	}
	for g := range hp.mineY {
		for c := range hp.mineY[g] {
			sort.Float64s(hp.mineY[g][c])
		}
	}
	return hp
}

// hostView is one host's pairs against the other hosts': within each
// class, a host's same-host pairs against the other hosts' same-host
// pairs, its pairs across rails against theirs.
type hostView struct {
	// others are the other hosts' pairs about their class's median, for
	// the classes with at least 3 of them.
	others devSet
	// pairs are this host's pairs of those classes, about the same
	// medians; mine each of its ranks' figures among them.
	pairs []hostPair
	mine  map[int][]float64
}

// view is host g's pairs against the others'.
func (hp *hostPairs) view(g int) hostView {
	// The others' residuals about their class's median, and mine about
	// the same, where the class has at least 3 others.
	hv := hostView{mine: map[int][]float64{}}
	var refC [results.NumPairClasses]float64
	var judged [results.NumPairClasses]bool
	for c, all := range hp.all {
		mine := hp.mineY[g][c]
		if len(all)-len(mine) < 3 {
			continue
		}
		refC[c], judged[c] = medianWithout(all, mine), true
		hv.others.add(devRun{v: all, ref: refC[c]})
		hv.others.add(devRun{v: mine, ref: refC[c], out: true})
	}
	for _, p := range hp.mine[g] {
		if !judged[p.c] {
			continue
		}
		y := p.y - refC[p.c]
		hv.pairs = append(hv.pairs, hostPair{p.a, p.b, y})
		for _, r := range []int{p.a, p.b} {
			if r >= 0 {
				hv.mine[r] = append(hv.mine[r], y)
			}
		}
	}
	return hv
}

// slowRanks are the host's ranks slow in rf's figure, with their typical
// less the reference: none unless at least two of its NICs and most of
// them are.
func (hv hostView) slowRanks(m *results.Mesh, g *hostGroup, rf *refs, noise float64) map[int]float64 {
	if hv.others.n < 3 {
		return nil
	}
	const ref = 0.0
	// The noise of a pair is what the other hosts' pairs spread by
	// (all they share included), where there are enough of them:
	// the fit of the ranks' model does not hold for a slow host,
	// whose pairs among its own NICs are slow once, not twice.
	pn := noise
	if hv.others.n >= 6 {
		// A spread from few pairs is itself uncertain: widened as
		// a small sample's quantile is (about √(1+6/n)).
		dir := rf.sigma * math.Sqrt(0.5)
		pn = max(dir, hv.others.robustSD()) * math.Sqrt(1+6/float64(hv.others.n))
	}
	hostSlow := hv.slowAsWhole(m, g, rf, pn)
	slow := map[int]float64{}
	slowNICs := map[string]bool{}
	for _, r := range g.ranks {
		v := hv.mine[r]
		if len(v) < 2 {
			continue
		}
		t := stat.Median(v) - ref
		sd := pn * math.Sqrt(1.5708/float64(len(v))+1.5708/float64(hv.others.n))
		// Half a spread more than a rank's own cut: the reference is
		// the other hosts' pairs, fewer than a rank's partners'. Or
		// beyond the practical threshold on a host slow as a whole.
		if t > max(rf.fig.practical, (rf.kRank+0.5)*sd) || hostSlow && t > rf.fig.practical {
			slow[r] = t
			slowNICs[m.Ranks[r].NIC()] = true
		}
	}
	if len(slowNICs) >= 2 && 2*len(slowNICs) > len(g.nics) {
		return slow
	}
	return nil
}

// slowAsWhole says whether the host's pairs together (each once) are
// slow: on a mesh of two hosts only its same-host pairs have a reference
// of their class (every pair across hosts touches it), three a NIC of
// four, too few for one NIC's own cut. Slow as a whole when their median
// is beyond the noise and, leaving out any one of its NICs, the rest's
// median is still beyond the practical threshold (one slow NIC of four
// is in half its host's pairs).
func (hv hostView) slowAsWhole(m *results.Mesh, g *hostGroup, rf *refs, pn float64) bool {
	const ref = 0.0
	if len(hv.pairs) < 4 {
		return false
	}
	hostY := make([]float64, len(hv.pairs))
	for i, p := range hv.pairs {
		hostY[i] = p.y
	}
	// The spread of a pair from the others' pairs and the host's own
	// about their medians together: twice the pairs, a tighter estimate
	// (a host slow by one NIC has its pairs at two levels, a wider one).
	hpn := pn
	if hv.others.n >= 6 {
		hm := stat.Median(hostY)
		sorted := append([]float64(nil), hostY...)
		sort.Float64s(sorted)
		pooled := hv.others.with(devRun{v: sorted, ref: hm})
		hpn = max(rf.sigma*math.Sqrt(0.5), pooled.robustSD()) * math.Sqrt(1+6/float64(pooled.n))
	}
	sd := hpn * math.Sqrt(1.5708/float64(len(hostY))+1.5708/float64(hv.others.n))
	hostSlow := stat.Median(hostY)-ref > max(rf.fig.practical, (rf.kRank+0.5)*sd)
	// Each rank's NIC once: NIC() formats a string, and this loop asked it
	// for every pair of every NIC (a quarter of a 64-rank mesh's analysis).
	nicOf := make(map[int]string, len(g.ranks))
	for _, r := range g.ranks {
		nicOf[r] = m.Ranks[r].NIC()
	}
	onNIC := func(r int, nic string) bool {
		if r < 0 {
			return false
		}
		if n, ok := nicOf[r]; ok {
			return n == nic
		}
		return m.Ranks[r].NIC() == nic
	}
	for nic := range g.nics {
		var rest []float64
		for _, p := range hv.pairs {
			if !onNIC(p.a, nic) && !onNIC(p.b, nic) {
				rest = append(rest, p.y)
			}
		}
		hostSlow = hostSlow && (len(rest) == 0 || stat.Median(rest)-ref > rf.fig.practical)
	}
	return hostSlow
}

// hostGroup is one host's ranks that reported a device, and their NICs.
type hostGroup struct {
	host  string
	ranks []int
	nics  map[string]bool
}

// hostGroups groups the ranks that reported a device by host, hosts in the
// order of their first rank; live leaves out the ranks that left. A rank
// with no host name is a host of its own ("rank N").
func hostGroups(ranks []results.MeshRank, live bool) []*hostGroup {
	var out []*hostGroup
	byHost := map[string]*hostGroup{}
	for _, rk := range ranks {
		if rk.Device == "" || live && rk.Dead != "" {
			continue
		}
		h := hostName(rk)
		g := byHost[h]
		if g == nil {
			g = &hostGroup{host: h, nics: map[string]bool{}}
			byHost[h] = g
			out = append(out, g)
		}
		g.ranks = append(g.ranks, rk.Rank)
		g.nics[rk.NIC()] = true
	}
	return out
}

// hostName is a rank's host, or "rank N" where it has no name.
func hostName(rk results.MeshRank) string {
	if rk.Host != "" {
		return rk.Host
	}
	return "rank " + strconv.Itoa(rk.Rank)
}

// classify tells each culprit's kind and names the hosts blamed: a host
// more than one of whose NICs are culprits is the host (its CPU, memory,
// PCIe or software), a culprit on a host whose other NICs are fine is its
// NIC, and one that is its host's only NIC is the node (either). Ranks
// without a host name are each their own host.
func classify(m *results.Mesh) {
	m.Hosts = nil
	groups := hostGroups(m.Ranks, false)
	byHost := map[string]*hostGroup{}
	culpritNICs := map[string]map[string]bool{}
	for _, g := range groups {
		byHost[g.host], culpritNICs[g.host] = g, map[string]bool{}
	}
	for _, c := range m.Culprits {
		if h := hostName(m.Ranks[c.Rank]); culpritNICs[h] != nil {
			culpritNICs[h][m.Ranks[c.Rank].NIC()] = true
		}
	}
	for i := range m.Culprits {
		c := &m.Culprits[i]
		h := hostName(m.Ranks[c.Rank])
		switch {
		case len(culpritNICs[h]) > 1:
			c.Kind = results.CulpritHost
		case byHost[h] != nil && len(byHost[h].nics) > 1:
			c.Kind = results.CulpritNIC
		default:
			c.Kind = results.CulpritNode
		}
	}
	for _, g := range groups {
		if len(culpritNICs[g.host]) < 2 {
			continue
		}
		sh := results.SuspectHost{Host: g.host, NICs: len(culpritNICs[g.host]), Total: len(g.nics)}
		roots, numas := map[string]bool{}, map[int]bool{}
		for _, c := range m.Culprits {
			rk := m.Ranks[c.Rank]
			if hostName(rk) != g.host {
				continue
			}
			sh.Ranks = append(sh.Ranks, c.Rank)
			roots[rk.PCIRoot] = true
			if rk.NUMANode != nil {
				numas[*rk.NUMANode] = true
			} else {
				numas[-1] = true
			}
		}
		if len(roots) == 1 {
			sh.PCIRoot = m.Ranks[sh.Ranks[0]].PCIRoot
		}
		if len(numas) == 1 && !numas[-1] {
			sh.NUMANode = m.Ranks[sh.Ranks[0]].NUMANode
		}
		m.Hosts = append(m.Hosts, sh)
	}
}
