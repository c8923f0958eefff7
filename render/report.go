package render

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/compare"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/saved"
)

// ReportPlotSize is a plot's size in the HTML report: two fit side by side
// on a wide screen, one on a laptop's.
var ReportPlotSize = PlotSize{Width: 720, Height: 450}

//go:embed report.html.tmpl
var reportTemplateText string

// reportTemplate is the page. html/template escapes every string that
// comes from a file (a device name, a note, an error); only the SVG plots,
// which gonum/plot writes with their text escaped, go in as markup.
var reportTemplate = template.Must(template.New("report").Parse(reportTemplateText))

// reportPage is what the template shows, in its order: the verdicts, then
// the plots, then the tables.
type reportPage struct {
	Title    string
	Files    []reportFile
	Verdicts []reportVerdict
	Plots    []reportPlot
	Tables   []reportTable
}

type reportFile struct{ Name, Kind, Path string }

type reportVerdict struct {
	Doc string
	Verdict
}

// Class is the verdict's CSS class.
func (v reportVerdict) Class() string { return strings.ToLower(v.Severity.String()) }

// reportPlot is an inline SVG plot, or why it could not be drawn (a mesh
// with no direction measured): one plot's data do not cost the page.
type reportPlot struct {
	Title string
	SVG   template.HTML
	Error string
}

// reportTable is a table of strings, or preformatted text (Pre) where the
// text form is the clearest (a mesh's matrices).
type reportTable struct {
	Title string
	Notes []string
	Head  []string
	Rows  [][]string
	Pre   string
}

// HTMLReport writes one self-contained HTML page of saved documents:
// their verdicts first (mesh culprits and outliers, compare regressions,
// ncclbench stragglers, doctor and health FAILs), then the plots (inline
// SVG), then the tables. It needs no network: no script, no external
// style, font or image.
func HTMLReport(w io.Writer, docs []*saved.Document) error {
	page := reportPage{Title: "rdmabench report"}
	var bwRuns []NamedRun
	var ncclRuns []NamedNCCLRun
	var curves [][]NamedHgrm // grouped by what a sample is
	var samples []string
	var meshes []*saved.Document
	for _, d := range docs {
		page.Files = append(page.Files, reportFile{Name: d.Name(), Kind: d.Kind.String(), Path: d.Path})
		for _, v := range DocumentVerdicts(d) {
			page.Verdicts = append(page.Verdicts, reportVerdict{Doc: verdictSource(d), Verdict: v})
		}
		page.Tables = append(page.Tables, documentTables(d)...)
		switch d.Kind {
		case saved.Run:
			if !d.Run.Test.IsLatency() {
				bwRuns = append(bwRuns, NamedRun{Name: d.Name(), Run: d.Run})
			}
		case saved.NCCL:
			ncclRuns = append(ncclRuns, NamedNCCLRun{Name: d.Name(), Run: d.NCCL})
		case saved.Hgrm:
			i := 0
			for i < len(samples) && samples[i] != d.Hgrm.Sample {
				i++
			}
			if i == len(samples) {
				samples, curves = append(samples, d.Hgrm.Sample), append(curves, nil)
			}
			curves[i] = append(curves[i], NamedHgrm{Name: d.Name(), Percentiles: d.Hgrm.Percentiles})
		case saved.Mesh:
			meshes = append(meshes, d)
		}
	}
	// What failed first, then what to look at, then what passed; each in
	// the order of the files.
	sort.SliceStable(page.Verdicts, func(i, j int) bool { return page.Verdicts[i].Severity < page.Verdicts[j].Severity })
	plot := func(title string, draw func(io.Writer) error) {
		var b bytes.Buffer
		if err := draw(&b); err != nil {
			page.Plots = append(page.Plots, reportPlot{Title: title, Error: err.Error()})
			return
		}
		page.Plots = append(page.Plots, reportPlot{Title: title, SVG: inlineSVG(b.Bytes())})
	}
	if len(bwRuns) > 0 {
		plot("Bandwidth against message size", func(w io.Writer) error { return BandwidthPlot(w, SVG, ReportPlotSize, bwRuns) })
	}
	for i, c := range curves {
		title := "Latency by percentile"
		if samples[i] != "" {
			title += " (a sample: " + samples[i] + ")"
		}
		plot(title, func(w io.Writer) error { return LatencyPlot(w, SVG, ReportPlotSize, c) })
	}
	for _, d := range meshes {
		// Two matrices side by side, each with its title: the width of plot's.
		plot(docHeading(d), func(w io.Writer) error { return MeshHeatmap(w, SVG, DefaultPlotSize, d.Mesh) })
	}
	if len(ncclRuns) > 0 {
		plot("NCCL bus bandwidth against message size", func(w io.Writer) error { return NCCLBusBWPlot(w, SVG, ReportPlotSize, ncclRuns) })
	}
	return reportTemplate.Execute(w, page)
}

