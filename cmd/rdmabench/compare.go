package main

import (
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/compare"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	register("compare", "compare a run with a baseline (--save files): per-size change and a noise-aware verdict", runCompare)
}

// runCompare: exit 0 when nothing regressed, 1 on a regression, 2 on bad
// input (unreadable files, other tests, no size in common).
func runCompare(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("compare", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench compare [flags] BASE.json NEW.json")
		fmt.Fprintln(stderr, "  reads two result documents (--save or --json); with --repeat on both, verdicts use Welch's confidence interval")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	threshold := fs.Float64("threshold", 100*compare.DefaultOptions.Threshold, "without repeats: a change beyond this many percent counts")
	confidence := fs.Float64("confidence", 100*compare.DefaultOptions.Confidence, "with repeats: the confidence level of the interval, in percent")
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
	base, err := results.ReadFile(fs.Arg(0))
	if err != nil {
		return bad("%v", err)
	}
	cur, err := results.ReadFile(fs.Arg(1))
	if err != nil {
		return bad("%v", err)
	}
	rep, err := compare.Runs(base, cur, compare.Options{Threshold: *threshold / 100, Confidence: *confidence / 100})
	if err != nil {
		return bad("%v", err)
	}
	if *asJSON {
		err = render.CompareJSON(stdout, rep)
	} else {
		err = render.CompareText(stdout, rep)
	}
	if err != nil {
		return fail(stderr, "compare: %v", err)
	}
	if rep.Regressions > 0 {
		return 1
	}
	return 0
}
