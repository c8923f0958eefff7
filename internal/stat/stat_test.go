package stat

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{5, 1, 4, 2}, 3},
		{[]float64{3, 9, 1}, 3},
		{[]float64{-1, -3}, -2},
	} {
		in := slices.Clone(tc.in)
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
		if !slices.Equal(in, tc.in) {
			t.Errorf("Median reordered its argument: %v, was %v", tc.in, in)
		}
		s := slices.Clone(tc.in)
		slices.Sort(s)
		if got := MedianSorted(s); got != tc.want {
			t.Errorf("MedianSorted(%v) = %v, want %v", s, got, tc.want)
		}
	}
}

// TestMedianSelects: the selection gives what sorting gives, on samples
// above and below selectFrom, with ties, NaNs and both parities.
func TestMedianSelects(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 2000 {
		n := 1 + rng.IntN(300)
		v := make([]float64, n)
		for i := range v {
			switch trial % 4 {
			case 0:
				v[i] = rng.NormFloat64()
			case 1:
				v[i] = float64(rng.IntN(5)) // many ties
			case 2:
				v[i] = float64(i) // sorted
			default:
				v[i] = float64(n - i) // reversed
			}
		}
		if trial%97 == 0 {
			v[rng.IntN(n)] = math.NaN()
		}
		orig := slices.Clone(v)
		s := slices.Clone(v)
		slices.Sort(s)
		want, got := MedianSorted(s), Median(v)
		if !(got == want || math.IsNaN(got) && math.IsNaN(want)) {
			t.Fatalf("trial %d, n %d: Median %v, sorting gives %v", trial, n, got, want)
		}
		if !slices.EqualFunc(v, orig, func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }) {
			t.Fatalf("trial %d: Median changed its input", trial)
		}
	}
}
