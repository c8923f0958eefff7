package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/results"
)

// The report's fixtures are documents the tools saved: make demo's
// write-bw.json, send-lat.hgrm and mesh.json (rxe, 2026-12-03), doctor and
// health --json on doctor/testdata/degraded-link (--expect-rate 200), and
// ncclbench --save of 4 ranks on the CPU test library with rank 2 slowed
// (RDMABENCH_FAKE_NCCL_SLOW=2:40, -I 1); render/testdata has a mesh with
// a culprit, a link, a mismatch and a dead rank.
var (
	reportDir    = filepath.Join("testdata", "report")
	renderDir    = filepath.Join("..", "..", "render", "testdata")
	demoDocs     = []string{"write-bw.json", "send-lat.hgrm", "health.json", "mesh.json"}
	demoDocPaths = func() []string {
		var p []string
		for _, d := range demoDocs {
			p = append(p, filepath.Join(reportDir, d))
		}
		return p
	}()
)

// report runs rdmabench report on files and returns the page.
func report(t *testing.T, files ...string) (page string, stdout string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.html")
	code, stdout, stderr := run(append([]string{"report", "-o", out}, files...)...)
	if code != 0 {
		t.Fatalf("report %v: exit %d: %s", files, code, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), stdout
}

// compareDoc writes compare --json of base and cur into dir.
func compareDoc(t *testing.T, dir, name, base, cur string) string {
	t.Helper()
	code, out, stderr := run("compare", "--json", base, cur)
	if code > 1 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReportKinds(t *testing.T) {
	dir := t.TempDir()
	// A regression by compare's own test helper: 10 Gb/s then 7, three
	// repeats each.
	regressed := compareDoc(t, dir, "regressed.json",
		saved(t, dir, "base.json", results.WriteBW, 10, 10.1, 9.9), saved(t, dir, "new.json", results.WriteBW, 7, 7.1, 6.9))
	meshCompare := compareDoc(t, dir, "mesh-compare.json", filepath.Join(reportDir, "mesh.json"), filepath.Join(reportDir, "mesh.json"))
	tests := []struct {
		name  string
		file  string
		kind  string
		wants []string // in the page, escaped as HTML
	}{
		{"bandwidth run", filepath.Join(reportDir, "write-bw.json"), "run",
			[]string{"write-bw: write_bw on rxe0 port 1 (RC, loopback)", "<th>BW average [Gb/s]</th>", "Bandwidth against message size</figcaption>\n<svg"}},
		{"latency run", filepath.Join(renderDir, "lat.json"), "run",
			[]string{"lat: send_lat on mlx5_1 port 1", "<th>p99 [µs]</th>", "send_lat on mlx5_1 was interrupted (Ctrl-C), its figures cover what ran: interrupted after 2 of 2 measurements"}},
		{".hgrm", filepath.Join(reportDir, "send-lat.hgrm"), "hgrm",
			[]string{"send-lat: latency percentiles (.hgrm)", "<td>p99</td><td>2451.455</td>", "Latency by percentile"}},
		{"clean mesh", filepath.Join(reportDir, "mesh.json"), "mesh",
			[]string{`<li class="ok"><span class="sev">OK</span> <span class="doc">mesh:</span> no outliers, no failures, no mismatches`, "<figcaption>Mesh of 4 ranks (mesh.json)</figcaption>"}},
		{"mesh with culprits", filepath.Join(renderDir, "mesh.json"), "mesh",
			[]string{`<li class="fail"><span class="sev">FAIL</span> <span class="doc">mesh:</span> LIKELY CULPRIT: rank 2 (node03), the node`,
				"LIKELY ONE DIRECTION: rank 1 (node02) -&gt; rank 3 (node04)", `<li class="warn"><span class="sev">WARN</span> <span class="doc">mesh:</span> inconclusive 3-&gt;0`}},
		{"ncclbench run", filepath.Join(reportDir, "ncclbench.json"), "ncclbench run",
			[]string{"straggler: rank 2 (vm GPU 2, pid 10122): late to enter steadily", "ncclbench: ncclbench all_reduce, 4 ranks", "NCCL bus bandwidth against message size"}},
		{"compare of runs", regressed, "compare",
			[]string{`<li class="fail"><span class="sev">FAIL</span> <span class="doc">regressed:</span> write_bw 4 KiB, 1 QPs bw_avg_gbps: base 10.000, new 7.000`,
				"1 regression, 0 inconclusive, of 1 row", "<td>regression</td>"}},
		{"compare of meshes", meshCompare, "mesh compare",
			[]string{"0 regressions, 0 inconclusive, of", "mesh, new against base, each direction"}},
		{"doctor", filepath.Join(reportDir, "doctor.json"), "doctor",
			[]string{`<span class="doc">doctor:</span> port.rate mlx5_2:1: 100 Gb/sec (4X EDR), expected 200 Gb/sec`, "38 pass, 2 warn, 1 fail, 5 info, 3 skip"}},
		{"health", filepath.Join(reportDir, "health.json"), "health",
			[]string{`<span class="doc">health:</span> FAULT RB111 port.rate mlx5_2:1 100 Gb/sec (4X EDR), expected 200 Gb/sec`, "unhealthy (exit 1)", "<td>FAULT</td><td>RB111</td>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			page, _ := report(t, tc.file)
			if want := "<code>" + tc.file + "</code> (" + tc.kind + ")"; !strings.Contains(page, want) {
				t.Errorf("the page does not say the file's kind: no %q", want)
			}
			for _, w := range tc.wants {
				if !strings.Contains(page, w) {
					t.Errorf("no %q in the page", w)
				}
			}
		})
	}
}

func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := filepath.Join(reportDir, "write-bw.json")
	tests := map[string]struct {
		file string
		want string
	}{
		"missing":          {filepath.Join(dir, "nope.json"), ": no such file or directory"},
		"empty":            {write("empty.json", ""), "empty: not a saved document"},
		"not JSON":         {write("notes.txt", "hello world\n"), "a file of no kind rdmabench reads (it reads JSON documents"},
		"comments only":    {write("comments.hgrm", "# nothing here\n"), "a file of no kind rdmabench reads"},
		"JSON of no kind":  {write("other.json", `{"name": "x"}`), "a JSON document of no kind rdmabench reads"},
		"truncated":        {write("cut.json", `{"schema": 2, "test": "write_bw", "results": [`), "not a JSON document"},
		"newer run schema": {write("new.json", `{"schema": 99, "test": "write_bw", "results": []}`), "schema 99 is newer"},
		"unknown test":     {write("test.json", `{"schema": 2, "test": "fast_bw", "results": []}`), `unknown test "fast_bw"`},
		"bad mesh":         {write("mesh.json", `{"kind": "rdmabench-mesh", "schema": 3, "ranks": [], "pairs": [{"from": 0, "to": 1}]}`), "outside its 0 ranks"},
		"bad ncclbench":    {write("nccl.json", `{"tool": "ncclbench", "schema": 7}`), "ncclbench schema 7 is newer"},
		"bad doctor":       {write("doctor.json", `{"schema": 1, "findings": 3, "summary": {}}`), "not a doctor document"},
		"bad health":       {write("health.json", `{"schema": 2, "status": "healthy", "exit": 0, "faults": []}`), "health schema 2"},
		"no percentiles":   {write("empty.hgrm", "       Value     Percentile TotalCount 1/(1-Percentile)\n\n"), "no percentile lines"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(dir, "report.html")
			code, _, stderr := run("report", "-o", out, good, tc.file)
			if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "rdmabench report: "+tc.file) || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q: want exit 2 and one line naming %s with %q", code, stderr, tc.file, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("a page was written for bad input")
			}
		})
	}
	for _, args := range [][]string{{"report", good}, {"report", "-o", filepath.Join(dir, "r.html")}, {"report", "--nope"}} {
		if code, _, stderr := run(args...); code != 2 || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q: want exit 2 and one line", args, code, stderr)
		}
	}
}