// docHeading is a document's heading in the report: what it is, then its
// file's name ("Mesh of 4 ranks (mesh.json)"), never the kind's word
// twice ("Mesh mesh") as when the name led.
func docHeading(d *saved.Document) string {
	file := filepath.Base(d.Path)
	switch d.Kind {
	case saved.Mesh:
		return fmt.Sprintf("Mesh of %d ranks (%s)", len(d.Mesh.Ranks), file)
	case saved.Doctor:
		if h := doctorHost(d.Doctor); h != "" {
			return fmt.Sprintf("Doctor on %s (%s)", h, file)
		}
		return fmt.Sprintf("Doctor, host not recorded (%s)", file)
	case saved.Health:
		if h := d.Health.Host; h != "" {
			return fmt.Sprintf("Health of %s: %s (%s)", h, d.Health.Status, file)
		}
		return fmt.Sprintf("Health: %s (%s)", d.Health.Status, file)
	}
	return file
}

// doctorHost is the host a doctor document describes ("" if it does not
// say).
func doctorHost(r *results.DoctorDocument) string {
	if r.Host == nil {
		return ""
	}
	return r.Host.Hostname
}

// hostName is a host for a note: its name, or that the document does
// not record one.
func hostName(h string) string {
	if h == "" {
		return "not recorded in the document"
	}
	return h
}

// verdictSource is the label in front of a document's verdicts: its name,
// and the host where the document records one (doctor, health).
func verdictSource(d *saved.Document) string {
	h := ""
	switch d.Kind {
	case saved.Doctor:
		h = doctorHost(d.Doctor)
	case saved.Health:
		h = d.Health.Host
	}
	if h != "" {
		return d.Name() + " (" + h + ")"
	}
	return d.Name()
}

// Num is a figure for a table: two decimals from 1 up (97.52), three
// significant figures below it (0.268, 0.0200, 0.00310), so that a small
// figure never reads 0.00. Zero is 0.00; NaN and infinities print as Go
// prints them.
func Num(v float64) string {
	a := math.Abs(v)
	if a >= 1 || a == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	prec := 2 - int(math.Floor(math.Log10(a)))
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if r, _ := strconv.ParseFloat(s, 64); math.Abs(r) >= 1 {
		s = strconv.FormatFloat(v, 'f', 2, 64) // 0.9996 rounds up to 1.00
	}
	return s
}

// inlineSVG is a gonum/plot SVG without its XML prolog and comment, to sit
// inside the page.
func inlineSVG(svg []byte) template.HTML {
	if i := bytes.Index(svg, []byte("<svg")); i >= 0 {
		svg = svg[i:]
	}
	return template.HTML(svg)
}

// DocumentVerdicts are a document's conclusions: what failed, what to
// look at, or that it is fine. Documents of figures alone (an .hgrm, a
// run that measured every size) have none.
func DocumentVerdicts(d *saved.Document) []Verdict {
	switch d.Kind {
	case saved.Run:
		return runVerdicts(d.Run)
	case saved.Mesh:
		var out []Verdict
		for _, mm := range d.Mesh.Mismatches {
			out = append(out, Verdict{SeverityFail, mismatchText(mm)})
		}
		return append(out, meshFindings(d.Mesh)...)
	case saved.NCCL:
		return ncclVerdicts(d.NCCL)
	case saved.Compare:
		return compareVerdicts(d.Compare.Summary, d.Compare.Rows, func(r compare.Row) (string, compare.Row) {
			return fmt.Sprintf("%s %s, %d QPs", d.Compare.Test, SizeName(r.Size), r.QPs), r
		})
	case saved.CompareMesh:
		return compareVerdicts(d.CompareMesh.Summary, d.CompareMesh.Rows, func(r compare.MeshRow) (string, compare.Row) {
			return r.From + " -> " + r.To, r.Row
		})
	case saved.Doctor:
		return doctorVerdicts(d.Doctor)
	case saved.Health:
		return healthVerdicts(d.Health)
	}
	return nil
}

