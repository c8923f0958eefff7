package straggler

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// sim is a synthetic run: every rank enters iteration i when it finished
// i-1 plus a host gap and jitter; the collective ends D after the last rank
// entered; each rank sees the end with its own jitter and a steady offset
// by rank (the order a root releases them in). Each rank's clock is off by
// a constant within the error bound it reports.
type sim struct {
	n, iters     int
	jitterUs     float64 // entry jitter (normal)
	tailP        float64 // chance of a scheduling hiccup per rank and iteration
	tailUs       float64 // its mean (exponential)
	clockErrUs   float64
	lateRank     int // -1: none
	lateUs       float64
	slowRank     int // -1: none
	slowUs       float64
	preemptRank  int // -1: none
	preemptIter  int
	preemptUs    float64
	durationUs   float64
	finishJitter float64
}

func healthy(n, iters int) sim {
	return sim{n: n, iters: iters, jitterUs: 2, tailP: 0.02, tailUs: 15, clockErrUs: 5, lateRank: -1, slowRank: -1, preemptRank: -1,
		durationUs: 100, finishJitter: 1}
}

func (s sim) run(rng *rand.Rand) ([]Segment, []Rank) {
	seg := Segment{Label: "sim", Enter: make([][]float64, s.n), Finish: make([][]float64, s.n), ErrUs: make([]float64, s.n)}
	off := make([]float64, s.n)
	ranks := make([]Rank, s.n)
	for r := range s.n {
		seg.Enter[r] = make([]float64, s.iters)
		seg.Finish[r] = make([]float64, s.iters)
		seg.ErrUs[r] = s.clockErrUs
		off[r] = (rng.Float64()*2 - 1) * s.clockErrUs
		ranks[r] = Rank{Rank: r, Host: "node", Device: r, Pid: 100 + r}
	}
	prev := make([]float64, s.n)
	enter := make([]float64, s.n)
	for i := range s.iters {
		last := 0.0
		for r := range s.n {
			e := prev[r] + 2 + math.Abs(rng.NormFloat64()*s.jitterUs)
			if rng.Float64() < s.tailP {
				e += rng.ExpFloat64() * s.tailUs
			}
			if r == s.lateRank {
				e += s.lateUs
			}
			if r == s.preemptRank && i == s.preemptIter {
				e += s.preemptUs
			}
			enter[r] = e
			last = max(last, e)
		}
		end := last + s.durationUs + math.Abs(rng.NormFloat64()*2)
		for r := range s.n {
			f := end + 0.5*float64(r) + math.Abs(rng.NormFloat64()*s.finishJitter)
			if r == s.slowRank {
				f += s.slowUs
			}
			seg.Enter[r][i] = enter[r] + off[r]
			seg.Finish[r][i] = f + off[r]
			prev[r] = f
		}
	}
	return []Segment{seg}, ranks
}

// namedShare runs the simulation many times and says in what share of the
// runs want(report) held.
func namedShare(s sim, runs int, want func(Report) bool) float64 {
	rng := rand.New(rand.NewPCG(25, 7))
	hits := 0
	for range runs {
		segs, ranks := s.run(rng)
		if want(Analyze(segs, ranks, Default)) {
			hits++
		}
	}
	return float64(hits) / float64(runs)
}

func TestHealthyRunsNameNobody(t *testing.T) {
	for _, n := range []int{2, 4, 8, 16} {
		share := namedShare(healthy(n, 50), 200, func(r Report) bool { return len(r.Stragglers) > 0 })
		if share > 0.01 {
			t.Errorf("%d ranks: a straggler named in %.1f%% of 200 healthy runs, want <= 1%%", n, 100*share)
		}
	}
}

func TestLateRankNamed(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*sim)
		rank int
		kind Kind
		// consistent: named for how often, not for how much.
		consistent bool
	}{
		{"late to enter by 50us", func(s *sim) { s.lateRank, s.lateUs = 3, 50 }, 3, LateEnter, true},
		{"slow to finish by 50us", func(s *sim) { s.slowRank, s.slowUs = 1, 50 }, 1, SlowFinish, true},
		{"preempted once for 20ms", func(s *sim) { s.preemptRank, s.preemptIter, s.preemptUs = 6, 20, 20000 }, 6, LateEnter, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(8, 50)
			tc.mod(&s)
			share := namedShare(s, 200, func(r Report) bool {
				for _, f := range r.Stragglers {
					if f.Rank.Rank != tc.rank && f.Kind == tc.kind {
						return false // someone else blamed
					}
				}
				for _, f := range r.Stragglers {
					if f.Rank.Rank == tc.rank && f.Kind == tc.kind && f.Consistent == tc.consistent {
						return true
					}
				}
				return false
			})
			if share < 0.95 {
				t.Errorf("rank %d named (%s) alone in %.1f%% of 200 runs, want >= 95%%", tc.rank, tc.kind, 100*share)
			}
		})
	}
}

