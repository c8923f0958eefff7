package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/exitcode"
)

// badFiles are the fixtures of the bad-input rows (testdata/badinput):
// cr-run.json is write-bw --loopback -s 8 -n 100 --save on the fake NIC,
// cr-lat.json and cr-lat.hgrm send-lat's, cr-plot.png rdmabench plot of
// cr-run.json, cr-mesh.json make demo's mesh (testdata/report), cr-nccl.json
// ncclbench all_reduce -g 4 -b 8 -e 1K -f 4 -I 1 -K 2 -n 20 --save on the
// fake NCCL (RDMABENCH_FAKE_NCCL_GPUS=4), cr-nccl-slow.json the same with
// every time 1.5 times longer and every bandwidth 1.5 times smaller.
var badFiles = filepath.Join("testdata", "badinput", "files")

func badFile(name string) string { return filepath.Join(badFiles, name) }

// crOneLine checks a bad-input refusal: the exit status and one line on
// stderr that holds want.
func crOneLine(t *testing.T, code int, stderr string, wantCode int, want string) {
	t.Helper()
	if code != wantCode || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q: want exit %d and one line with %q", code, stderr, wantCode, want)
	}
}

// TestCompareUnits: --confidence and --threshold are percents; a value
// that reads as a fraction, or is out of range, is refused as typed. They
// were rescaled silently: --confidence 0.95 ran at 0.95% (exit 0), and
// --confidence 150 said "1.5 outside (0, 1)".
func TestCompareUnits(t *testing.T) {
	run1 := badFile("cr-run.json")
	refused := []struct {
		args []string
		want string
	}{
		{[]string{"--confidence", "150"}, "--confidence 150: outside (0, 100); give a percent such as 95"},
		{[]string{"--confidence", "0.95"}, "--confidence 0.95: the unit is the percent, give one such as 95"},
		{[]string{"--confidence", "1"}, "--confidence 1: the unit is the percent"},
		{[]string{"--confidence", "95.0x"}, "--confidence 95.0x: not a number"},
		{[]string{"--confidence", "NaN"}, "--confidence NaN: not a number"},
		{[]string{"--threshold", "0.05"}, "--threshold 0.05: the unit is the percent, give one such as 5 (or write 0.05% if 0.05 percent is meant)"},
		{[]string{"--threshold", "0"}, "--threshold 0: outside (0, 100)"},
		{[]string{"--threshold", "100"}, "--threshold 100: outside (0, 100)"},
		{[]string{"--threshold=-5"}, "--threshold -5: outside (0, 100)"},
	}
	for _, tc := range refused {
		code, _, stderr := run(append(append([]string{"compare"}, tc.args...), run1, run1)...)
		crOneLine(t, code, stderr, exitcode.BadInput, tc.want)
	}
	accepted := []struct {
		args []string
		want string
	}{
		{[]string{"--threshold", "0.5%"}, "within the 0.5% threshold"},
		{[]string{"--threshold", "1"}, "within the 1% threshold"},
		{[]string{"--threshold", "12.5"}, "within the 12.5% threshold"},
		{[]string{"--confidence", "99%", "--json"}, `"family_wise_pct": 1`},
		{[]string{"--confidence", "1.5%", "--json"}, `"family_wise_pct": 98.5`},
	}
	for _, tc := range accepted {
		code, out, stderr := run(append(append([]string{"compare"}, tc.args...), run1, run1)...)
		if code != exitcode.OK || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want 0 and %q in\n%s%s", tc.args, code, tc.want, out, stderr)
		}
	}
}