func runVerdicts(r *results.Run) []Verdict {
	var out []Verdict
	switch {
	case r.Interrupted: // Ctrl-C: its error says how far it got
		out = append(out, Verdict{SeverityWarn, fmt.Sprintf("%s on %s was interrupted (Ctrl-C), its figures cover what ran: %s", r.Test, r.Device, r.Error)})
	case r.Error != "":
		out = append(out, Verdict{SeverityFail, fmt.Sprintf("%s on %s ended with an error: %s", r.Test, r.Device, r.Error)})
	}
	for _, res := range r.Results {
		if res.BadBytes != nil && *res.BadBytes > 0 {
			out = append(out, Verdict{SeverityFail, fmt.Sprintf("%s at %s: %d bytes wrong (--verify)", r.Test, SizeName(res.Size), *res.BadBytes)})
		}
	}
	return out
}

func ncclVerdicts(r *results.NCCLRun) []Verdict {
	var out []Verdict
	coll := r.Config.Collective
	if r.Error != "" {
		out = append(out, Verdict{SeverityFail, fmt.Sprintf("%s ended with an error: %s", coll, r.Error)})
	}
	if r.OutOfBounds > 0 {
		out = append(out, Verdict{SeverityFail, fmt.Sprintf("%s: %d out of bounds values (wrong results)", coll, r.OutOfBounds)})
	}
	if why := r.BelowMinBusBW(); why != "" {
		out = append(out, Verdict{SeverityFail, coll + ": " + why})
	}
	if s := r.Straggler; s != nil {
		for _, f := range s.Stragglers {
			how := "now and then"
			if f.Consistent {
				how = "steadily"
			}
			out = append(out, Verdict{SeverityFail, fmt.Sprintf("straggler: %s: %s %s, costing %.1f%% of the timed span: late in %d of %d iterations",
				f.Rank, f.Kind, how, f.CostPct, f.Late, f.Iterations)})
		}
		if len(s.Stragglers) == 0 && s.Ranks >= 2 && s.Iterations > 0 {
			out = append(out, Verdict{SeverityPass, fmt.Sprintf("no straggler over %d iterations of %d ranks", s.Iterations, s.Ranks)})
		}
	}
	said := false // the runner's warnings say it of their own
	for _, w := range r.Warnings {
		said = said || strings.Contains(w, "not a GPU measurement")
	}
	if r.NotGPU && !said {
		out = append(out, Verdict{SeverityWarn, "not a GPU measurement: the figures come from the CPU test library"})
	}
	for _, w := range r.Warnings {
		out = append(out, Verdict{SeverityWarn, w})
	}
	return out
}

func compareVerdicts[R any](s compare.Summary, rows []R, row func(R) (string, compare.Row)) []Verdict {
	var out []Verdict
	for _, x := range rows {
		where, r := row(x)
		sev := SeverityWarn
		switch {
		case r.Verdict == compare.Regression, r.Verdict == compare.Missing && !s.AllowMissing:
			sev = SeverityFail
		case r.Verdict != compare.Inconclusive:
			continue
		}
		base, cur, change, iv := compareCells(r)
		out = append(out, Verdict{sev, fmt.Sprintf("%s %s: base %s, new %s (%s, interval %s): %s", where, r.Metric, base, cur, change, iv, verdictText(r, s.AllowMissing))})
	}
	sev := SeverityPass
	if s.Regressions > 0 {
		sev = SeverityFail
	}
	out = append(out, Verdict{sev, fmt.Sprintf("%s, %d inconclusive, of %s (threshold %g%%, family-wise error rate %g%%)",
		Plural(s.Regressions, "regression"), s.Inconclusive, Plural(len(rows), "row"), s.ThresholdPct, s.FamilyWisePct)})
	return out
}

