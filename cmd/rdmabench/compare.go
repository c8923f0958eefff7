package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/compare"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	register("compare", "compare a run with a baseline (--save files): per-size change and a verdict at a family-wise error rate; two meshes: per direction", runCompare)
}

// exitPartial is compare's exit status for a partial run refused
// (compare.ErrPartial): apart from 1 (a regression) and 2 (bad input, no
// comparison), so that a CI gate can tell a measurement to run again from
// a slower one or a broken pipeline.
const exitPartial = 3

// runCompare: exit 0 when nothing regressed, 1 on a regression (a missing
// size or direction is one unless --allow-missing), 2 on bad input
// (unreadable files) or a comparison that cannot be made (other tests, a
// setting that changes what the figures mean, no size in common), 3
// (exitPartial) when a run is partial (an error or Ctrl-C ended it, or a
// size has fewer repeats than asked) unless --allow-partial.
func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("compare", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench compare [flags] BASE.json NEW.json   (two runs, or two meshes)")
		fmt.Fprintln(stderr, "  reads two result documents (--save or --json); with --repeat, verdicts read Welch's interval against --threshold,")
		fmt.Fprintln(stderr, "  at a family-wise error rate of 100 - --confidence percent for the whole compare")
		fmt.Fprintln(stderr, "  exit 0: nothing regressed; 1: a regression; 2: bad input, or runs that do not compare; 3: a partial run (--allow-partial)")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	threshold := fs.Float64("threshold", 100*compare.DefaultOptions.Threshold, "practical threshold in percent: a smaller change is never a regression, and \"same\" means shown within it")
	confidence := fs.Float64("confidence", 100*compare.DefaultOptions.Confidence, "confidence for the whole compare, in percent: 100 minus the family-wise error rate")
	allowMissing := fs.Bool("allow-missing", false, "sizes or mesh directions the base measured and the new run did not are not regressions")
	allowPartial := fs.Bool("allow-partial", false, "compare a run (base or new) that ended with an error or Ctrl-C, or has fewer repeats than its --repeat asked at some size, with a note; without it such a run is refused (exit 3)")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "rdmabench compare: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() != 2 {
		return bad("give two result files: BASE NEW")
	}
	opts := compare.Options{Threshold: *threshold / 100, Confidence: *confidence / 100, AllowMissing: *allowMissing, AllowPartial: *allowPartial}
	meshes := 0
	for _, path := range fs.Args() {
		isMesh, err := results.IsMeshFile(path)
		if err != nil {
			return bad("%v", err)
		}
		if isMesh {
			meshes++
		}
	}
	switch meshes {
	case 1:
		return bad("compare a mesh document with a mesh document, a run with a run")
	case 2:
		return compareMeshes(fs.Arg(0), fs.Arg(1), opts, *asJSON, stdout, stderr)
	}
	base, err := results.ReadFile(fs.Arg(0))
	if err != nil {
		return bad("%v", err)
	}
	cur, err := results.ReadFile(fs.Arg(1))
	if err != nil {
		return bad("%v", err)
	}
	rep, err := compare.Runs(base, cur, opts)
	if errors.Is(err, compare.ErrPartial) {
		fmt.Fprintf(stderr, "rdmabench compare: %v\n", err)
		return exitPartial
	}
	if err != nil {
		return bad("%v", err)
	}
	rep.Version = toolInfo()
	return showComparison(*asJSON, func() error { return render.CompareJSON(stdout, rep) },
		func() error { return render.CompareText(stdout, rep) }, rep.Regressions, stderr)
}

// showComparison prints a comparison as JSON or text: exit 1 on a
// regression, 0 otherwise.
func showComparison(asJSON bool, js, text func() error, regressions int, stderr io.Writer) int {
	show := text
	if asJSON {
		show = js
	}
	if err := show(); err != nil {
		return fail(stderr, "compare: %v", err)
	}
	if regressions > 0 {
		return 1
	}
	return 0
}

// compareMeshes compares two mesh documents direction by direction.
func compareMeshes(basePath, newPath string, opts compare.Options, asJSON bool, stdout, stderr io.Writer) int {
	bad := func(err error) int {
		fmt.Fprintf(stderr, "rdmabench compare: %v\n", err)
		return 2
	}
	base, err := results.ReadMeshFile(basePath)
	if err != nil {
		return bad(err)
	}
	cur, err := results.ReadMeshFile(newPath)
	if err != nil {
		return bad(err)
	}
	rep, err := compare.Meshes(base, cur, opts)
	if err != nil {
		return bad(err)
	}
	rep.Version = toolInfo()
	return showComparison(asJSON, func() error { return render.CompareMeshJSON(stdout, rep) },
		func() error { return render.CompareMeshText(stdout, rep) }, rep.Regressions, stderr)
}
