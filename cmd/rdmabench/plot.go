package main

import (
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
	size := render.PlotSize{Width: *width, Height: *height}
	var runs []render.NamedRun
	var curves []render.NamedHgrm
	var samples []string // what each curve's samples are, "" when its file does not say
	var meshes []*results.Mesh
	for _, path := range fs.Args() {
		name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if strings.EqualFold(filepath.Ext(path), ".hgrm") {
			h, err := readHgrmFile(path)
			if err != nil {
				return bad("%v", err)
			}
			// One chart, one kind of sample: a send-lat file holds half
			// round trips, its --rate files whole ones.
			for i, c := range curves {
				if h.Sample != "" && samples[i] != "" && h.Sample != samples[i] {
					return bad("%s and %s time different things (%q; %q): plot them apart", c.Name, name, samples[i], h.Sample)
				}
			}
			curves = append(curves, render.NamedHgrm{Name: name, Percentiles: h.Percentiles})
			samples = append(samples, h.Sample)
			continue
		}
		if isMesh, err := results.IsMeshFile(path); err != nil {
			return bad("%v", err)
		} else if isMesh {
			m, err := results.ReadMeshFile(path)
			if err != nil {
				return bad("%v", err)
			}
			meshes = append(meshes, m)
			continue
		}
		r, err := results.ReadFile(path)
		if err != nil {
			return bad("%v", err)
		}
		runs = append(runs, render.NamedRun{Name: name, Run: r})
	}
	kinds := 0
	for _, k := range []int{len(runs), len(curves), len(meshes)} {
		if k > 0 {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return bad("one plot per image: give result files, .hgrm files or one mesh document, not a mix")
	case len(meshes) > 1:
		return bad("one mesh per image: give one mesh document (rdmabench mesh --save)")
	}
	// Draw into memory first: a refusal (no data, bad size) leaves no file.
	var draw func(io.Writer) error
	if len(meshes) == 1 {
		draw = func(w io.Writer) error { return render.MeshHeatmap(w, format, size, meshes[0]) }
	} else if len(curves) > 0 {
		draw = func(w io.Writer) error { return render.LatencyPlot(w, format, size, curves) }
	} else {
		draw = func(w io.Writer) error { return render.BandwidthPlot(w, format, size, runs) }
	}
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
