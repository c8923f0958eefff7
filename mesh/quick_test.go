package mesh

import (
	"strings"
	"testing"
	"time"
)

// flatFabric measures every direction at 100 Gb/s, but for the slow
// ranks (both directions of their pairs), the pairs stalled once (one
// direction at 0.3x, the first time only) and the dead ranks (nothing).
type flatFabric struct {
	slow    map[int]float64
	stalled map[Pair]bool
	dead    map[int]bool
	rounds  [][]Pair
}

func (f *flatFabric) MeasureRound(_ int, pairs []Pair) []QuickResult {
	f.rounds = append(f.rounds, pairs)
	var out []QuickResult
	for _, p := range pairs {
		if f.dead[p.A] || f.dead[p.B] {
			out = append(out, QuickResult{Pair: p, Failed: true})
			continue
		}
		bw := 100.0
		for _, r := range []int{p.A, p.B} {
			if k, ok := f.slow[r]; ok {
				bw = min(bw, 100*k)
			}
		}
		// A little deterministic spread, so that the rounds have one.
		res := QuickResult{Pair: p, AB: bw * (1 + 0.01*float64((p.A+p.B)%5-2)), BA: bw * (1 + 0.01*float64((p.A*p.B)%5-2))}
		if f.stalled[p] {
			res.AB *= 0.3
			delete(f.stalled, p)
		}
		out = append(out, res)
	}
	return out
}

// The random rounds are perfect matchings on the rails: every rank in
// one pair, with a rank of its NIC index on another host.
func TestQuickMatchings(t *testing.T) {
	layout := quickLayout(16, 8)
	q, err := NewQuick(layout, QuickOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		pairs, ok := q.Next()
		if !ok {
			t.Fatalf("round %d: done", r)
		}
		seen := map[int]bool{}
		for _, p := range pairs {
			if seen[p.A] || seen[p.B] {
				t.Fatalf("round %d: a rank twice: %v", r, pairs)
			}
			seen[p.A], seen[p.B] = true, true
			if layout[p.A].NIC != layout[p.B].NIC || layout[p.A].Host == layout[p.B].Host {
				t.Errorf("round %d: pair %v off its rail or on one host", r, p)
			}
		}
		if len(seen) != len(layout) {
			t.Errorf("round %d: %d of %d ranks paired", r, len(seen), len(layout))
		}
		q.Record(nil) // all failed: every rank a suspect
	}
	// OffRail: ranks meet other NIC indexes.
	q, _ = NewQuick(layout, QuickOptions{Seed: 1, OffRail: true})
	pairs, _ := q.Next()
	off := 0
	for _, p := range pairs {
		if layout[p.A].NIC != layout[p.B].NIC {
			off++
		}
	}
	if off == 0 {
		t.Errorf("OffRail: every pair on its rail")
	}
}

// Stalls are told from slowness: pairs stalled once are cleared, a NIC at
// 0.7x is named, a dead rank is named, nothing else is.
func TestQuickVerdicts(t *testing.T) {
	layout := quickLayout(32, 8)
	for _, c := range []struct {
		name string
		f    *flatFabric
		want string
	}{
		{"healthy", &flatFabric{}, ""},
		{"stalls", &flatFabric{stalled: map[Pair]bool{}}, ""},
		{"NIC at 0.7x", &flatFabric{slow: map[int]float64{42: 0.7}}, "NIC of rank 42"},
		{"dead rank", &flatFabric{dead: map[int]bool{7: true}}, "NIC of rank 7"},
		{"host at 0.7x", &flatFabric{slow: map[int]float64{8: 0.7, 9: 0.7, 10: 0.7, 11: 0.7, 12: 0.7}}, "host host1: 5 of its ranks"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, _ := NewQuick(layout, QuickOptions{Seed: 3})
			if c.f.stalled != nil {
				// Stall the first round's first 20 pairs.
				first, _ := NewQuick(layout, QuickOptions{Seed: 3})
				pairs, _ := first.Next()
				for _, p := range pairs[:20] {
					c.f.stalled[p] = true
				}
			}
			v := RunQuick(q, c.f)
			var got []string
			for _, s := range v.Suspects {
				got = append(got, s.String())
			}
			if c.want == "" && len(got) > 0 || c.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], c.want)) {
				t.Errorf("suspects %q, want %q", got, c.want)
			}
			if len(v.UnresolvedRanks)+len(v.UnresolvedPairs) > 0 {
				t.Errorf("left open: %v %v", v.UnresolvedRanks, v.UnresolvedPairs)
			}
			if c.name == "stalls" && v.Rounds <= 4 {
				t.Errorf("stalls: %d rounds, no adaptive round", v.Rounds)
			}
			if len(v.CannotSee) == 0 || v.PairCoverage <= 0 || v.PairCoverage >= 1 {
				t.Errorf("cannot see: %q, pair coverage %.3f", v.CannotSee, v.PairCoverage)
			}
			t.Logf("%d rounds, %s: %q", v.Rounds, v.Wall, got)
		})
	}
}

// A budget of time stops the search, its suspects left open.
func TestQuickBudget(t *testing.T) {
	layout := quickLayout(32, 8)
	opt := QuickOptions{Seed: 3, Budget: 6 * DefaultQuickCost.Round(len(layout))}
	q, _ := NewQuick(layout, opt)
	v := RunQuick(q, &flatFabric{slow: map[int]float64{42: 0.7}})
	if v.Rounds != 6 || v.Blames() || len(v.UnresolvedRanks) == 0 {
		t.Errorf("%d rounds, suspects %v, open %v: want 6 rounds, nobody named, rank 42 open", v.Rounds, v.Suspects, v.UnresolvedRanks)
	}
}

func TestQuickPlan(t *testing.T) {
	s := QuickPlan(1000, nil, QuickOptions{})
	t.Log("\n" + s)
	for _, want := range []string{"--plan 1000 --quick: 4 random rounds of up to 500 pairs", "= 320ms", "a slow NIC, node, host or rail 10, 3.2s", "at most 36 rounds, 11.52s", "met with probability 0.4%"} {
		if !strings.Contains(s, want) {
			t.Errorf("plan lacks %q", want)
		}
	}
	if DefaultQuickCost.Round(1000) != 320*time.Millisecond {
		t.Errorf("a round of 1000 ranks: %s", DefaultQuickCost.Round(1000))
	}
	s = QuickPlan(1000, quickLayout(125, 8), QuickOptions{})
	if !strings.Contains(s, "on-rail") || !strings.Contains(s, "met with probability 3.2%") {
		t.Errorf("with a layout of 125 x 8:\n%s", s)
	}
}
