package render

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/rdmabench/rdmabench/compare"
)

// CompareText writes a comparison as a table, a row per size, QP count and
// metric, then the notes and a closing line that says how the verdicts
// were reached.
func CompareText(w io.Writer, rep *compare.Report) error {
	var b strings.Builder
	fmt.Fprintf(&b, "compare %s: new against base\n", rep.Test)
	ci := fmt.Sprintf("%g%% CI of change", 100*rep.Confidence)
	fmt.Fprintf(&b, " %-10s %-5s %-12s %-12s %-12s %-9s %-22s %s\n", "#bytes", "#qps", "metric", "base", "new", "change", ci, "verdict")
	aware, blind := 0, 0
	for _, r := range rep.Rows {
		base, cur, change, interval := "-", "-", "-", "-"
		if r.BaseN > 0 {
			base = fmt.Sprintf("%.3f", r.Base)
		}
		if r.NewN > 0 {
			cur = fmt.Sprintf("%.3f", r.New)
		}
		if r.BaseN > 0 && r.NewN > 0 {
			change = fmt.Sprintf("%+.1f%%", r.DeltaPct)
			if r.NoiseAware {
				interval = fmt.Sprintf("[%+.1f%%, %+.1f%%]", *r.CILowPct, *r.CIHighPct)
				aware++
			} else {
				interval = "(no repeats)"
				blind++
			}
		}
		fmt.Fprintf(&b, " %-10d %-5d %-12s %-12s %-12s %-9s %-22s %s\n", r.Size, r.QPs, r.Metric, base, cur, change, interval, r.Verdict)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, " note: %s\n", n)
	}
	var how []string
	if aware > 0 {
		how = append(how, fmt.Sprintf("%d noise-aware (Welch's %g%% confidence interval of the difference of means must exclude zero)", aware, 100*rep.Confidence))
	}
	if blind > 0 {
		how = append(how, fmt.Sprintf("%d NOT noise-aware (no repeats on a side: a change beyond %g%% counts; run both with --repeat N)", blind, rep.ThresholdPct))
	}
	fmt.Fprintf(&b, "%d regression(s); verdicts: %s\n", rep.Regressions, strings.Join(how, "; "))
	_, err := io.WriteString(w, b.String())
	return err
}

// CompareJSON writes a comparison as one JSON document.
func CompareJSON(w io.Writer, rep *compare.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
