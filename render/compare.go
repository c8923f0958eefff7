package render

import (
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
	return indented(w, rep)
}

// CompareMeshText writes a mesh comparison: a row per direction and metric
// that both meshes measured, then the notes and the count.
func CompareMeshText(w io.Writer, rep *compare.MeshReport) error {
	var b strings.Builder
	b.WriteString("compare mesh: new against base, each direction\n")
	fmt.Fprintf(&b, " %-16s %-16s %-12s %-12s %-12s %-9s %s\n", "from", "to", "metric", "base", "new", "change", "verdict")
	for _, r := range rep.Rows {
		fmt.Fprintf(&b, " %-16s %-16s %-12s %-12.3f %-12.3f %-9s %s\n", r.From, r.To, r.Metric, r.Base, r.New, fmt.Sprintf("%+.1f%%", r.DeltaPct), r.Verdict)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, " note: %s\n", n)
	}
	fmt.Fprintf(&b, "%d regression(s); verdicts NOT noise-aware (a mesh measures each direction once): a change beyond %g%% counts\n", rep.Regressions, rep.ThresholdPct)
	_, err := io.WriteString(w, b.String())
	return err
}

// CompareMeshJSON writes a mesh comparison as one JSON document.
func CompareMeshJSON(w io.Writer, rep *compare.MeshReport) error {
	return indented(w, rep)
}