// TestCompareKinds: compare reads documents by their content; two of
// other kinds are one line naming both kinds (it said `unknown test ""`
// for an ncclbench run), a kind compare does not read names it.
func TestCompareKinds(t *testing.T) {
	tests := []struct {
		base, cur string
		want      string
	}{
		{"cr-run.json", "cr-nccl.json", "cr-run.json is a run and " + badFile("cr-nccl.json") + " is an ncclbench run: compare a run with a run"},
		{"cr-nccl.json", "cr-mesh.json", "cr-nccl.json is an ncclbench run and " + badFile("cr-mesh.json") + " is a mesh"},
		{"cr-mesh.json", "cr-run.json", "is a mesh and " + badFile("cr-run.json") + " is a run"},
		{"cr-lat.hgrm", "cr-lat.hgrm", "cr-lat.hgrm is an .hgrm file: compare reads runs"},
		{"cr-run.json", "cr-plot.png", "cr-plot.png: a PNG image, not a saved result"},
		{"cr-run.json", "cr-lat.json", "the base ran write_bw and the new run send_lat"},
		{"cr-run.json", "nope.json", "nope.json: no such file or directory"},
	}
	for _, tc := range tests {
		code, _, stderr := run("compare", badFile(tc.base), badFile(tc.cur))
		crOneLine(t, code, stderr, exitcode.BadInput, tc.want)
	}
	dir := t.TempDir()
	compareDocPath := compareDoc(t, dir, "cmp.json", badFile("cr-run.json"), badFile("cr-run.json"))
	code, _, stderr := run("compare", compareDocPath, compareDocPath)
	crOneLine(t, code, stderr, exitcode.BadInput, "cmp.json is a compare document: compare reads runs")
}

// TestCompareNCCL: two ncclbench --save documents compare per size, bus
// bandwidth and time, noise-aware from -I 1's iterations; a regression
// exits 1. docs/ncclbench.md called --save "a baseline for compare", and
// compare refused it (`unknown test ""`).
func TestCompareNCCL(t *testing.T) {
	base, slow := badFile("cr-nccl.json"), badFile("cr-nccl-slow.json")
	code, out, stderr := run("compare", base, base)
	if code != exitcode.OK || !strings.Contains(out, "compare ncclbench all_reduce: new against base") ||
		!strings.Contains(out, "0 regression(s)") || !strings.Contains(out, "16 noise-aware") {
		t.Errorf("same run: exit %d\n%s%s", code, out, stderr)
	}
	code, out, stderr = run("compare", base, slow)
	for _, want := range []string{" 512          time_us              351.457      527.185      +50.0%", "busbw_gbps", "busbw_in_place_gbps", "time_in_place_us", "16 regression(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if code != exitcode.Findings {
		t.Errorf("slower run: exit %d, want 1\n%s", code, stderr)
	}
	// An improvement is not a regression; a bigger threshold hides it.
	if code, out, _ := run("compare", slow, base); code != exitcode.OK || !strings.Contains(out, "improvement") {
		t.Errorf("faster run: exit %d\n%s", code, out)
	}
	if code, out, _ := run("compare", "--threshold", "60", base, slow); code != exitcode.OK {
		t.Errorf("--threshold 60: exit %d\n%s", code, out)
	}
	// Another collective, a run that ended with an error.
	dir := t.TempDir()
	data, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "bcast.json")
	os.WriteFile(other, bytes.Replace(data, []byte(`"collective": "all_reduce"`), []byte(`"collective": "broadcast"`), 1), 0o644)
	code, _, stderr = run("compare", base, other)
	crOneLine(t, code, stderr, exitcode.BadInput, "the base ran all_reduce and the new run broadcast")
	failed := filepath.Join(dir, "failed.json")
	os.WriteFile(failed, bytes.Replace(data, []byte(`"tool": "ncclbench",`), []byte(`"tool": "ncclbench", "error": "rank 2: NCCL error",`), 1), 0o644)
	code, _, stderr = run("compare", base, failed)
	crOneLine(t, code, stderr, exitcode.NotMeasured, "rank 2: NCCL error")
	if code, out, _ := run("compare", "--allow-partial", base, failed); code != exitcode.OK || !strings.Contains(out, "rank 2: NCCL error") {
		t.Errorf("--allow-partial: exit %d\n%s", code, out)
	}
}

