// Package stat holds the small order statistics several packages take of
// their samples, so that each is written once.
package stat

import "slices"

// Median of v (left unchanged); 0 for none. An even count gives the mean of
// the two middle values.
func Median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return MedianSorted(s)
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
