package stat

import (
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
