package render

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/rdmabench/rdmabench/results"
)

// MeshJSON writes the mesh document (--json, --save).
func MeshJSON(w io.Writer, m *results.Mesh) error {
	return indented(w, m)
}

// meshFigure is one of the two matrices: which figure, its unit, and
// whether a direction is an outlier by it.
type meshFigure struct {
	title  string
	value  func(results.MeshPair) float64
	format string
	slow   func(results.MeshPair) bool
	// higherIsBetter picks the palette's direction: the bad end is red.
	higherIsBetter bool
	// line is the outlier threshold (0: unknown): the colour scale is
	// centred on it, so that a healthy mesh is blue and only outliers red.
	line     float64
	lineName string
}

func meshFigures(m *results.Mesh) []meshFigure {
	return []meshFigure{
		{fmt.Sprintf("Bandwidth [Gb/s], write-bw %s, row writes to column", SizeName(m.BWSize)),
			func(p results.MeshPair) float64 { return p.BWGbps }, "%.2f", func(p results.MeshPair) bool { return p.SlowBW }, true,
			m.BWFraction * m.MedianBW, fmt.Sprintf("%g x the median", m.BWFraction)},
		{fmt.Sprintf("Latency p50 [us], send-lat %s, row leads the ping-pong", SizeName(m.LatSize)),
			func(p results.MeshPair) float64 { return p.LatP50us }, "%.2f", func(p results.MeshPair) bool { return p.SlowLat }, false,
			m.LatMultiple * m.MedianLat, fmt.Sprintf("%g x the median", m.LatMultiple)},
	}
}

// SizeName is a message size for people: 1 MiB, 64 KiB, 8 B.
func SizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

// cells indexes the directions by [from][to].
func cells(m *results.Mesh) [][]*results.MeshPair {
	n := len(m.Ranks)
	c := make([][]*results.MeshPair, n)
	for i := range c {
		c[i] = make([]*results.MeshPair, n)
	}
	for i := range m.Pairs {
		p := &m.Pairs[i]
		c[p.From][p.To] = p
	}
	return c
}

// MeshText prints the mesh for a terminal: the ranks and their ports (with
// the facts on which they differ), the two matrices (outliers marked *,
// failed directions x, pairs not scheduled blank), the retests, the likely
// culprits and links, and the ranks that left.
func MeshText(w io.Writer, m *results.Mesh) error {
	if m.Quick != nil {
		return meshQuickText(w, m)
	}
	var b strings.Builder
	meshHeader(&b, m)
	meshRanks(&b, m)
	meshMatrices(&b, m)
	fmt.Fprintf(&b, "\n * outlier: bandwidth below %g x, or latency above %g x, %s%s; x failed\n", m.BWFraction, m.LatMultiple, meshReference(m), meshSpread(m))
	meshOutliers(&b, m)
	for _, f := range meshFindings(m) {
		fmt.Fprintf(&b, " %s\n", f.Text)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// meshHeader is the report's first line: the ranks, the rounds and what
// each direction measured.
func meshHeader(b *strings.Builder, m *results.Mesh) {
	n := len(m.Ranks)
	if sc := m.Screen; sc != nil {
		fmt.Fprintf(b, "rdmabench mesh: %d ranks (%s), %s screening both directions of each pair at once, write-bw %s for %gs, send-lat %s %d times; retests alone for %gs and %d times; %.0fs in all\n",
			n, m.Launcher, Plural(m.Rounds, "round"), SizeName(m.BWSize), sc.BWDurationS, SizeName(m.LatSize), sc.LatIters, m.BWDurationS, m.LatIters, m.ElapsedS)
	} else {
		fmt.Fprintf(b, "rdmabench mesh: %d ranks (%s), %s; each direction write-bw %s for %gs, send-lat %s %d times; %.0fs in all\n",
			n, m.Launcher, Plural(m.Rounds, "round"), SizeName(m.BWSize), m.BWDurationS, SizeName(m.LatSize), m.LatIters, m.ElapsedS)
	}
}

// meshRanks is the table of ranks, the facts on which they differ
// marked !, then those differences.
func meshRanks(b *strings.Builder, m *results.Mesh) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, " rank\thost\taddress\tdevice\tfirmware\trate\tMTU\tGID\tlink layer")
	odd := map[[2]string]bool{} // (fact, rank) that differ, marked !
	for _, mm := range m.Mismatches {
		for _, o := range mm.Odd {
			odd[[2]string{mm.Fact, fmt.Sprint(o.Rank)}] = true
		}
	}
	mark := func(fact string, r int, v string) string {
		if odd[[2]string{fact, fmt.Sprint(r)}] {
			return v + "!"
		}
		return v
	}
	for _, r := range m.Ranks {
		gid := "LID"
		if r.GIDIndex >= 0 {
			gid = fmt.Sprint(r.GIDIndex)
		}
		if r.Device == "" {
			fmt.Fprintf(tw, " %d\t%s\t%s\t-\t-\t-\t-\t-\t-\n", r.Rank, dash(r.Host), dash(r.Addr))
			continue
		}
		fmt.Fprintf(tw, " %d\t%s\t%s\t%s:%d\t%s\t%s\t%s\t%s\t%s\n", r.Rank, dash(r.Host), dash(r.Addr), r.Device, r.Port,
			mark("firmware", r.Rank, dash(r.FWVer)), mark("rate", r.Rank, fmt.Sprintf("%g Gb/s", r.RateGbps)),
			mark("active MTU", r.Rank, fmt.Sprint(r.ActiveMTU)), mark("GID index", r.Rank, gid), mark("link layer", r.Rank, dash(string(r.LinkLayer))))
	}
	tw.Flush()
	for _, mm := range m.Mismatches {
		fmt.Fprintf(b, " %s\n", mismatchText(mm))
	}
}