// With two ranks the median of the others is the other rank: the late one
// is named, the early one is not.
func TestTwoRanks(t *testing.T) {
	s := healthy(2, 30)
	s.lateRank, s.lateUs = 0, 80
	segs, ranks := s.run(rand.New(rand.NewPCG(1, 2)))
	rep := Analyze(segs, ranks, Default)
	if !rep.Named(0) || rep.Named(1) {
		t.Fatalf("want rank 0 alone named: %+v", rep.Stragglers)
	}
}

// A hand-made timeline: rank 2 enters 100 us late in every iteration
// (100.15 us behind the median of ranks 0 and 1, at 0 and 0.1).
func TestFigures(t *testing.T) {
	seg := Segment{ErrUs: []float64{1, 1, 1}}
	for r := range 3 {
		var e, f []float64
		for i := range 4 {
			base := float64(i) * 1000
			late := 0.0
			if r == 2 {
				late = 100
			}
			e = append(e, base+late+float64(r)*0.1)
			f = append(f, base+500)
		}
		seg.Enter, seg.Finish = append(seg.Enter, e), append(seg.Finish, f)
	}
	ranks := []Rank{{0, "a", 0, 10}, {1, "a", 1, 11}, {2, "b", 0, 12}}
	rep := Analyze([]Segment{seg}, ranks, Default)
	if len(rep.Stragglers) != 1 {
		t.Fatalf("stragglers: %+v", rep.Stragglers)
	}
	f := rep.Stragglers[0]
	if f.Rank.Rank != 2 || f.Kind != LateEnter || f.Late != 4 || f.Iterations != 4 || math.Abs(f.MedianLagUs-100.15) > 1e-6 || !f.Consistent {
		t.Errorf("finding: %+v", f)
	}
	text := rep.String()
	for _, want := range []string{"rank 2 (b GPU 0, pid 12): late to enter in 4 of 4 iterations, by 100.1 us", "# Stragglers: 1 found"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
}

func TestNoStragglerSaysMargin(t *testing.T) {
	segs, ranks := healthy(4, 40).run(rand.New(rand.NewPCG(3, 4)))
	rep := Analyze(segs, ranks, Default)
	if len(rep.Stragglers) != 0 {
		t.Fatalf("healthy run named %+v", rep.Stragglers)
	}
	if rep.Margin >= 1 || rep.Worst == nil {
		t.Errorf("margin %v worst %+v", rep.Margin, rep.Worst)
	}
	if text := rep.String(); !strings.Contains(text, "no straggler over 40 iterations of 4 ranks (margin ") {
		t.Errorf("report:\n%s", text)
	}
}

// One rank alone, or ranks with different iterations, say nothing.
func TestNothingToCompare(t *testing.T) {
	one := Segment{Enter: [][]float64{{1, 2}}, Finish: [][]float64{{2, 3}}, ErrUs: []float64{0}}
	if rep := Analyze([]Segment{one}, []Rank{{}}, Default); rep.String() != "" || len(rep.Stragglers) != 0 {
		t.Errorf("one rank: %q", rep.String())
	}
	ragged := Segment{Enter: [][]float64{{1, 2}, {1}}, Finish: [][]float64{{2, 3}, {2}}, ErrUs: []float64{0, 0}}
	if rep := Analyze([]Segment{ragged}, []Rank{{}, {Rank: 1}}, Default); rep.Iterations != 0 || len(rep.Stragglers) != 0 {
		t.Errorf("ragged segment analyzed: %+v", rep)
	}
}

func TestNewSegment(t *testing.T) {
	tls := []Timeline{
		{AnchorNs: 1_000_000, ErrNs: 2000, EnterUs: []float32{-30, -20}, FinishUs: []float32{-25, -10}},
		{AnchorNs: 1_005_000, ErrNs: 500, EnterUs: []float32{-34, -25}, FinishUs: []float32{-30, -15}},
	}
	s := NewSegment("x", tls)
	want := [][]float64{{-30, -20}, {-29, -20}}
	wantF := [][]float64{{-25, -10}, {-25, -10}}
	for r := range want {
		for i := range want[r] {
			if s.Enter[r][i] != want[r][i] || s.Finish[r][i] != wantF[r][i] {
				t.Errorf("rank %d iteration %d: %v..%v, want %v..%v", r, i, s.Enter[r][i], s.Finish[r][i], want[r][i], wantF[r][i])
			}
		}
	}
	if s.ErrUs[0] != 2 || s.ErrUs[1] != 0.5 || s.Label != "x" {
		t.Errorf("errors %v", s.ErrUs)
	}
}

func TestKindJSON(t *testing.T) {
	for _, k := range []Kind{LateEnter, SlowFinish} {
		b, _ := k.MarshalText()
		var back Kind
		if err := back.UnmarshalText(b); err != nil || back != k {
			t.Errorf("%v: %s -> %v (%v)", k, b, back, err)
		}
	}
	var k Kind
	if err := k.UnmarshalText([]byte("early")); err == nil {
		t.Error("unknown kind accepted")
	}
}
