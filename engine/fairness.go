package engine

import (
	"sort"

	"github.com/rdmabench/rdmabench/results"
)

// Spread computes min, median, max and Jain's index of per-QP figures.
func Spread(gbps []float64) results.QPSpread {
	if len(gbps) == 0 {
		return results.QPSpread{}
	}
	s := append([]float64(nil), gbps...)
	sort.Float64s(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var sum, sq float64
	for _, x := range s {
		sum += x
		sq += x * x
	}
	jain := 1.0
	if sq > 0 {
		jain = sum * sum / (float64(len(s)) * sq)
	}
	return results.QPSpread{MinGbps: s[0], MedianGbps: med, MaxGbps: s[len(s)-1], Jain: jain}
}
