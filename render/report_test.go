package render

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/saved"
)

// TestReportEscapes: strings from a file (a device, a host, a note, an
// error, a file name) come out as text, never as markup.
func TestReportEscapes(t *testing.T) {
	const evil = `<script>alert(1)</script><img src=http://x.invalid/a onerror=alert(2)>`
	runs := fixtureRuns()
	bw := *runs["bw"]
	bw.Device, bw.Notes, bw.Error = evil, []string{evil}, evil
	mesh := fixtureMesh()
	for i := range mesh.Ranks {
		mesh.Ranks[i].Host = evil
	}
	mesh.Error = evil
	nccl := &results.NCCLRun{Tool: results.NCCLTool, Schema: results.NCCLSchema, Config: results.NCCLConfig{Collective: evil, NRanks: 2},
		Warnings: []string{evil}, Error: evil,
		Results: []results.NCCLPoint{{Size: 1024, Type: evil, Redop: evil, OutOfPlace: results.NCCLResult{BusBW: 1}, InPlace: results.NCCLResult{BusBW: 1}}}}
	docs := []*saved.Document{
		{Path: evil + ".json", Kind: saved.Run, Run: &bw},
		{Path: "mesh.json", Kind: saved.Mesh, Mesh: mesh},
		{Path: "nccl.json", Kind: saved.NCCL, NCCL: nccl},
	}
	var b bytes.Buffer
	if err := HTMLReport(&b, docs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "<img"} {
		if strings.Contains(page, bad) {
			i := strings.Index(page, bad)
			t.Errorf("%q came through as markup: ...%s...", bad, page[max(0, i-80):min(len(page), i+80)])
		}
	}
	if n := strings.Count(page, "&lt;script&gt;alert(1)&lt;/script&gt;"); n < 8 {
		t.Errorf("the escaped text is there %d times, want it in the file list, verdicts, notes and tables (8 or more)", n)
	}
}

func TestPercentileAt(t *testing.T) {
	ps := []results.Percentile{{Value: 1, Quantile: 0}, {Value: 2, Quantile: 0.5}, {Value: 5, Quantile: 0.99}, {Value: 9, Quantile: 1}}
	for _, tc := range []struct{ q, want float64 }{{0, 1}, {0.3, 2}, {0.5, 2}, {0.9, 5}, {0.995, 9}, {1, 9}} {
		if got := PercentileAt(ps, tc.q); got != tc.want {
			t.Errorf("PercentileAt(%g) = %g, want %g", tc.q, got, tc.want)
		}
	}
	if got := PercentileAt(nil, 0.5); got != 0 {
		t.Errorf("no percentiles: %g, want 0", got)
	}
}

// TestReportTruncated: every saved fixture cut short anywhere is refused
// by saved.Decode or drawn into a page, never a panic.
func TestReportTruncated(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "cmd", "rdmabench", "testdata", "report", "*"))
	if err != nil || len(files) < 6 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	files = append(files, filepath.Join("testdata", "mesh.json"), filepath.Join("testdata", "lat.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for cut := 0; cut <= len(data); cut += max(1, len(data)/97) {
			d, err := saved.Decode(data[:cut])
			if err != nil {
				continue
			}
			d.Path = f
			if err := HTMLReport(io.Discard, []*saved.Document{d}); err != nil {
				t.Errorf("%s cut at %d: %v", f, cut, err)
			}
		}
		if d, err := saved.Decode(data); err != nil || HTMLReport(io.Discard, []*saved.Document{d}) != nil {
			t.Errorf("%s whole: %v", f, err)
		}
	}
}
