package render

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rdmabench/rdmabench/results"
)

// PlotFormat is an image format the plots are written in.
type PlotFormat string

const (
	PNG PlotFormat = "png"
	SVG PlotFormat = "svg"
)

// PlotSize is a plot's size in pixels (PNG at 96 dpi; SVG in the same
// points).
type PlotSize struct{ Width, Height int }

// DefaultPlotSize fits a slide and a wiki page.
var DefaultPlotSize = PlotSize{Width: 960, Height: 600}

// NamedRun is a run and the name its line gets in the legend.
type NamedRun struct {
	Name string
	Run  *results.Run
}

// NamedHgrm is an .hgrm distribution and its legend name.
type NamedHgrm struct {
	Name        string
	Percentiles []results.Percentile
}

// BandwidthPlot draws average bandwidth against message size, one line per
// run and QP count, so that runs (a baseline and today's) overlay. Sizes
// are on a log₂ axis.
func BandwidthPlot(w io.Writer, f PlotFormat, size PlotSize, runs []NamedRun) error {
	p := logXPlot("Bandwidth", "message size [B]", "BW average [Gb/s]", sizeTicks)
	var lines []any
	for _, nr := range runs {
		if nr.Run.Test.IsLatency() {
			continue // its figures are latencies: they go in as .hgrm files
		}
		byQPs := map[int]plotter.XYs{}
		var order []int
		for _, res := range nr.Run.Results {
			if res.Size <= 0 || res.Lat != nil || !finite(res.BWAvgGbps) {
				continue // a log axis has no place for size 0; latency rows carry no bandwidth
			}
			if _, ok := byQPs[res.QPs]; !ok {
				order = append(order, res.QPs)
			}
			byQPs[res.QPs] = append(byQPs[res.QPs], plotter.XY{X: float64(res.Size), Y: res.BWAvgGbps})
		}
		for _, q := range order {
			name := nr.Name
			if len(order) > 1 || q > 1 {
				name += fmt.Sprintf(" (%d QPs)", q)
			}
			lines = append(lines, name, byQPs[q])
		}
	}
	if len(lines) == 0 {
		return errors.New("plot: no bandwidth results to plot (latency runs go in as .hgrm files)")
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	zeroFloor(p)
	return writePlot(w, p, f, size)
}

// NamedNCCLRun is an ncclbench run and its legend name.
type NamedNCCLRun struct {
	Name string
	Run  *results.NCCLRun
}

// NCCLBusBWPlot draws bus bandwidth against message size, out-of-place
// and in-place a line each per run: busbw, not algbw, is the figure to
// hold against the links (nccl/bench's note). Sizes are on a log₂ axis.
func NCCLBusBWPlot(w io.Writer, f PlotFormat, size PlotSize, runs []NamedNCCLRun) error {
	p := logXPlot("NCCL bus bandwidth", "message size [B]", "busbw [GB/s]", sizeTicks)
	var lines []any
	for _, nr := range runs {
		var oop, ip plotter.XYs
		for _, pt := range nr.Run.Results {
			if pt.Size <= 0 {
				continue // no place on a log axis
			}
			if finite(pt.OutOfPlace.BusBW) {
				oop = append(oop, plotter.XY{X: float64(pt.Size), Y: pt.OutOfPlace.BusBW})
			}
			if finite(pt.InPlace.BusBW) {
				ip = append(ip, plotter.XY{X: float64(pt.Size), Y: pt.InPlace.BusBW})
			}
		}
		name := nr.Name + " " + nr.Run.Config.Collective
		if len(oop) > 0 {
			lines = append(lines, name+" out-of-place", oop)
		}
		if len(ip) > 0 {
			lines = append(lines, name+" in-place", ip)
		}
	}
	if len(lines) == 0 {
		return errors.New("plot: no ncclbench rows of a size above 0 to plot")
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	zeroFloor(p)
	return writePlot(w, p, f, size)
}

// LatencyPlot draws latency percentile curves from .hgrm files, as
// HdrHistogram's plotter does: the x axis is 1/(1−p) on a log scale, so
// that 90%, 99%, 99.9% and 99.99% are evenly spaced and the tail is
// visible.
func LatencyPlot(w io.Writer, f PlotFormat, size PlotSize, curves []NamedHgrm) error {
	p := logXPlot("Latency by percentile", "percentile", "latency [µs]", percentileTicks)
	var lines []any
	for _, c := range curves {
		var xys plotter.XYs
		for _, pc := range c.Percentiles {
			if pc.Quantile >= 1 || !finite(pc.Value) {
				continue // 1/(1−1) is infinite: the max is off the axis, as in HdrHistogram's plots
			}
			xys = append(xys, plotter.XY{X: 1 / (1 - pc.Quantile), Y: pc.Value})
		}
		if len(xys) > 0 {
			lines = append(lines, c.Name, xys)
		}
	}
	if len(lines) == 0 {
		return errors.New("plot: no percentiles below 100% to plot")
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	zeroFloor(p)
	return writePlot(w, p, f, size)
}

// logXPlot is an empty plot with a log x axis marked by ticks and the
// legend top left, where both plots' curves start low.
func logXPlot(title, x, y string, ticks plot.TickerFunc) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = ticks
	p.Legend.Top, p.Legend.Left = true, true
	return p
}

// zeroFloor starts the y axis at 0. Where every figure is 0 (a run that
// moved nothing), gonum would widen the empty range to -1..1, half of it
// below any figure there can be: the axis is 0..1 instead and the title
// says every figure is 0.
func zeroFloor(p *plot.Plot) {
	p.Y.Min = 0
	if p.Y.Max <= 0 {
		p.Y.Max = 1
		p.Title.Text += " (every figure 0)"
	}
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// writePlot renders p. gonum/plot panics on some degenerate data (a log
// axis over non-positive values); the callers filter those, and a panic
// that slips through still becomes an error, not a crash.
func writePlot(w io.Writer, p *plot.Plot, f PlotFormat, size PlotSize) (err error) {
	if err := checkPlot(f, size); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: cannot draw these data: %v", r)
		}
	}()
	p.BackgroundColor = color.White
	px := vg.Inch / 96 // one PNG pixel at the default 96 dpi
	c, err := draw.NewFormattedCanvas(vg.Length(size.Width)*px, vg.Length(size.Height)*px, string(f))
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	// A margin round the plot: gonum sets the title and the y label flush
	// with the edge by Liberation's metrics, and a browser that draws them
	// in a taller font (DejaVu, where Liberation is not installed) cut
	// their tops off at the figure's edge.
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	m := 2 * vg.Millimeter
	p.Draw(draw.Crop(dc, m, -m, m, -m))
	_, err = c.WriteTo(w)
	return err
}

// checkPlot refuses a format or a size we do not draw.
func checkPlot(f PlotFormat, size PlotSize) error {
	if f != PNG && f != SVG {
		return fmt.Errorf("plot: format %q: want png or svg", f)
	}
	if size.Width < 100 || size.Height < 100 || size.Width > 10000 || size.Height > 10000 {
		return fmt.Errorf("plot: size %dx%d outside 100..10000 pixels", size.Width, size.Height)
	}
	return nil
}

// sizeTicks marks powers of two, labelled at every other one (2, 8, 32,
// 128, 512, 2K ...) so that labels do not collide.
func sizeTicks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for e := 0; e <= 40; e++ {
		v := math.Ldexp(1, e)
		if v < min/2 || v > max*2 {
			continue
		}
		t := plot.Tick{Value: v}
		if e%2 == 1 {
			t.Label = sizeLabel(int64(v))
		}
		ticks = append(ticks, t)
	}
	return ticks
}

func sizeLabel(n int64) string {
	switch {
	case n >= 1<<30:
		return strconv.FormatInt(n>>30, 10) + "G"
	case n >= 1<<20:
		return strconv.FormatInt(n>>20, 10) + "M"
	case n >= 1<<10:
		return strconv.FormatInt(n>>10, 10) + "K"
	}
	return strconv.FormatInt(n, 10)
}

// percentileTicks marks 0%, 90%, 99%, 99.9% ... at 1/(1−p) = 1, 10, 100 ...
func percentileTicks(min, max float64) []plot.Tick {
	labels := []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%", "99.99999%"}
	var ticks []plot.Tick
	for i, l := range labels {
		v := math.Pow(10, float64(i))
		if v > max*10 {
			break
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: l})
	}
	return ticks
}
