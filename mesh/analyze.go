package mesh

import (
	"sort"
	"strconv"

	"github.com/rdmabench/rdmabench/results"
)

// Rules say when a measurement is an outlier: bandwidth below BWFraction
// of the median, or latency above LatMultiple of the median.
type Rules struct {
	BWFraction  float64
	LatMultiple float64
}

// Default rules: 10% below the median bandwidth is a slow pair on a
// healthy fabric (pairs of one fabric agree within a few percent), and
// twice the median latency is beyond the noise of a ping-pong's median.
var DefaultRules = Rules{BWFraction: 0.9, LatMultiple: 2}

// slow judges one measurement against the medians.
func (r Rules) slow(bw, lat, medBW, medLat float64) (slowBW, slowLat bool) {
	return medBW > 0 && bw < r.BWFraction*medBW, medLat > 0 && lat > r.LatMultiple*medLat
}

// median of the values; 0 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// MarkOutliers sets SlowBW and SlowLat on the measured directions against
// the medians of all measured directions, and returns those medians.
func (r Rules) MarkOutliers(pairs []results.MeshPair) (medBW, medLat float64) {
	var bws, lats []float64
	for _, p := range pairs {
		if p.Measured() {
			bws, lats = append(bws, p.BWGbps), append(lats, p.LatP50us)
		}
	}
	medBW, medLat = median(bws), median(lats)
	for i := range pairs {
		p := &pairs[i]
		if p.Measured() {
			p.SlowBW, p.SlowLat = r.slow(p.BWGbps, p.LatP50us, medBW, medLat)
		}
	}
	return medBW, medLat
}

// Suspects traces the bad pairs (a direction that stayed an outlier) to
// their likely cause. A rank in at least two bad pairs that is in most of
// them, or most of whose own pairs are bad, is the likely culprit (a slow
// node makes every pair it is in slow); a bad pair that no culprit
// explains points at the link between its two ranks.
func Suspects(pairs []results.MeshPair) ([]results.Culprit, []results.SuspectLink) {
	bad := map[Pair]bool{}
	measured := map[Pair]bool{}
	for _, p := range pairs {
		k := pairOf(p.From, p.To)
		if p.Measured() {
			measured[k] = true
		}
		if p.Bad() {
			bad[k] = true
		}
	}
	inBad, inMeasured := map[int]int{}, map[int]int{}
	for k := range measured {
		inMeasured[k.A]++
		inMeasured[k.B]++
	}
	for k := range bad {
		inBad[k.A]++
		inBad[k.B]++
	}
	var culprits []results.Culprit
	isCulprit := map[int]bool{}
	for r, k := range inBad {
		if k >= 2 && (2*k > len(bad) || 2*k > inMeasured[r]) {
			culprits = append(culprits, results.Culprit{Rank: r, BadPairs: k, Pairs: inMeasured[r]})
			isCulprit[r] = true
		}
	}
	sort.Slice(culprits, func(i, j int) bool { return culprits[i].Rank < culprits[j].Rank })
	var links []results.SuspectLink
	for k := range bad {
		if !isCulprit[k.A] && !isCulprit[k.B] {
			links = append(links, results.SuspectLink{A: k.A, B: k.B})
		}
	}
	sort.Slice(links, func(i, j int) bool {
		if links[i].A != links[j].A {
			return links[i].A < links[j].A
		}
		return links[i].B < links[j].B
	})
	return culprits, links
}

// fact is one inventory fact the ranks should share.
type fact struct {
	name  string
	value func(results.MeshRank) string
}

var facts = []fact{
	{"firmware", func(r results.MeshRank) string { return r.FWVer }},
	{"rate", func(r results.MeshRank) string { return strconv.FormatFloat(r.RateGbps, 'f', -1, 64) + " Gb/s" }},
	{"active MTU", func(r results.MeshRank) string { return strconv.Itoa(r.ActiveMTU) }},
	{"GID index", func(r results.MeshRank) string {
		if r.GIDIndex < 0 {
			return "LID"
		}
		return strconv.Itoa(r.GIDIndex)
	}},
	{"link layer", func(r results.MeshRank) string { return r.LinkLayer }},
}

// Mismatches lists the facts on which ranks differ: the value most ranks
// have (ties: the one the lowest rank has) and the ranks that differ.
// Ranks that never reported their port are left out.
func Mismatches(ranks []results.MeshRank) []results.Mismatch {
	var out []results.Mismatch
	for _, f := range facts {
		count := map[string]int{}
		var order []string
		for _, r := range ranks {
			if r.Device == "" {
				continue
			}
			v := f.value(r)
			if count[v] == 0 {
				order = append(order, v)
			}
			count[v]++
		}
		if len(order) < 2 {
			continue
		}
		major := order[0]
		for _, v := range order[1:] {
			if count[v] > count[major] {
				major = v
			}
		}
		m := results.Mismatch{Fact: f.name, Majority: major}
		for _, r := range ranks {
			if v := f.value(r); r.Device != "" && v != major {
				m.Odd = append(m.Odd, results.RankValue{Rank: r.Rank, Value: v})
			}
		}
		out = append(out, m)
	}
	return out
}
