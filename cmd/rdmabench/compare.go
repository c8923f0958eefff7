package main

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/rdmabench/rdmabench/compare"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/render"
	savedfile "github.com/rdmabench/rdmabench/saved" // compare_test.go has a saved()
)

func init() {
	register("compare", "compare a run with a baseline (--save files): per-size change and a verdict at a family-wise error rate; two meshes: per direction; two ncclbench runs: per size", runCompare)
}

// runCompare: exit 0 when nothing regressed, 1 on a regression (a missing
// size or direction is one unless --allow-missing), 2 on bad input
// (unreadable files, documents of other kinds, a flag's value) or a
// comparison that cannot be made (other tests, a setting that changes
// what the figures mean, no size in common), 3 when a run is partial (an
// error or Ctrl-C ended it, or a size has fewer repeats than asked)
// unless --allow-partial.
func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("compare", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench compare [flags] BASE.json NEW.json   (two runs, two meshes, or two ncclbench runs)")
		fmt.Fprintln(stderr, "  reads two result documents (--save or --json); with --repeat (ncclbench: -I 1), verdicts read Welch's interval against --threshold,")
		fmt.Fprintln(stderr, "  at a family-wise error rate of 100 - --confidence percent for the whole compare; both flags are in percent (95, 5, or 0.5%)")
		fmt.Fprintln(stderr, "  exit 0: nothing regressed; 1: a regression; 2: bad input, or runs that do not compare; 3: a partial run (--allow-partial)")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	threshold := newPercentFlag(100 * compare.DefaultOptions.Threshold)
	fs.Var(threshold, "threshold", "practical threshold in percent (5 for 5%; under 1%, write the sign: 0.5%): a smaller change is never a regression, and \"same\" means shown within it")
	confidence := newPercentFlag(100 * compare.DefaultOptions.Confidence)
	fs.Var(confidence, "confidence", "confidence for the whole compare, in percent (95 for 95%, not 0.95): 100 minus the family-wise error rate")
	allowMissing := fs.Bool("allow-missing", false, "sizes or mesh directions the base measured and the new run did not are not regressions")
	allowPartial := fs.Bool("allow-partial", false, "compare a run (base or new) that ended with an error or Ctrl-C, or has fewer repeats than its --repeat asked at some size, with a note; without it such a run is refused (exit 3)")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	bad := func(format string, a ...any) int { return usageErr(stderr, "compare", format, a...) }
	th, err := threshold.check("threshold", 5, 1)
	if err != nil {
		return bad("%v", err)
	}
	// 1 is refused bare too: 1% or 100%?
	conf, err := confidence.check("confidence", 95, math.Nextafter(1, 2))
	if err != nil {
		return bad("%v", err)
	}
	if fs.NArg() != 2 {
		return bad("give two result files: BASE NEW")
	}
	opts := compare.Options{Threshold: th, Confidence: conf, AllowMissing: *allowMissing, AllowPartial: *allowPartial}
	var docs [2]*savedfile.Document
	for i, path := range fs.Args() {
		d, err := savedfile.ReadFile(path)
		if err != nil {
			return bad("%v", err)
		}
		docs[i] = d
	}
	base, cur := docs[0], docs[1]
	for _, d := range docs {
		switch d.Kind {
		case savedfile.Run, savedfile.Mesh, savedfile.NCCL:
		default:
			return bad("%s is %s: compare reads runs (--save, --json), meshes (mesh --save) and ncclbench runs (ncclbench --save)", d.Path, article(d.Kind))
		}
	}
	if base.Kind != cur.Kind {
		return bad("%s is %s and %s is %s: compare a run with a run, a mesh with a mesh, an ncclbench run with an ncclbench run",
			base.Path, article(base.Kind), cur.Path, article(cur.Kind))
	}
	var rep *compare.Report
	switch base.Kind {
	case savedfile.Mesh:
		r, err := compare.Meshes(base.Mesh, cur.Mesh, opts)
		if err != nil {
			return bad("%v", err)
		}
		r.Version = toolInfo()
		return showComparison(*asJSON, func() error { return render.CompareMeshJSON(stdout, r) },
			func() error { return render.CompareMeshText(stdout, r) }, r.Regressions, stderr)
	case savedfile.NCCL:
		rep, err = compare.NCCLRuns(base.NCCL, cur.NCCL, opts)
	default:
		rep, err = compare.Runs(base.Run, cur.Run, opts)
	}
	if errors.Is(err, compare.ErrPartial) {
		fmt.Fprintf(stderr, "rdmabench compare: %v\n", err)
		return exitcode.NotMeasured
	}
	if err != nil {
		return bad("%v", err)
	}
	rep.Version = toolInfo()
	return showComparison(*asJSON, func() error { return render.CompareJSON(stdout, rep) },
		func() error { return render.CompareText(stdout, rep) }, rep.Regressions, stderr)
}

// article names a kind of document with its article: "a run", "an
// ncclbench run", "an .hgrm file".
func article(k savedfile.Kind) string {
	switch k {
	case savedfile.Hgrm:
		return "an .hgrm file"
	case savedfile.NCCL:
		return "an " + k.String()
	case savedfile.Run, savedfile.Mesh:
		return "a " + k.String()
	}
	return "a " + k.String() + " document"
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
		return exitcode.Findings
	}
	return exitcode.OK
}