func doctorVerdicts(d *results.DoctorDocument) []Verdict {
	var out []Verdict
	for _, f := range d.Findings {
		if f.Status == results.DoctorFail {
			// The verdict's own mark says FAIL: the text does not again.
			out = append(out, Verdict{SeverityFail, findingSubject(f)})
		}
	}
	s := d.Summary
	sev := SeverityPass
	switch {
	case s.Fail > 0:
		sev = SeverityFail
	case s.Warn > 0:
		sev = SeverityWarn
	}
	return append(out, Verdict{sev, doctorCounts(s)})
}

// findingSubject is a finding as a verdict says it: the check, the
// subject, the value and the remedy (its status is the verdict's mark).
func findingSubject(f results.DoctorFinding) string {
	t := fmt.Sprintf("%s %s: %s", f.Check, f.Subject, f.Value)
	if f.Remedy != "" {
		t += " (→ " + f.Remedy + ")"
	}
	return t
}

func doctorCounts(s results.DoctorSummary) string {
	return fmt.Sprintf("%d pass, %d warn, %d fail, %d info, %d skip", s.Pass, s.Warn, s.Fail, s.Info, s.Skip)
}

func healthVerdicts(h *results.HealthDocument) []Verdict {
	var out []Verdict
	for _, f := range h.Faults {
		out = append(out, Verdict{SeverityFail, faultText("FAULT", f)})
	}
	for _, f := range h.Unchecked {
		out = append(out, Verdict{SeverityWarn, faultText("UNCHECKED", f)})
	}
	sev := SeverityPass
	switch results.HealthStatus(h.Exit) {
	case results.Unhealthy:
		sev = SeverityFail
	case results.CannotCheck:
		sev = SeverityWarn
	}
	return append(out, Verdict{sev, healthLine(h)})
}

// faultText is a fault as health's text shows it: what it is, its code,
// the check, the subject and the detail.
func faultText(what string, f results.HealthFault) string {
	t := fmt.Sprintf("%s %s %s", what, f.Code, f.Check)
	if f.Subject != "" {
		t += " " + f.Subject
	}
	return t + " " + f.Detail
}

func healthLine(h *results.HealthDocument) string {
	return fmt.Sprintf("%s (exit %d)", h.Status, h.Exit)
}

// documentTables are a document's figures as tables.
func documentTables(d *saved.Document) []reportTable {
	name := d.Name()
	switch d.Kind {
	case saved.Run:
		return []reportTable{runTable(name, d.Run)}
	case saved.Hgrm:
		return []reportTable{hgrmTable(name, d.Hgrm)}
	case saved.Mesh:
		var b strings.Builder
		MeshText(&b, d.Mesh)
		return []reportTable{{Title: docHeading(d), Pre: b.String()}}
	case saved.NCCL:
		return []reportTable{ncclTable(name, d.NCCL)}
	case saved.Compare:
		t := reportTable{Title: "Compare " + name + ": " + string(d.Compare.Test) + ", new against base", Notes: d.Compare.Notes,
			Head: []string{"size", "QPs", "metric", "base", "new", "change", "interval", "verdict"}}
		for _, r := range d.Compare.Rows {
			base, cur, change, iv := compareCells(r)
			t.Rows = append(t.Rows, []string{SizeName(r.Size), fmt.Sprint(r.QPs), string(r.Metric), base, cur, change, iv, verdictText(r, d.Compare.AllowMissing)})
		}
		return []reportTable{t}
	case saved.CompareMesh:
		t := reportTable{Title: "Compare " + name + ": mesh, new against base, each direction", Notes: d.CompareMesh.Notes,
			Head: []string{"from", "to", "metric", "base", "new", "change", "interval", "verdict"}}
		for _, r := range d.CompareMesh.Rows {
			base, cur, change, iv := compareCells(r.Row)
			t.Rows = append(t.Rows, []string{r.From, r.To, string(r.Metric), base, cur, change, iv, verdictText(r.Row, d.CompareMesh.AllowMissing)})
		}
		return []reportTable{t}
	case saved.Doctor:
		t := reportTable{Title: docHeading(d), Notes: []string{"host: " + hostName(doctorHost(d.Doctor)), doctorCounts(d.Doctor.Summary)},
			Head: []string{"status", "check", "subject", "value", "remedy", "source"}}
		for _, f := range d.Doctor.Findings {
			t.Rows = append(t.Rows, []string{string(f.Status), f.Check, f.Subject, f.Value, f.Remedy, f.Source})
		}
		return []reportTable{t}
	case saved.Health:
		// Documents before health recorded its host say so rather than
		// leave the reader to guess which node was judged.
		t := reportTable{Title: docHeading(d), Notes: []string{"host: " + hostName(d.Health.Host), healthLine(d.Health)}, Head: []string{"", "code", "check", "subject", "detail"}}
		if d.Health.Reason != "" {
			t.Notes = append(t.Notes, "drain reason: "+d.Health.Reason)
		}
		for _, f := range d.Health.Faults {
			t.Rows = append(t.Rows, []string{"FAULT", string(f.Code), f.Check, f.Subject, f.Detail})
		}
		for _, f := range d.Health.Unchecked {
			t.Rows = append(t.Rows, []string{"UNCHECKED", string(f.Code), f.Check, f.Subject, f.Detail})
		}
		for _, m := range d.Health.Measurements {
			detail := fmt.Sprintf("%.4g %s", m.Value, m.Unit)
			switch {
			case m.Err != "":
				detail = "failed: " + m.Err
			case m.Expected > 0:
				detail += fmt.Sprintf(" (expected %.4g from %s, at least %.0f%% of it)", m.Expected, m.Source, 100*m.MinShare)
			}
			t.Rows = append(t.Rows, []string{"MEASURED", "", m.Check, m.Subject, detail})
		}
		return []reportTable{t}
	}
	return nil
}