// TestReportGolden holds make demo's page to testdata/report.golden.html.
func TestReportGolden(t *testing.T) {
	page, _ := report(t, demoDocPaths...)
	golden.Check(t, "report.golden.html", []byte(page))
}

func TestReportVerdictsFirst(t *testing.T) {
	page, _ := report(t, append(demoDocPaths, filepath.Join(renderDir, "mesh.json"), filepath.Join(reportDir, "ncclbench.json"))...)
	verdict := strings.Index(page, `<li class="fail">`)
	plot, table := strings.Index(page, "<svg"), strings.Index(page, "<table")
	if verdict < 0 || plot < 0 || table < 0 || !(verdict < plot && plot < table) {
		t.Errorf("first FAIL verdict at %d, first plot at %d, first table at %d: want the verdicts, then the plots, then the tables", verdict, plot, table)
	}
	// The FAILs come before the WARNs and the OKs, whichever file they came from.
	if w, ok := strings.Index(page, `<li class="warn">`), strings.Index(page, `<li class="ok">`); w < verdict || ok < w || strings.LastIndex(page, `<li class="fail">`) > w {
		t.Errorf("verdicts out of order: fail at %d, warn at %d, ok at %d", verdict, w, ok)
	}
}

// reportURL matches every address a page may load: src and href
// attributes (xlink:href too), CSS url() and @import.
var reportURL = regexp.MustCompile(`(?i)(?:\bsrc|href)\s*=\s*["']?([^"'\s>]*)|url\(\s*["']?([^"')]*)|@import`)

func TestReportNeedsNoNetwork(t *testing.T) {
	page, _ := report(t, append(demoDocPaths, filepath.Join(reportDir, "ncclbench.json"), filepath.Join(reportDir, "doctor.json"))...)
	n := 0
	for _, m := range reportURL.FindAllStringSubmatch(page, -1) {
		n++
		addr := m[1] + m[2]
		if m[0] == "@import" || !strings.HasPrefix(addr, "data:") && !strings.HasPrefix(addr, "#") {
			t.Errorf("the page loads %q (%s): want only data: and #fragments", addr, m[0])
		}
	}
	if n == 0 {
		t.Errorf("no src or href at all: the heat map's image (data:) should be one")
	}
	for _, bad := range []string{"<script", "<link", "<iframe", "<object", "<embed"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page has %s", bad)
		}
	}
}

func TestReportSummary(t *testing.T) {
	out := filepath.Join(t.TempDir(), "report.html")
	code, stdout, stderr := run(append([]string{"report", "--summary", "-o", out}, demoDocPaths...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := []string{
		"write-bw: write_bw on rxe0: 0.268 Gb/s at 8 MiB (the largest size), best 0.351 Gb/s at 64 KiB",
		"send-lat: latency p50 99.78 us, p99 2451.45 us, max 4935.68 us",
		"health: unhealthy (exit 1): RB111 mlx5_2:1 100 Gb/sec (4X EDR), expected 200 Gb/sec",
		"mesh: 4 ranks: no outliers, no failures, no mismatches",
		"report: " + out,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("summary:\n%s\nwant:\n%s", stdout, strings.Join(want, "\n"))
	}
}