// TestReportOutputs: -o is checked before anything is read: an input
// (report -o self.json self.json replaced the baseline with HTML), a
// name that is not an HTML page's, a directory ("rename ... file exists").
func TestReportOutputs(t *testing.T) {
	dir := t.TempDir()
	copyFile := func(from, name string) string {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	self := copyFile(badFile("cr-run.json"), "self.json")
	selfHTML := copyFile(badFile("cr-run.json"), "self.html")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-o", self, self}, "-o " + self + ": the report is an HTML page; give a name ending .html"},
		{[]string{"-o", selfHTML, selfHTML}, "-o " + selfHTML + ": is also an input"},
		{[]string{"-o", dir, self}, "-o " + dir + ": a directory; give the page's file name, such as " + filepath.Join(dir, "report.html")},
		{[]string{"-o", filepath.Join(dir, "r.txt"), self}, "give a name ending .html"},
		{[]string{"-o", filepath.Join(dir, "no", "r.html"), self}, "directory " + filepath.Join(dir, "no") + " does not exist"},
	}
	for _, tc := range tests {
		code, _, stderr := run(append([]string{"report"}, tc.args...)...)
		crOneLine(t, code, stderr, exitcode.BadInput, tc.want)
	}
	for _, p := range []string{self, selfHTML} {
		if data, _ := os.ReadFile(p); !bytes.HasPrefix(data, []byte("{")) {
			t.Errorf("%s was replaced", p)
		}
	}
	if code, _, stderr := run("report", "-o", filepath.Join(dir, "r.htm"), self); code != exitcode.OK {
		t.Errorf(".htm: exit %d: %s", code, stderr)
	}
}

// TestReportKindsByContent: a file of no known kind is one line naming it
// and the kinds read (a PNG or an NCCL log was read as an .hgrm: "line 1:
// 1 fields, want 4"); the plots and pages the tools write are passed over
// among several inputs, so that `report -o r.html build/demo/*` works
// after make demo.
func TestReportKindsByContent(t *testing.T) {
	dir := t.TempDir()
	demo := filepath.Join(dir, "demo")
	os.Mkdir(demo, 0o755)
	for _, name := range demoDocs {
		data, err := os.ReadFile(filepath.Join(reportDir, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(demo, name), data, 0o644)
	}
	png, _ := os.ReadFile(badFile("cr-plot.png"))
	os.WriteFile(filepath.Join(demo, "write-bw.png"), png, 0o644)
	if code, _, stderr := run("plot", "--out", filepath.Join(demo, "mesh.svg"), filepath.Join(demo, "mesh.json")); code != 0 {
		t.Fatalf("plot: %s", stderr)
	}
	// The page of an earlier report, in the directory: replaced.
	if code, _, stderr := run("report", "-o", filepath.Join(demo, "report.html"), filepath.Join(demo, "write-bw.json")); code != 0 {
		t.Fatalf("report: %s", stderr)
	}
	glob, _ := filepath.Glob(filepath.Join(demo, "*"))
	for _, out := range []string{filepath.Join(dir, "r.html"), filepath.Join(demo, "report.html")} {
		code, stdout, stderr := run(append([]string{"report", "-o", out}, glob...)...)
		if code != exitcode.OK || !strings.Contains(stdout, "report: "+out) {
			t.Fatalf("report over %s/*: exit %d\n%s%s", demo, code, stdout, stderr)
		}
		for _, want := range []string{"passed over " + filepath.Join(demo, "write-bw.png") + " (a PNG image)",
			"passed over " + filepath.Join(demo, "mesh.svg") + " (an SVG image)", "passed over " + filepath.Join(demo, "report.html") + " (an HTML page)"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("no %q in %q", want, stderr)
			}
		}
		page, _ := os.ReadFile(out)
		for _, name := range demoDocs {
			if !strings.Contains(string(page), "<code>"+filepath.Join(demo, name)+"</code>") {
				t.Errorf("%s is not in the page", name)
			}
		}
	}
	// A log among them is refused, naming it; so is a plot alone.
	log := filepath.Join(demo, "nccl.log")
	os.WriteFile(log, []byte("node1:123:123 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"), 0o644)
	code, _, stderr := run("report", "-o", filepath.Join(dir, "r.html"), filepath.Join(demo, "write-bw.json"), log)
	crOneLine(t, code, stderr, exitcode.BadInput, log+": a file of no kind rdmabench reads (it reads JSON documents of runs, meshes, ncclbench runs, compare, doctor and health, and .hgrm files)")
	code, _, stderr = run("report", "-o", filepath.Join(dir, "r.html"), filepath.Join(demo, "write-bw.png"))
	crOneLine(t, code, stderr, exitcode.BadInput, "write-bw.png: a PNG image, not a saved result")
	code, _, stderr = run("report", "-o", filepath.Join(dir, "r.html"), demo)
	crOneLine(t, code, stderr, exitcode.BadInput, demo+": a directory, not a saved document (give the files in it: "+filepath.Join(demo, "*")+")")
}
