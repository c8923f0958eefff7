package render

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmabench/rdmabench/compare"
)

// CompareText writes a comparison as a table, a row per size, QP count and
// metric, then the notes and the closing lines that say how the verdicts
// were reached and what they came to.
func CompareText(w io.Writer, rep *compare.Report) error {
	var b strings.Builder
	blind := "no repeats on either side: a change beyond %g%% counts, outside the family-wise rate; run both with --repeat N"
	if rep.NCCL {
		// An ncclbench run has no QP count; its noise is -I 1's iterations.
		fmt.Fprintf(&b, "compare ncclbench %s: new against base\n", rep.Test)
		fmt.Fprintf(&b, " %-12s %-20s %-12s %-12s %-9s %-20s %s\n", "#bytes", "metric", "base", "new", "change", "interval", "verdict")
		for _, r := range rep.Rows {
			base, cur, change, iv := compareCells(r)
			fmt.Fprintf(&b, " %-12d %-20s %-12s %-12s %-9s %-20s %s\n", r.Size, r.Metric, base, cur, change, iv, verdictText(r, rep.AllowMissing))
		}
		blind = "no per-iteration times on either side: a change beyond %g%% counts, outside the family-wise rate; run both with -I 1"
	} else {
		fmt.Fprintf(&b, "compare %s: new against base\n", rep.Test)
		fmt.Fprintf(&b, " %-10s %-5s %-12s %-12s %-12s %-9s %-20s %s\n", "#bytes", "#qps", "metric", "base", "new", "change", "interval", "verdict")
		for _, r := range rep.Rows {
			base, cur, change, iv := compareCells(r)
			fmt.Fprintf(&b, " %-10d %-5d %-12s %-12s %-12s %-9s %-20s %s\n", r.Size, r.QPs, r.Metric, base, cur, change, iv, verdictText(r, rep.AllowMissing))
		}
	}
	compareFooter(&b, rep.Summary, blindRows(rep.Rows, func(r compare.Row) compare.Row { return r }), blind)
	_, err := io.WriteString(w, b.String())
	return err
}

// CompareJSON writes a comparison as one JSON document.
func CompareJSON(w io.Writer, rep *compare.Report) error {
	return indented(w, rep)
}

// CompareMeshText writes a mesh comparison: a row per direction and metric
// that the base measured, the medians over all directions, then the notes
// and the closing lines.
func CompareMeshText(w io.Writer, rep *compare.MeshReport) error {
	var b strings.Builder
	b.WriteString("compare mesh: new against base, each direction\n")
	fmt.Fprintf(&b, " %-16s %-16s %-12s %-12s %-12s %-9s %-20s %s\n", "from", "to", "metric", "base", "new", "change", "interval", "verdict")
	for _, r := range rep.Rows {
		base, cur, change, iv := compareCells(r.Row)
		if r.From == compare.AllDirections {
			base, cur = "(median", "change)"
		}
		fmt.Fprintf(&b, " %-16s %-16s %-12s %-12s %-12s %-9s %-20s %s\n", r.From, r.To, r.Metric, base, cur, change, iv, verdictText(r.Row, rep.AllowMissing))
	}
	compareFooter(&b, rep.Summary, blindRows(rep.Rows, func(r compare.MeshRow) compare.Row { return r.Row }),
		"fewer than "+fmt.Sprint(compare.MinMeshDirections)+" directions to tell the noise by: a change beyond %g%% counts, outside the family-wise rate")
	_, err := io.WriteString(w, b.String())
	return err
}

// CompareMeshJSON writes a mesh comparison as one JSON document.
func CompareMeshJSON(w io.Writer, rep *compare.MeshReport) error {
	return indented(w, rep)
}

// compareCells are a row's figures, change and interval as printed.
func compareCells(r compare.Row) (base, cur, change, interval string) {
	base, cur, change, interval = "-", "-", "-", "-"
	if r.BaseN > 0 {
		base = fmt.Sprintf("%.3f", r.Base)
	}
	if r.NewN > 0 {
		cur = fmt.Sprintf("%.3f", r.New)
	}
	if r.BaseN > 0 && r.NewN > 0 {
		change = fmt.Sprintf("%+.1f%%", r.DeltaPct)
		interval = "(no noise)"
		if r.NoiseAware {
			interval = fmt.Sprintf("[%+.1f%%, %+.1f%%]", *r.CILowPct, *r.CIHighPct)
		}
	}
	return base, cur, change, interval
}

// verdictText is a row's verdict and what follows from it.
func verdictText(r compare.Row, allowMissing bool) string {
	switch r.Verdict {
	case compare.Missing:
		if allowMissing {
			return "missing (allowed)"
		}
		return "missing: regression"
	case compare.Inconclusive:
		switch {
		case r.Noise == compare.BaseOnly:
			return "inconclusive (repeat the new run too)"
		case r.Noise == compare.NewOnly:
			return "inconclusive (repeat the base too)"
		case r.Noise != compare.BothSides:
			return "inconclusive"
		case r.SettleRepeats == 0:
			return fmt.Sprintf("inconclusive (over %d repeats a side to settle)", compare.MaxRepeats)
		}
		return fmt.Sprintf("inconclusive (about %d repeats a side to settle)", r.SettleRepeats)
	}
	return r.Verdict.String()
}

// blindRows counts the rows judged without noise.
func blindRows[R any](rows []R, row func(R) compare.Row) int {
	n := 0
	for _, x := range rows {
		if r := row(x); r.BaseN > 0 && r.NewN > 0 && !r.NoiseAware {
			n++
		}
	}
	return n
}

// compareFooter writes the notes, the tally and how the verdicts were
// reached; blindWhy says why rows had no noise, with a %g for the
// threshold.
func compareFooter(b *strings.Builder, s compare.Summary, blind int, blindWhy string) {
	for _, n := range s.Notes {
		fmt.Fprintf(b, " note: %s\n", n)
	}
	missing := fmt.Sprintf("%d missing, counted", s.Missing)
	if s.AllowMissing {
		missing = fmt.Sprintf("%d missing, allowed", s.Missing)
	}
	fmt.Fprintf(b, "%d regression(s) (%s), %d inconclusive; a change within the %g%% threshold is never a regression\n", s.Regressions, missing, s.Inconclusive, s.ThresholdPct)
	var how []string
	if s.Family > 0 {
		how = append(how, fmt.Sprintf("%d noise-aware: family-wise error rate %g%% for the whole compare (Bonferroni: each bound one-sided at %.4g%%)",
			s.Family, s.FamilyWisePct, 100-s.FamilyWisePct/float64(s.Family)))
	}
	if blind > 0 {
		how = append(how, fmt.Sprintf("%d NOT noise-aware (%s)", blind, fmt.Sprintf(blindWhy, s.ThresholdPct)))
	}
	if len(how) > 0 {
		fmt.Fprintf(b, "verdicts: %s\n", strings.Join(how, "; "))
	}
}
