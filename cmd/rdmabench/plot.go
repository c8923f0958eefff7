package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	register("plot", "draw bandwidth vs size from result files, latency percentile curves from .hgrm files, or a mesh's heat maps (PNG or SVG)", runPlot)
}

// runPlot: exit 0 when the plot is written, 1 when it cannot be written,
// 2 on bad input.
func runPlot(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plot", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench plot --out FILE.png|FILE.svg RESULT.json ... | RUN.hgrm ... | MESH.json")
		fmt.Fprintln(stderr, "  result files (--save, --json) give bandwidth against size, one line per file and QP count;")
		fmt.Fprintln(stderr, "  .hgrm files (--hgrm) give latency percentile curves on a 1/(1-p) axis;")
		fmt.Fprintln(stderr, "  a mesh document (rdmabench mesh --save) gives its bandwidth and latency heat maps, outliers ringed")
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "the image to write; its extension (.png or .svg) picks the format")
	width := fs.Int("width", render.DefaultPlotSize.Width, "width in pixels")
	height := fs.Int("height", render.DefaultPlotSize.Height, "height in pixels")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rdmabench plot: "+format+"\n", a...)
		return 2
	}
	format := render.PlotFormat(strings.TrimPrefix(strings.ToLower(filepath.Ext(*out)), "."))
	switch {
	case *out == "":
		return bad("give --out FILE.png or FILE.svg")
	case format != render.PNG && format != render.SVG:
		return bad("--out %s: the name must end in .png or .svg", *out)
	case fs.NArg() == 0:
		return bad("give result files (.json) or .hgrm files to plot")
	}
	if err := publish.CheckOutputs([]publish.Output{{Flag: "--out", Path: *out}}, fs.Args()); err != nil {
		return bad("%v", err)
	}
	var in plotInputs
	for _, path := range fs.Args() {
		if err := in.read(path); err != nil {
			return bad("%v", err)
		}
	}
	draw, err := in.drawer(format, render.PlotSize{Width: *width, Height: *height})
	if err != nil {
		return bad("%v", err)
	}
	// Draw into memory first: a refusal (no data, bad size) leaves no file.
	if err := draw(io.Discard); err != nil {
		return bad("%v", err)
	}
	if err := publish.WriteFileAtomic(*out, draw); err != nil {
		return fail(stderr, "plot: %v", err)
	}
	fmt.Fprintf(stdout, "rdmabench plot: wrote %s\n", *out)
	return 0
}

func readHgrmFile(path string) (*results.Hgrm, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := results.ReadHgrm(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// plotInputs are plot's files by kind: result files, .hgrm curves (with
// what each one's samples are, "" when its file does not say) and meshes.
type plotInputs struct {
	runs    []render.NamedRun
	curves  []render.NamedHgrm
	samples []string
	meshes  []*results.Mesh
}

// read adds the file at path to its kind.
func (in *plotInputs) read(path string) error {
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if strings.EqualFold(filepath.Ext(path), ".hgrm") {
		h, err := readHgrmFile(path)
		if err != nil {
			return err
		}
		// One chart, one kind of sample: a send-lat file holds half
		// round trips, its --rate files whole ones.
		for i, c := range in.curves {
			if h.Sample != "" && in.samples[i] != "" && h.Sample != in.samples[i] {
				return fmt.Errorf("%s and %s time different things (%q; %q): plot them apart", c.Name, name, in.samples[i], h.Sample)
			}
		}
		in.curves = append(in.curves, render.NamedHgrm{Name: name, Percentiles: h.Percentiles})
		in.samples = append(in.samples, h.Sample)
		return nil
	}
	if isMesh, err := results.IsMeshFile(path); err != nil {
		return err
	} else if isMesh {
		m, err := results.ReadMeshFile(path)
		if err != nil {
			return err
		}
		in.meshes = append(in.meshes, m)
		return nil
	}
	r, err := results.ReadFile(path)
	if err != nil {
		return err
	}
	in.runs = append(in.runs, render.NamedRun{Name: name, Run: r})
	return nil
}

// drawer is the one plot the inputs make; an error for a mix of kinds or
// several meshes.
func (in *plotInputs) drawer(format render.PlotFormat, size render.PlotSize) (func(io.Writer) error, error) {
	kinds := 0
	for _, k := range []int{len(in.runs), len(in.curves), len(in.meshes)} {
		if k > 0 {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return nil, errors.New("one plot per image: give result files, .hgrm files or one mesh document, not a mix")
	case len(in.meshes) > 1:
		return nil, errors.New("one mesh per image: give one mesh document (rdmabench mesh --save)")
	case len(in.meshes) == 1:
		return func(w io.Writer) error { return render.MeshHeatmap(w, format, size, in.meshes[0]) }, nil
	case len(in.curves) > 0:
		return func(w io.Writer) error { return render.LatencyPlot(w, format, size, in.curves) }, nil
	}
	return func(w io.Writer) error { return render.BandwidthPlot(w, format, size, in.runs) }, nil
}
