package pinglist

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
)

// Scope says why a peer is on a pinglist: under the same ToR (probed every
// period, by every host of the ToR: the ToR-mesh), or drawn from another
// ToR for this period.
type Scope uint8

const (
	ScopeToR Scope = iota + 1
	ScopeRemote
)

// String is the scope as the metrics' scope label writes it.
func (s Scope) String() string {
	switch s {
	case ScopeToR:
		return "tor"
	case ScopeRemote:
		return "remote"
	}
	return fmt.Sprintf("Scope(%d)", uint8(s))
}

// Entry is one peer of a pinglist.
type Entry struct {
	Host  string
	ToR   string
	Scope Scope
}

// Draw is what makes a period's random peers: the fabric's seed (every
// agent the same) and the period's number. The same draw gives the same
// list; the next period another.
type Draw struct {
	Seed   uint64
	Period uint64
}

// List is a node's pinglist for one period.
type List struct {
	Self    string
	ToR     string
	Entries []Entry // the ToR's other hosts (sorted), then the remote draw
}

// Build is self's pinglist: every other host under its ToR, then k hosts
// under other ToRs drawn without replacement (fewer when fewer exist),
// never self. The draw depends on d and self only, so an agent restarted
// within a period probes the same peers.
func Build(t *Topology, self string, k int, d Draw) (List, error) {
	ti, ok := t.torOf[self]
	if !ok {
		return List{}, fmt.Errorf("host %s is not in the topology", self)
	}
	if k < 0 {
		return List{}, fmt.Errorf("k %d below 0", k)
	}
	l := List{Self: self, ToR: t.ToRs[ti]}
	for _, h := range t.under(ti) {
		if h != self {
			l.Entries = append(l.Entries, Entry{Host: h, ToR: l.ToR, Scope: ScopeToR})
		}
	}
	lo, hi := t.start[ti], t.start[ti+1]
	others := len(t.Hosts) - (hi - lo)
	for _, i := range sample(rngFor(self, d), others, min(k, others)) {
		if i >= lo { // skip self's ToR: index i of "the others" is Hosts[i] below it, Hosts[i+size] above
			i += hi - lo
		}
		h := t.Hosts[i]
		l.Entries = append(l.Entries, Entry{Host: h, ToR: t.ToRs[t.torOf[h]], Scope: ScopeRemote})
	}
	return l, nil
}

// rngFor is self's generator for a draw: the seed mixed with self's name,
// so that two nodes do not draw the same indices, and the period as the
// stream.
func rngFor(self string, d Draw) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(self))
	return rand.New(rand.NewPCG(d.Seed^h.Sum64(), d.Period))
}

// sample is k distinct indices of 0..n-1 in the order drawn (Floyd's
// algorithm: k draws and a set of k, whatever n is).
func sample(r *rand.Rand, n, k int) []int {
	chosen := make(map[int]bool, k)
	out := make([]int, 0, k)
	for j := n - k; j < n; j++ {
		v := r.IntN(j + 1)
		if chosen[v] {
			v = j
		}
		chosen[v] = true
		out = append(out, v)
	}
	return out
}
