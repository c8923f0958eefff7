package engine

import "sort"

// QPSpread summarises how evenly QPs shared the bandwidth.
type QPSpread struct {
	MinGbps    float64 `json:"min_gbps"`
	MedianGbps float64 `json:"median_gbps"`
	MaxGbps    float64 `json:"max_gbps"`
	// Jain is Jain's fairness index, (Σx)² / (n·Σx²): 1 when all QPs got the
	// same, 1/n when one got everything.
	Jain float64 `json:"jain"`
}

// Spread computes min, median, max and Jain's index of per-QP figures.
func Spread(gbps []float64) QPSpread {
	if len(gbps) == 0 {
		return QPSpread{}
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
	return QPSpread{MinGbps: s[0], MedianGbps: med, MaxGbps: s[len(s)-1], Jain: jain}
}
