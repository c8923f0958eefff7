package render

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// TestNum: a small figure keeps three significant figures instead of
// reading 0.00 (issue 48: write-bw's 2 B row on rxe).
func TestNum(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.00", 97.5: "97.50", 1: "1.00", 0.268: "0.268", 0.02: "0.0200", 0.0031: "0.00310",
		0.000498: "0.000498", 0.99996: "1.00", -0.0031: "-0.00310", 1234.567: "1234.57",
	} {
		if got := Num(v); got != want {
			t.Errorf("Num(%g) = %q, want %q", v, got, want)
		}
	}
}

// svgTexts are the strings an SVG draws.
func svgTexts(svg string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`>([^<>]+)</text>`).FindAllStringSubmatch(svg, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestPlotAllZero: a series of zeros (ncclbench's busbw on one rank, a run
// that moved nothing) is drawn on a 0..1 axis whose title says so, not on
// gonum's -1..1.
func TestPlotAllZero(t *testing.T) {
	zero := results.NCCLResult{}
	nccl := &results.NCCLRun{Config: results.NCCLConfig{Collective: "all_reduce"},
		Results: []results.NCCLPoint{{Size: 8, OutOfPlace: zero, InPlace: zero}, {Size: 1024, OutOfPlace: zero, InPlace: zero}}}
	run := sweep(0, 1)
	for name, draw := range map[string]func(*bytes.Buffer) error{
		"busbw":     func(b *bytes.Buffer) error { return NCCLBusBWPlot(b, SVG, ReportPlotSize, []NamedNCCLRun{{"n", nccl}}) },
		"bandwidth": func(b *bytes.Buffer) error { return BandwidthPlot(b, SVG, ReportPlotSize, []NamedRun{{"r", run}}) },
	} {
		var b bytes.Buffer
		if err := draw(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		texts := strings.Join(svgTexts(b.String()), "|")
		if regexp.MustCompile(`(^|\|)[-−]`).MatchString(texts) || !strings.Contains(texts, "(every figure 0)") || !strings.Contains(texts, "|1.0|") {
			t.Errorf("%s: texts %s: want a 0..1 axis, nothing below 0, and the title saying every figure is 0", name, texts)
		}
	}
}