func runTable(name string, r *results.Run) reportTable {
	t := reportTable{Title: fmt.Sprintf("%s: %s on %s port %d (%s, %s)", name, r.Test, r.Device, r.Port, r.Transport, r.Mode), Notes: r.Notes}
	if r.Latency != "" {
		t.Notes = append(t.Notes, "a sample: "+r.Latency)
	}
	f2 := Num
	if r.Test.IsLatency() {
		t.Head = []string{"size", "QPs", "iterations", "min [µs]", "p50 [µs]", "p99 [µs]", "p99.9 [µs]", "max [µs]", "mean [µs]"}
	} else {
		t.Head = []string{"size", "QPs", "iterations", "BW average [Gb/s]", "BW burst [Gb/s]", "message rate [Mpps]"}
	}
	for _, res := range r.Results {
		row := []string{SizeName(res.Size) + partialMark(res), fmt.Sprint(res.QPs), fmt.Sprint(res.Iterations)}
		if r.Test.IsLatency() {
			if l := res.Lat; l != nil {
				row = append(row, f2(l.Min), f2(l.P50), f2(l.P99), f2(l.P99_9), f2(l.Max), f2(l.Mean))
			} else {
				row = append(row, "-", "-", "-", "-", "-", "-")
			}
		} else {
			row = append(row, f2(res.BWAvgGbps), f2(res.BWBurstGbps), Num(res.MsgRateMpps))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// hgrmQuantiles are the rows of an .hgrm's table.
var hgrmQuantiles = []struct {
	name string
	q    float64
}{{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p99.9", 0.999}, {"p99.99", 0.9999}, {"max", 1}}

func hgrmTable(name string, h *results.Hgrm) reportTable {
	t := reportTable{Title: name + ": latency percentiles (.hgrm)", Head: []string{"percentile", "value"}}
	if h.Sample != "" {
		t.Notes = []string{"a sample: " + h.Sample}
	}
	for _, hq := range hgrmQuantiles {
		t.Rows = append(t.Rows, []string{hq.name, fmt.Sprintf("%.3f", PercentileAt(h.Percentiles, hq.q))})
	}
	return t
}

// PercentileAt is the value at quantile q of a percentile distribution:
// the first line at or past q (the last line for q past them all).
func PercentileAt(ps []results.Percentile, q float64) float64 {
	for _, p := range ps {
		if p.Quantile >= q {
			return p.Value
		}
	}
	if len(ps) == 0 {
		return 0
	}
	return ps[len(ps)-1].Value
}

func ncclTable(name string, r *results.NCCLRun) reportTable {
	c := r.Config
	t := reportTable{Title: fmt.Sprintf("%s: ncclbench %s, %d ranks, NCCL %s", name, c.Collective, c.NRanks, r.NCCLVersion),
		Notes: []string{fmt.Sprintf("average bus bandwidth %.6g GB/s; %d out of bounds values", r.AvgBusBW, r.OutOfBounds)},
		Head: []string{"size [B]", "count", "type", "redop", "root", "time [µs]", "algbw [GB/s]", "busbw [GB/s]", "#wrong",
			"in-place time [µs]", "algbw [GB/s]", "busbw [GB/s]", "#wrong"}}
	if r.NotGPU {
		t.Notes = append(t.Notes, "not a GPU measurement: the CPU test library")
	}
	half := func(x results.NCCLResult) []string {
		wrong := "N/A"
		if x.Checked {
			wrong = fmt.Sprint(x.Wrong)
		}
		return []string{Num(x.TimeUs), Num(x.AlgBW), Num(x.BusBW), wrong}
	}
	for _, p := range r.Results {
		row := []string{fmt.Sprint(p.Size), fmt.Sprint(p.Count), p.Type, p.Redop, fmt.Sprint(p.Root)}
		row = append(append(row, half(p.OutOfPlace)...), half(p.InPlace)...)
		t.Rows = append(t.Rows, row)
	}
	return t
}

// ReportSummary writes a line per document: its headline figure or its
// verdict (what make demo ends with).
func ReportSummary(w io.Writer, docs []*saved.Document) error {
	var b strings.Builder
	for _, d := range docs {
		fmt.Fprintf(&b, "%s: %s\n", d.Name(), Headline(d))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Headline is a document in one line: a run's figure, a verdict's gist.
func Headline(d *saved.Document) string {
	worst := func(vs []Verdict) string {
		if len(vs) == 0 {
			return ""
		}
		first, fails := vs[0], 0
		for _, v := range vs {
			if v.Severity < first.Severity {
				first = v
			}
			if v.Severity == SeverityFail {
				fails++
			}
		}
		if fails > 1 {
			return fmt.Sprintf("%s, the first: %s", Plural(fails, "finding"), first.Text)
		}
		return first.Text
	}
	switch d.Kind {
	case saved.Run:
		return runHeadline(d.Run)
	case saved.Hgrm:
		ps := d.Hgrm.Percentiles
		return fmt.Sprintf("latency p50 %.2f us, p99 %.2f us, max %.2f us", PercentileAt(ps, 0.5), PercentileAt(ps, 0.99), PercentileAt(ps, 1))
	case saved.Mesh:
		line := fmt.Sprintf("%d ranks: %s", len(d.Mesh.Ranks), worst(DocumentVerdicts(d)))
		if !MeshClean(d.Mesh) {
			line += " (the mesh exits 1)"
		}
		return line
	case saved.NCCL:
		r := d.NCCL
		line := fmt.Sprintf("%s over %d ranks, average busbw %.3g GB/s", r.Config.Collective, r.Config.NRanks, r.AvgBusBW)
		if v := worst(ncclVerdicts(r)); v != "" {
			line += "; " + v
		}
		return line
	case saved.Health:
		if r := strings.TrimSpace(strings.TrimPrefix(d.Health.Reason, results.HealthReasonPrefix)); r != "" {
			return healthLine(d.Health) + ": " + r
		}
		return healthLine(d.Health)
	case saved.Doctor:
		return doctorCounts(d.Doctor.Summary)
	}
	vs := DocumentVerdicts(d) // compare: its summary is its last verdict
	if len(vs) == 0 {
		return ""
	}
	return vs[len(vs)-1].Text
}

func runHeadline(r *results.Run) string {
	where := fmt.Sprintf("%s on %s", r.Test, r.Device)
	if r.Error != "" {
		where += " (ended with an error)"
	}
	if len(r.Results) == 0 {
		return where + ": no results"
	}
	if r.Test.IsLatency() {
		for _, res := range r.Results {
			if l := res.Lat; l != nil {
				return fmt.Sprintf("%s, %s: p50 %.2f us, p99 %.2f us", where, SizeName(res.Size), l.P50, l.P99)
			}
		}
		return where + ": no latency figures"
	}
	best, last := r.Results[0], r.Results[0]
	for _, res := range r.Results {
		if res.BWAvgGbps > best.BWAvgGbps {
			best = res
		}
		if res.Size >= last.Size {
			last = res
		}
	}
	return fmt.Sprintf("%s: %.3g Gb/s at %s (the largest size), best %.3g Gb/s at %s", where, last.BWAvgGbps, SizeName(last.Size), best.BWAvgGbps, SizeName(best.Size))
}