// meshMatrices are the bandwidth and latency matrices, outliers starred.
func meshMatrices(b *strings.Builder, m *results.Mesh) {
	n := len(m.Ranks)
	c := cells(m)
	medians := []float64{m.MedianBW, m.MedianLat}
	for fi, f := range meshFigures(m) {
		fmt.Fprintf(b, "\n %s; median %.2f\n", f.title, medians[fi])
		tw := tabwriter.NewWriter(b, 0, 0, 1, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "from\\to\t")
		for j := 0; j < n; j++ {
			fmt.Fprintf(tw, "%d\t", j)
		}
		fmt.Fprintln(tw)
		for i := 0; i < n; i++ {
			fmt.Fprintf(tw, "%d\t", i)
			for j := 0; j < n; j++ {
				p := c[i][j]
				switch {
				case i == j:
					fmt.Fprint(tw, "-\t")
				case p == nil:
					fmt.Fprint(tw, "\t")
				case !p.Measured():
					fmt.Fprint(tw, "x\t")
				case f.slow(*p):
					fmt.Fprintf(tw, f.format+"*\t", f.value(*p))
				default:
					fmt.Fprintf(tw, f.format+" \t", f.value(*p))
				}
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
}

// meshOutliers is a line an outlier and its retest, then the counts of
// those not judged one by one and how the retests were judged.
func meshOutliers(b *strings.Builder, m *results.Mesh) {
	concurrent := pairsPerRound(m)
	for _, p := range m.Pairs {
		if !p.Outlier() {
			continue
		}
		fmt.Fprintf(b, " outlier %d->%d (round %d): %.2f Gb/s, %.2f us", p.From, p.To, p.Round, p.BWGbps, p.LatP50us)
		switch rt := p.Retest; {
		case rt == nil:
			b.WriteString("; not retested (--max-retests)\n")
		case rt.Error != "":
			fmt.Fprintf(b, "; retest failed: %s\n", rt.Error)
		case rt.SlowBW || rt.SlowLat:
			fmt.Fprintf(b, "; alone %.2f Gb/s, %.2f us: still an outlier\n", rt.BWGbps, rt.LatP50us)
		case concurrent[p.Round] > 1:
			fmt.Fprintf(b, "; %s %.2f Gb/s, %.2f us: fine (slow only while other pairs ran)\n", RetestHow(rt), rt.BWGbps, rt.LatP50us)
		default:
			// Its round ran no other pair (a NIC shared by every rank):
			// what slowed it came and went, whatever it was.
			fmt.Fprintf(b, "; again %.2f Gb/s, %.2f us: fine (not slow when measured again)\n", rt.BWGbps, rt.LatP50us)
		}
	}
	if m.LoneLatency > 0 {
		fmt.Fprintf(b, " %s of one direction alone, its reverse fine: stalls of a host (a slow path slows a ping-pong both ways), not blamed\n", Plural(m.LoneLatency, "latency outlier"))
	}
	if m.NotRetested > 0 {
		fmt.Fprintf(b, " %s not retested (--retest-budget, --max-retests): inconclusive unless a culprit explains them\n", Plural(m.NotRetested, "more outlier"))
	}
	if sc := m.Screen; sc != nil {
		controls := 0
		for _, p := range m.Pairs {
			if p.Control {
				controls++
			}
		}
		if sc.RetestBW > 0 {
			fmt.Fprintf(b, " retests judged against %s retested the same way: alone at full length a direction got %.2f x its screening bandwidth and %.2f x its latency\n",
				Plural(controls, "healthy direction"), sc.RetestBW, sc.RetestLat)
		} else if controls > 0 || m.Rounds > 0 {
			fmt.Fprintf(b, " retests judged against the screening pass: %s measured, too few to tell how alone at full length differs\n", Plural(controls, "control"))
		}
	}
}

// culpritRatios says how far a culprit's typical pair is from its
// partners' other pairs, in the figures that blame it.
func culpritRatios(cu results.Culprit) string {
	var parts []string
	if cu.BWRatio > 0 && (cu.SlowBW || !cu.SlowLat) {
		parts = append(parts, fmt.Sprintf("bandwidth at %.2f x", cu.BWRatio))
	}
	if cu.LatRatio > 0 && cu.SlowLat {
		parts = append(parts, fmt.Sprintf("latency at %.2f x", cu.LatRatio))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; its pairs' " + strings.Join(parts, ", ") + " their partners' other pairs"
}

// meshReference says what each direction is judged against.
func meshReference(m *results.Mesh) string {
	if m.ExpectBW > 0 {
		return fmt.Sprintf("the expected %g Gb/s (--expect-bw) or the better of its ranks' other pairs' latency", m.ExpectBW)
	}
	if m.Schema >= 4 {
		return "the better of its two ranks' other pairs of its class (same NIC, same host, same rail, across rails, across hosts)"
	}
	return "the better of its two ranks' other pairs"
}

// meshSpread is the noise model's part of the outlier rule.
func meshSpread(m *results.Mesh) string {
	if m.Sigmas <= 0 {
		return "" // a schema 1 document
	}
	return fmt.Sprintf(", and beyond %g spreads of one measurement (more on a large mesh; bandwidth %.1f%%, latency %.1f%%)", m.Sigmas, 100*m.SpreadBW, 100*m.SpreadLat)
}

// MeshClean says whether the mesh found nothing to act on.
func MeshClean(m *results.Mesh) bool {
	if m.Quick != nil {
		return meshQuickClean(m)
	}
	// Every outlier still bad is a culprit's, a link's or inconclusive
	// (or a lone latency, a stall: clean).
	if len(m.Culprits)+len(m.Hosts)+len(m.Links)+len(m.Inconclusive)+len(m.Mismatches)+m.NotRetested > 0 || m.Error != "" {
		return false
	}
	for _, r := range m.Ranks {
		if r.Dead != "" {
			return false
		}
	}
	for _, p := range m.Pairs {
		// A failure its retest measured is let go, as a cleared outlier.
		if p.Failed() {
			return false
		}
	}
	return true
}

// pairsPerRound is how many pairs each round of the first pass measured
// at once (both directions of a pair count once).
func pairsPerRound(m *results.Mesh) map[int]int {
	seen := map[[3]int]bool{}
	out := map[int]int{}
	for _, p := range m.Pairs {
		k := [3]int{p.Round, min(p.From, p.To), max(p.From, p.To)}
		if !seen[k] {
			seen[k] = true
			out[p.Round]++
		}
	}
	return out
}

// Plural is "1 round", "3 rounds".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// grid is one figure of a mesh as gonum's heat map reads it: column =
// server rank, row = client rank, NaN where nothing was measured.
type grid struct {
	n int
	z [][]float64
}

func (g grid) Dims() (c, r int)   { return g.n, g.n }
func (g grid) Z(c, r int) float64 { return g.z[r][c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// MeshHeatmap draws the bandwidth and latency matrices side by side, the
// bad end of each colour scale red, each with its colour bar; outliers are
// ringed and failed directions crossed.
func MeshHeatmap(w io.Writer, f PlotFormat, size PlotSize, m *results.Mesh) (err error) {
	n := len(m.Ranks)
	if n < 2 {
		return errors.New("plot: a mesh of fewer than 2 ranks has no pairs")
	}
	if err := checkPlot(f, size); err != nil {
		return err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("plot: cannot draw this mesh: %v", r)
		}
	}()
	px := vg.Inch / 96
	canvas, err := draw.NewFormattedCanvas(vg.Length(size.Width)*px, vg.Length(size.Height)*px, string(f))
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	c := cells(m)
	figs := meshFigures(m)
	var maps, bars [][]*plot.Plot
	maps, bars = [][]*plot.Plot{{}}, [][]*plot.Plot{{}}
	for _, fg := range figs {
		hm, bar, err := heatmapPlot(m, c, fg)
		if err != nil {
			return err
		}
		maps[0] = append(maps[0], hm)
		bars[0] = append(bars[0], bar)
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(figs), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	height := dc.Max.Y - dc.Min.Y
	barHeight := max(height/6, vg.Centimeter*1.5)
	mapArea := draw.Crop(dc, 0, 0, barHeight, 0)
	barArea := draw.Crop(dc, 0, 0, 0, -(height - barHeight))
	for i, cv := range plot.Align(maps, tiles, mapArea)[0] {
		maps[0][i].Draw(cv)
	}
	for i, cv := range plot.Align(bars, tiles, barArea)[0] {
		bars[0][i].Draw(cv)
	}
	_, err = canvas.WriteTo(w)
	return err
}

func heatmapPlot(m *results.Mesh, c [][]*results.MeshPair, fg meshFigure) (*plot.Plot, *plot.Plot, error) {
	n := len(m.Ranks)
	g := grid{n: n, z: make([][]float64, n)}
	lo, hi := math.Inf(1), math.Inf(-1)
	var slow, failed plotter.XYs
	for i := 0; i < n; i++ {
		g.z[i] = make([]float64, n)
		for j := 0; j < n; j++ {
			g.z[i][j] = math.NaN()
			p := c[i][j]
			switch {
			case p == nil:
			case !p.Measured():
				failed = append(failed, plotter.XY{X: float64(j), Y: float64(i)})
			default:
				v := fg.value(*p)
				g.z[i][j] = v
				lo, hi = math.Min(lo, v), math.Max(hi, v)
				if fg.slow(*p) {
					slow = append(slow, plotter.XY{X: float64(j), Y: float64(i)})
				}
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 0, 1 // nothing measured: an empty map, the crosses say why
	}
	if c := fg.line; c > 0 && !math.IsInf(c, 0) {
		// Centred on the outlier line (the palette's neutral middle), never
		// below zero.
		d := math.Max(hi-c, c-lo)
		lo, hi = math.Max(0, c-d), c+d
	}
	if hi-lo < 1e-9*math.Max(1, math.Abs(hi)) {
		// One value everywhere: a range around it, so that the palette
		// maps it (gonum paints a zero range as NaN).
		lo, hi = lo*0.95-1e-9, hi*1.05+1e-9
	}
	var cm palette.ColorMap = moreland.SmoothBlueRed()
	if fg.higherIsBetter {
		cm = palette.Reverse(cm)
	}
	cm.SetMin(lo)
	cm.SetMax(hi)
	hm := plotter.NewHeatMap(g, cm.Palette(255))
	hm.Min, hm.Max = lo, hi
	hm.NaN = color.White // the palette's middle is a light grey: nothing measured must not look like it
	p := plot.New()
	// Two lines: what is shown, then how to read it. On one line the
	// title is wider than its half of the figure in a font wider than
	// gonum measures with (a browser without Liberation Serif draws DejaVu
	// Serif), and the browser clips it ("row writes to colun").
	p.Title.Text = strings.Replace(fg.title, ", ", "\n", 1)
	p.X.Label.Text = "to rank (server)"
	p.Y.Label.Text = "from rank (client)"
	p.Y.Scale = plot.InvertedScale{Normalizer: plot.LinearScale{}} // rank 0 at the top, as the text matrix
	p.X.Tick.Marker = plot.TickerFunc(rankTicks)
	p.Y.Tick.Marker = plot.TickerFunc(rankTicks)
	p.Add(hm)
	if err := markCells(p, slow, draw.RingGlyph{}, "outlier"); err != nil {
		return nil, nil, err
	}
	if err := markCells(p, failed, draw.CrossGlyph{}, "failed"); err != nil {
		return nil, nil, err
	}
	p.Legend.Top = true
	bar := plot.New()
	bar.HideY()
	bar.X.Padding, bar.Y.Padding = 0, 0
	bar.Add(&plotter.ColorBar{ColorMap: cm})
	if fg.line > 0 {
		bar.X.Label.Text = "middle: the outlier line, " + fg.lineName
	}
	return p, bar, nil
}

// markCells draws a glyph over each cell listed, with a legend entry.
func markCells(p *plot.Plot, at plotter.XYs, shape draw.GlyphDrawer, name string) error {
	if len(at) == 0 {
		return nil
	}
	s, err := plotter.NewScatter(at)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	s.GlyphStyle = draw.GlyphStyle{Shape: shape, Radius: vg.Points(5), Color: color.Black}
	p.Add(s)
	p.Legend.Add(name, s)
	return nil
}

// rankTicks labels whole ranks, about 16 of them whatever the mesh's size.
func rankTicks(lo, hi float64) []plot.Tick {
	n := int(math.Round(hi)) + 1
	step := max(1, (n+15)/16)
	var ticks []plot.Tick
	for r := 0; r < n; r++ {
		t := plot.Tick{Value: float64(r)}
		if r%step == 0 {
			t.Label = fmt.Sprint(r)
		}
		ticks = append(ticks, t)
	}
	return ticks
}

// RetestHow says how a retest measured: alone, or its write-bw at once
// with others (kept only where fine there: sharing only slows).
func RetestHow(rt *results.MeshFigures) string {
	if rt.Beside > 0 {
		return fmt.Sprintf("retested (write-bw beside %d others)", rt.Beside)
	}
	return "alone"
}
