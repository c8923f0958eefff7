package compare

import (
	"errors"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// repeated makes a bandwidth run of --repeat asked whose sizes (in order)
// each have done[i] repeats of 100 Gb/s; ran is how many repeats returned a
// run (the document's repeat), recorded asks for repeat_asked (a document
// from before it has none).
func repeated(asked, ran int, recorded bool, sizes []int, done []int) *results.Run {
	r := &results.Run{Schema: results.Schema, Test: results.WriteBW, Device: "mlx5_0", Sizes: sizes, QPs: []int{1}, Repeat: ran}
	if recorded {
		r.RepeatAsked = asked
	}
	for i, n := range done {
		res := results.Result{Size: sizes[i], QPs: 1, BWAvgGbps: 100}
		for range n {
			res.Repeats = append(res.Repeats, results.Figures{BWAvgGbps: 100 + float64(len(res.Repeats))/10})
		}
		r.Results = append(r.Results, res)
	}
	return r
}

func TestPartialRuns(t *testing.T) {
	sizes := []int{8, 4096, 65536, 1 << 20}
	whole := func() *results.Run { return repeated(5, 5, true, sizes, []int{5, 5, 5, 5}) }
	// The run: the 5th repeat's peer sent nothing after the 2nd
	// size, so the later sizes have 4 repeats of 5.
	stalled := func() *results.Run {
		r := repeated(5, 5, true, sizes, []int{5, 5, 4, 4})
		r.Error = "peer 10.0.0.2 sent nothing for 2m0s"
		return r
	}
	with := func(r *results.Run, f func(*results.Run)) *results.Run { f(r); return r }
	tests := []struct {
		name      string
		base, cur *results.Run
		want      string // the refusal, "" when the runs are whole
	}{
		{"whole runs", whole(), whole(), ""},
		{"no --repeat", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {99}}), ""},
		{"new ended with an error", whole(), stalled(),
			"new run is partial: it ended with an error (peer 10.0.0.2 sent nothing for 2m0s); sizes 64K, 1M have 4 of 5 repeats; --allow-partial compares it anyway"},
		{"base ended with an error", stalled(), whole(),
			"base run is partial: it ended with an error (peer 10.0.0.2 sent nothing for 2m0s); sizes 64K, 1M have 4 of 5 repeats; --allow-partial compares it anyway"},
		{"both", stalled(), with(whole(), func(r *results.Run) { r.Error = "size 8: server: gone" }),
			"base run is partial: it ended with an error (peer 10.0.0.2 sent nothing for 2m0s); sizes 64K, 1M have 4 of 5 repeats; new run is partial: it ended with an error (size 8: server: gone); --allow-partial compares them anyway"},
		// A document from before repeat_asked: how many ran still tells
		// the sizes the last repeat did not reach.
		{"fewer repeats, no error recorded", whole(), repeated(5, 5, false, sizes, []int{5, 5, 5, 4}),
			"new run is partial: size 1M has 4 of 5 repeats; --allow-partial compares it anyway"},
		// The 4th repeat failed before it measured anything: only
		// repeat_asked knows a 5 was asked.
		{"repeats that never ran", whole(), with(repeated(5, 3, true, sizes, []int{3, 3, 3, 3}), func(r *results.Run) { r.Error = "dial 10.0.0.2:18515: connection refused" }),
			"new run is partial: it ended with an error (dial 10.0.0.2:18515: connection refused); sizes 8, 4K, 64K, 1M have 3 of 5 repeats; --allow-partial compares it anyway"},
		{"sizes no repeat reached", whole(), repeated(5, 5, true, sizes, []int{5, 2}),
			"new run is partial: size 4K has 2 of 5 repeats; sizes 64K, 1M not measured; --allow-partial compares it anyway"},
		{"interrupted", whole(), with(stalled(), func(r *results.Run) { r.Interrupted, r.Error = true, "interrupted after 2 of 4 measurements" }),
			"new run is partial: it was interrupted (Ctrl-C); sizes 64K, 1M have 4 of 5 repeats; --allow-partial compares it anyway"},
		{"a multi-line error is one line", whole(), with(whole(), func(r *results.Run) { r.Error = "size 8: 3 bad bytes\nsize 4096: 1 bad byte" }),
			"new run is partial: it ended with an error (size 8: 3 bad bytes size 4096: 1 bad byte); --allow-partial compares it anyway"},
		{"a QP sweep names the QP count", whole(), with(repeated(2, 2, true, []int{4096}, nil), func(r *results.Run) {
			r.QPs = []int{1, 4}
			r.Results = []results.Result{{Size: 4096, QPs: 1, BWAvgGbps: 100, Repeats: []results.Figures{{BWAvgGbps: 100}, {BWAvgGbps: 100}}}, {Size: 4096, QPs: 4, BWAvgGbps: 100, Repeats: []results.Figures{{BWAvgGbps: 100}}}}
		}), "new run is partial: size 4K (4 QPs) has 1 of 2 repeats; --allow-partial compares it anyway"},
		{"a long sweep names six and counts the rest", whole(), func() *results.Run {
			var all, done []int
			for s := 1; s <= 1<<22; s *= 2 {
				all, done = append(all, s), append(done, 5)
			}
			for i := 4; i < len(done); i++ {
				done[i] = 4
			}
			return repeated(5, 5, true, all, done)
		}(), "new run is partial: sizes 16, 32, 64, 128, 256, 512 and 13 more have 4 of 5 repeats; --allow-partial compares it anyway"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Runs(tt.base, tt.cur, DefaultOptions)
			if tt.want == "" {
				if err != nil || rep.BasePartial != nil || rep.NewPartial != nil {
					t.Fatalf("whole runs: %v, %+v", err, rep)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrPartial) || errors.Is(err, ErrInvalid) || err.Error() != tt.want {
				t.Fatalf("err %v\nwant %s", err, tt.want)
			}
			// --allow-partial: compared, the partial side said as it is.
			o := DefaultOptions
			o.AllowPartial = true
			rep, err = Runs(tt.base, tt.cur, o)
			if err != nil {
				t.Fatal(err)
			}
			if !rep.AllowPartial || (rep.BasePartial == nil) != !strings.Contains(tt.want, "base run") || (rep.NewPartial == nil) != !strings.Contains(tt.want, "new run") {
				t.Errorf("allowed: partial %v base %+v new %+v", rep.AllowPartial, rep.BasePartial, rep.NewPartial)
			}
			notes := strings.Join(rep.Notes, "\n")
			for _, p := range []*Partial{rep.BasePartial, rep.NewPartial} {
				if p == nil {
					continue
				}
				if p.Error != "" && !strings.Contains(notes, "ended with an error: ") {
					t.Errorf("notes %q lack the error", notes)
				}
				if len(p.Short) > 0 && !strings.Contains(notes, "fewer repeats than asked: "+p.shortText()) {
					t.Errorf("notes %q lack %q", notes, p.shortText())
				}
			}
		})
	}
}

// A refusal for a partial run comes after the ones for runs that do not
// compare at all: those are exit 2 whatever the repeats.
func TestPartialAfterInvalid(t *testing.T) {
	cur := lat([]float64{1}, []float64{2})
	cur.Error = "gone"
	if _, err := Runs(bw(map[int][]float64{4096: {100}}), cur, DefaultOptions); !errors.Is(err, ErrInvalid) || errors.Is(err, ErrPartial) {
		t.Errorf("err %v, want the other test refused", err)
	}
}
