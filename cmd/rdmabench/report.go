package main

import (
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	savedfile "github.com/rdmabench/rdmabench/saved" // compare_test.go has a saved()
)

func init() {
	register("report", "one self-contained HTML page of saved results (runs, .hgrm, meshes, ncclbench runs, compare, doctor, health): verdicts, plots, tables", runReport)
}

// runReport: exit 0 when the page is written, 1 when it cannot be
// written, 2 on bad input (a file it cannot read, say which).
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench report -o REPORT.html FILE...")
		fmt.Fprintln(stderr, "  reads saved results of any kind, told apart by their content: runs (--save, --json), .hgrm files (--hgrm),")
		fmt.Fprintln(stderr, "  mesh documents (mesh --save), ncclbench --save documents, compare --json, doctor --json and health --json;")
		fmt.Fprintln(stderr, "  writes one HTML page that needs no network: the verdicts first, then the plots (inline SVG), then the tables")
		fs.PrintDefaults()
	}
	out := fs.StringP("out", "o", "", "the HTML page to write (replaced atomically)")
	summary := fs.Bool("summary", false, "also print a line per file (its headline figure or verdict) and the page's path")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	switch {
	case *out == "":
		return usageErr(stderr, "report", "give -o REPORT.html")
	case fs.NArg() == 0:
		return usageErr(stderr, "report", "give the saved files to report on")
	}
	var docs []*savedfile.Document
	for _, path := range fs.Args() {
		d, err := savedfile.ReadFile(path)
		if err != nil {
			return usageErr(stderr, "report", "%v", err)
		}
		docs = append(docs, d)
	}
	if err := publish.WriteFileAtomic(*out, func(w io.Writer) error { return render.HTMLReport(w, docs) }); err != nil {
		return fail(stderr, "report: %v", err)
	}
	if *summary {
		if err := render.ReportSummary(stdout, docs); err != nil {
			return fail(stderr, "report: %v", err)
		}
	}
	fmt.Fprintf(stdout, "report: %s\n", *out)
	return 0
}
