package results

import (
	"fmt"
	"sort"
	"strconv"
)

// PairClass is what lies between the two ranks of a pair. Pairs of one
// class share a path and so a speed; pairs of different classes need not
// (ranks on one device loop back inside it, a host's NICs through its
// PCIe, hosts through the fabric, and across rails through the spine), so
// the analysis judges a pair only against pairs of its own class.
type PairClass uint8

const (
	// ClassUnknown: not classified (documents before schema 4).
	ClassUnknown PairClass = iota
	// ClassSameNIC: both ranks on one device and port of one host (several
	// processes on one NIC): no link between them, never a link verdict.
	ClassSameNIC
	// ClassSameHost: two NICs of one host, looped back through the host.
	ClassSameHost
	// ClassSameRail: NIC i of one host with NIC i of another, both hosts
	// having several NICs (rails: the NICs' indexes in the order of their
	// device names, mlx5_0..mlx5_7).
	ClassSameRail
	// ClassCrossRail: NIC i of one host with NIC j≠i of another, both
	// hosts having several NICs: the traffic may cross the spine.
	ClassCrossRail
	// ClassCrossHost: two hosts, one of which has a single NIC.
	ClassCrossHost
	// NumPairClasses bounds the classes, for arrays indexed by them.
	NumPairClasses
)

var pairClassNames = [NumPairClasses]string{"", "same-nic", "same-host", "same-rail", "cross-rail", "cross-host"}

// String is the class's stable name, as the document writes it.
func (c PairClass) String() string {
	if c < NumPairClasses {
		return pairClassNames[c]
	}
	return "PairClass(" + strconv.Itoa(int(c)) + ")"
}

// Describe is the class in words, for reports.
func (c PairClass) Describe() string {
	switch c {
	case ClassSameNIC:
		return "same NIC"
	case ClassSameHost:
		return "same host"
	case ClassSameRail:
		return "same rail"
	case ClassCrossRail:
		return "across rails"
	case ClassCrossHost:
		return "across hosts"
	}
	return "unclassified"
}

// MarshalText writes the class's stable name.
func (c PairClass) MarshalText() ([]byte, error) {
	if c >= NumPairClasses {
		return nil, fmt.Errorf("pair class %d unknown", c)
	}
	return []byte(pairClassNames[c]), nil
}

// UnmarshalText reads a stable name back.
func (c *PairClass) UnmarshalText(b []byte) error {
	for i, n := range pairClassNames {
		if n == string(b) {
			*c = PairClass(i)
			return nil
		}
	}
	return fmt.Errorf("pair class %q unknown", b)
}

// PairClasses tells the class of any two ranks of a mesh.
type PairClasses struct {
	host, nic, rail []int // per rank; rail -1: its host has one NIC
}

// NewPairClasses indexes the ranks' hosts, NICs and rails. A rank with no
// host name is a host of its own; a host's rails are its NICs (device and
// port) in the order of their names, where it has more than one.
func NewPairClasses(ranks []MeshRank) *PairClasses {
	pc := &PairClasses{host: make([]int, len(ranks)), nic: make([]int, len(ranks)), rail: make([]int, len(ranks))}
	hosts := map[string]int{}
	nicsOf := map[string]map[string]bool{}
	hostOf := func(r MeshRank, i int) string {
		if r.Host != "" {
			return r.Host
		}
		return "rank " + strconv.Itoa(i)
	}
	for i, r := range ranks {
		h := hostOf(r, i)
		if _, ok := hosts[h]; !ok {
			hosts[h] = len(hosts)
			nicsOf[h] = map[string]bool{}
		}
		nicsOf[h][r.NIC()] = true
	}
	railOf := map[string]int{}
	nicIDs := map[string]int{}
	for h, set := range nicsOf {
		var names []string
		for n := range set {
			names = append(names, n)
		}
		sort.Slice(names, func(i, j int) bool { return nicLess(names[i], names[j]) })
		for i, n := range names {
			key := h + "\x00" + n
			railOf[key] = i
			if len(names) < 2 {
				railOf[key] = -1
			}
		}
	}
	for i, r := range ranks {
		h := hostOf(r, i)
		key := h + "\x00" + r.NIC()
		if _, ok := nicIDs[key]; !ok {
			nicIDs[key] = len(nicIDs)
		}
		pc.host[i], pc.nic[i], pc.rail[i] = hosts[h], nicIDs[key], railOf[key]
	}
	return pc
}

// nicLess orders NIC names as their devices are numbered: mlx5_2 before
// mlx5_10 (a run of digits compares as a number).
func nicLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, _ := strconv.ParseUint(a[:da], 10, 64)
			nb, _ := strconv.ParseUint(b[:db], 10, 64)
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	i := 0
	for i < len(s) && i < 18 && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

// NIC is rank r's NIC as an index (ranks with the same share it).
func (pc *PairClasses) NIC(r int) int { return pc.nic[r] }

// Of is the class of ranks a and b.
func (pc *PairClasses) Of(a, b int) PairClass {
	switch {
	case pc.nic[a] == pc.nic[b]:
		return ClassSameNIC
	case pc.host[a] == pc.host[b]:
		return ClassSameHost
	case pc.rail[a] < 0 || pc.rail[b] < 0:
		return ClassCrossHost
	case pc.rail[a] == pc.rail[b]:
		return ClassSameRail
	}
	return ClassCrossRail
}

// Classify sets every pair's class from the ranks.
func (m *Mesh) Classify() *PairClasses {
	pc := NewPairClasses(m.Ranks)
	for i := range m.Pairs {
		m.Pairs[i].Class = pc.Of(m.Pairs[i].From, m.Pairs[i].To)
	}
	return pc
}
