package mesh

import (
	"math"
	"sort"
)

// The order statistics of slowOnHosts without copying a mesh's pairs for
// each host: every host's reference is all the other hosts' pairs, the
// mesh's pairs less its own, and a 1000-rank mesh has 125 hosts and half
// a million pairs. Each value is found exactly as a median of the copied
// values would give it (the same float64), by bisection over sorted runs.

// devRun is a sorted run of values read as their distances from ref
// (|v-ref| as float64 computes it), counted in a multiset or, out, taken
// out of it (a run taken out is part of one counted in).
type devRun struct {
	v   []float64 // ascending
	ref float64
	out bool
}

// within counts the run's values whose distance from ref is at most t: v-ref
// grows with v, so they are a stretch of the run.
func (r devRun) within(t float64) int {
	lo := sort.Search(len(r.v), func(i int) bool { return r.v[i]-r.ref >= -t })
	hi := sort.Search(len(r.v), func(i int) bool { return r.v[i]-r.ref > t })
	return hi - lo
}

// devSet is a multiset of distances held as runs.
type devSet struct {
	runs []devRun
	n    int
}

// with is s and run r, s unchanged.
func (s devSet) with(r devRun) devSet {
	out := devSet{runs: append(append([]devRun(nil), s.runs...), r), n: s.n}
	out.n += r.size()
	return out
}

func (r devRun) size() int {
	if r.out {
		return -len(r.v)
	}
	return len(r.v)
}

func (s *devSet) add(r devRun) {
	s.runs = append(s.runs, r)
	s.n += r.size()
}

func (s devSet) within(t float64) int {
	k := 0
	for _, r := range s.runs {
		if r.out {
			k -= r.within(t)
		} else {
			k += r.within(t)
		}
	}
	return k
}

// kth is the k-th smallest distance (from 0): the least t with more than
// k distances at most t. Distances are never negative, and non-negative
// float64s order as their bits: a bisection of the bits finds it exactly.
func (s devSet) kth(k int) float64 {
	lo, hi := uint64(0), math.Float64bits(math.Inf(1))
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s.within(math.Float64frombits(mid)) > k {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return math.Float64frombits(lo)
}

// median is stat.Median of the distances.
func (s devSet) median() float64 {
	if s.n <= 0 {
		return 0
	}
	k := s.n / 2
	hi := s.kth(k)
	if s.n%2 == 1 {
		return hi
	}
	return (s.kth(k-1) + hi) / 2
}

// robustSD is robustSD of the values about their refs.
func (s devSet) robustSD() float64 { return 1.4826 * s.median() }

// medianWithout is stat.Median of all less out (both ascending, out a
// part of all).
func medianWithout(all, out []float64) float64 {
	n := len(all) - len(out)
	if n <= 0 {
		return 0
	}
	upper := func(a []float64, v float64) int { return sort.Search(len(a), func(i int) bool { return a[i] > v }) }
	kth := func(k int) float64 {
		j := sort.Search(len(all), func(j int) bool { return upper(all, all[j])-upper(out, all[j]) > k })
		return all[j]
	}
	hi := kth(n / 2)
	if n%2 == 1 {
		return hi
	}
	return (kth(n/2-1) + hi) / 2
}
