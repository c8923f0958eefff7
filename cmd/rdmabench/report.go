package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	savedfile "github.com/rdmabench/rdmabench/saved" // compare_test.go has a saved()
)

func init() {
	register("report", "one self-contained HTML page of saved results (runs, .hgrm, meshes, ncclbench runs, compare, doctor, health): verdicts, plots, tables", runReport)
}

// runReport: exit 0 when the page is written, 1 when it cannot be
// written, 2 on bad input (a file it cannot read or of no kind it reads,
// say which; an -o that is not an HTML file name, a directory or an
// input). Plots and pages the tools write (PNG, SVG, HTML, told by their
// content) among several inputs are passed over with a note, so that a
// directory's results can be given as DIR/*.
func runReport(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("report", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench report -o REPORT.html FILE...")
		fmt.Fprintln(stderr, "  reads saved results of any kind, told apart by their content: runs (--save, --json), .hgrm files (--hgrm),")
		fmt.Fprintln(stderr, "  mesh documents (mesh --save), ncclbench --save documents, compare --json, doctor --json and health --json;")
		fmt.Fprintln(stderr, "  plots and pages (PNG, SVG, HTML) among several files are passed over with a note; any other file is refused")
		fmt.Fprintln(stderr, "  writes one HTML page that needs no network: the verdicts first, then the plots (inline SVG), then the tables")
		fs.PrintDefaults()
	}
	out := fs.StringP("out", "o", "", "the HTML page to write (replaced atomically; a name ending .html or .htm)")
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
	if st, err := os.Stat(*out); err == nil && st.IsDir() {
		return usageErr(stderr, "report", "-o %s: a directory; give the page's file name, such as %s", *out, filepath.Join(*out, "report.html"))
	}
	if ext := strings.ToLower(filepath.Ext(*out)); ext != ".html" && ext != ".htm" {
		return usageErr(stderr, "report", "-o %s: the report is an HTML page; give a name ending .html", *out)
	}
	// Each file's kind from its first bytes, before anything is read in
	// full: a file of no kind is refused however large it is.
	var inputs, skipped []string
	var firstSkip error
	for _, path := range fs.Args() {
		err := savedfile.Peek(path)
		var ns *savedfile.NotSavedError
		if errors.As(err, &ns) && ns.Ours && fs.NArg() > 1 {
			if firstSkip == nil {
				firstSkip = err
			}
			skipped = append(skipped, fmt.Sprintf("rdmabench report: passed over %s (%s)", path, ns.What))
			continue
		}
		if err != nil {
			return usageErr(stderr, "report", "%v", err)
		}
		inputs = append(inputs, path)
	}
	if len(inputs) == 0 {
		return usageErr(stderr, "report", "%v", firstSkip)
	}
	if err := publish.CheckOutputs([]publish.Output{{Flag: "-o", Path: *out}}, inputs); err != nil {
		return usageErr(stderr, "report", "%v", err)
	}
	var docs []*savedfile.Document
	for _, path := range inputs {
		d, err := savedfile.ReadFile(path)
		if err != nil {
			return usageErr(stderr, "report", "%v", err)
		}
		docs = append(docs, d)
	}
	for _, s := range skipped {
		fmt.Fprintln(stderr, s)
	}
	if err := publish.WriteFileAtomic(*out, func(w io.Writer) error { return render.HTMLReport(w, docs) }); err != nil {
		fail(stderr, "report: %v", err)
		return exitcode.Findings
	}
	if *summary {
		if err := render.ReportSummary(stdout, docs); err != nil {
			fail(stderr, "report: %v", err)
			return exitcode.Findings
		}
	}
	fmt.Fprintf(stdout, "report: %s\n", *out)
	return exitcode.OK
}
