// Package stat holds the small order statistics several packages take of
// their samples, so that each is written once.
package stat

import (
	"math"
	"slices"
)

// selectFrom is the sample size from which Median selects instead of
// sorting: below it a sort is as fast and simpler.
const selectFrom = 32

// Median of v (left unchanged); 0 for none. An even count gives the mean of
// the two middle values. It selects the middle in linear time rather than
// sorting: the mesh's analysis takes medians of every rank's and class's
// pairs many times a round, and sorting was a fifth of a 64-rank mesh's
// simulated time. NaNs order as slices.Sort orders them (first).
func Median(v []float64) float64 {
	n := len(v)
	if n == 0 {
		return 0
	}
	s := slices.Clone(v)
	if n < selectFrom || slices.ContainsFunc(s, math.IsNaN) {
		slices.Sort(s)
		return MedianSorted(s)
	}
	k := n / 2
	hi := selectKth(s, k)
	if n%2 == 1 {
		return hi
	}
	return (slices.Max(s[:k]) + hi) / 2
}

// MedianSorted is Median of s already sorted ascending; 0 for none.
func MedianSorted(s []float64) float64 {
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// selectKth reorders s (no NaNs) so that s[k] is its k-th smallest value,
// with nothing after k smaller and nothing before it larger (Hoare's
// selection, median-of-three pivots), and returns s[k].
func selectKth(s []float64, k int) float64 {
	lo, hi := 0, len(s)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if s[mid] < s[lo] {
			s[mid], s[lo] = s[lo], s[mid]
		}
		if s[hi] < s[lo] {
			s[hi], s[lo] = s[lo], s[hi]
		}
		if s[hi] < s[mid] {
			s[hi], s[mid] = s[mid], s[hi]
		}
		p := s[mid]
		i, j := lo, hi
		for i <= j {
			for s[i] < p {
				i++
			}
			for s[j] > p {
				j--
			}
			if i <= j {
				s[i], s[j] = s[j], s[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return s[k]
		}
	}
	return s[k]
}
