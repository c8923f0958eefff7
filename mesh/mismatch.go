package mesh

import (
	"strconv"

	"github.com/rdmabench/rdmabench/results"
)

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
	{"link layer", func(r results.MeshRank) string { return string(r.LinkLayer) }},
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
