package render

import (
	"bytes"
	"fmt"
	"image/png"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

func sweep(scale float64, qps ...int) *results.Run {
	r := &results.Run{Test: results.WriteBW}
	for _, q := range qps {
		for s := 2; s <= 8<<20; s *= 2 {
			r.Results = append(r.Results, results.Result{Size: s, QPs: q, BWAvgGbps: scale * float64(q) * float64(s) / float64(s+4096)})
		}
	}
	return r
}

func hgrmFixture(t *testing.T) []results.Percentile {
	t.Helper()
	doc := `       Value     Percentile TotalCount 1/(1-Percentile)

       1.000 0.000000000000          1           1.00
       1.100 0.500000000000        500           2.00
       1.500 0.900000000000        900          10.00
       2.500 0.990000000000        990         100.00
       7.000 0.999000000000        999        1000.00
       9.500 1.000000000000       1000
#[Mean    =        1.125, StdDeviation   =        0.200]
#[Max     =        9.500, Total count    =         1000]
`
	p, err := results.ReadHgrm(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p.Percentiles
}

// Plots are decoded back: a PNG of the size asked for, an SVG document.
func TestPlots(t *testing.T) {
	size := PlotSize{Width: 640, Height: 400}
	hgrm := hgrmFixture(t)
	draws := []struct {
		name string
		draw func(*bytes.Buffer, PlotFormat) error
	}{
		{"bandwidth", func(b *bytes.Buffer, f PlotFormat) error {
			return BandwidthPlot(b, f, size, []NamedRun{{"base", sweep(90, 1)}, {"new", sweep(80, 1, 4)}})
		}},
		{"latency", func(b *bytes.Buffer, f PlotFormat) error {
			return LatencyPlot(b, f, size, []NamedHgrm{{"base", hgrm}, {"new", hgrm}})
		}},
	}
	for _, d := range draws {
		t.Run(d.name, func(t *testing.T) { checkImages(t, size, d.draw) })
	}
}

// checkImages draws a PNG and decodes it back at the size asked for, then
// an SVG.
func checkImages(t *testing.T, size PlotSize, draw func(*bytes.Buffer, PlotFormat) error) {
	t.Helper()
	var b bytes.Buffer
	if err := draw(&b, PNG); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if got := img.Bounds().Size(); got.X != size.Width || got.Y != size.Height {
		t.Errorf("PNG %v, want %dx%d", got, size.Width, size.Height)
	}
	b.Reset()
	if err := draw(&b, SVG); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "<svg") || !strings.Contains(b.String(), fmt.Sprintf(`width="%gpt"`, float64(size.Width)*0.75)) {
		t.Errorf("not an SVG of %d px: %.200s", size.Width, b.String())
	}
}

func TestPlotRefusals(t *testing.T) {
	lat := &results.Run{Test: results.SendLat, Results: []results.Result{{Size: 8, QPs: 1, Lat: &results.LatencyStats{P50: 1}}}}
	zero := &results.Run{Test: results.WriteBW, Results: []results.Result{{Size: 0, QPs: 1, BWAvgGbps: 1}}}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no runs", BandwidthPlot(&bytes.Buffer{}, PNG, DefaultPlotSize, nil), "no bandwidth results"},
		{"latency run", BandwidthPlot(&bytes.Buffer{}, PNG, DefaultPlotSize, []NamedRun{{"l", lat}}), "no bandwidth results"},
		{"size 0 only", BandwidthPlot(&bytes.Buffer{}, PNG, DefaultPlotSize, []NamedRun{{"z", zero}}), "no bandwidth results"},
		{"only the max", LatencyPlot(&bytes.Buffer{}, PNG, DefaultPlotSize, []NamedHgrm{{"x", []results.Percentile{{Value: 1, Quantile: 1}}}}), "no percentiles"},
		{"format", BandwidthPlot(&bytes.Buffer{}, "gif", DefaultPlotSize, []NamedRun{{"b", sweep(1, 1)}}), "want png or svg"},
		{"size", BandwidthPlot(&bytes.Buffer{}, PNG, PlotSize{1, 1}, []NamedRun{{"b", sweep(1, 1)}}), "outside 100..10000"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: err %v, want %q", tt.name, tt.err, tt.want)
		}
	}
}
