package mesh

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rdmabench/rdmabench/internal/stat"
)

// The runs' order statistics are the copied values' medians, to the bit:
// random multisets with ties, a part taken out, about references inside
// and outside them.
func TestOrderStatsMatchMedian(t *testing.T) {
	cases := []struct {
		name      string
		n, out    int
		levels    int // distinct values; 0: continuous
		refOffset float64
	}{
		{"continuous", 501, 37, 0, 0},
		{"even count", 500, 40, 0, 0.3},
		{"ties", 300, 100, 7, 0},
		{"all taken out but two", 12, 10, 0, 0},
		{"one left", 9, 8, 3, -5},
		{"large", 20000, 900, 0, 0.01},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.n), uint64(tc.out)))
			for trial := range 20 {
				all := make([]float64, tc.n)
				for i := range all {
					all[i] = rng.NormFloat64() * 0.05
					if tc.levels > 0 {
						all[i] = float64(rng.IntN(tc.levels)) / 10
					}
				}
				perm := rng.Perm(tc.n)
				var out, kept []float64
				for i, j := range perm {
					if i < tc.out {
						out = append(out, all[j])
					} else {
						kept = append(kept, all[j])
					}
				}
				slices.Sort(all)
				slices.Sort(out)
				ref := stat.Median(kept)
				if got := medianWithout(all, out); got != ref {
					t.Fatalf("trial %d: medianWithout %v, want %v", trial, got, ref)
				}
				c := ref + tc.refOffset
				var s devSet
				s.add(devRun{v: all, ref: c})
				s.add(devRun{v: out, ref: c, out: true})
				x := make([]float64, len(kept))
				for i, v := range kept {
					x[i] = v - c
				}
				if got, want := s.robustSD(), robustSD(x, 0); got != want {
					t.Fatalf("trial %d: robustSD %v, want %v", trial, got, want)
				}
				extra := []float64{0.1, -0.2, 0.05, 0.3}
				hm := stat.Median(extra)
				pooled := append([]float64(nil), x...)
				for _, v := range extra {
					pooled = append(pooled, v-hm)
				}
				slices.Sort(extra)
				if got, want := s.with(devRun{v: extra, ref: hm}).robustSD(), robustSD(pooled, 0); got != want {
					t.Fatalf("trial %d: pooled robustSD %v, want %v", trial, got, want)
				}
				if s.n != len(kept) {
					t.Fatalf("trial %d: %d values, want %d", trial, s.n, len(kept))
				}
			}
		})
	}
}
