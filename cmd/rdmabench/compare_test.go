package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// saved writes a synthetic --save file: write_bw at 4 KiB, one value per
// repeat.
func saved(t *testing.T, dir, name string, test results.Test, gbps ...float64) string {
	t.Helper()
	res := results.Result{Size: 4096, QPs: 1}
	for _, g := range gbps {
		res.BWAvgGbps += g / float64(len(gbps))
		if len(gbps) > 1 {
			res.Repeats = append(res.Repeats, results.Figures{BWAvgGbps: g})
		}
	}
	r := &results.Run{Test: test, Device: "rxe0", Results: []results.Result{res}}
	if len(gbps) > 1 {
		r.Repeat = len(gbps)
	}
	return writeDoc(t, dir, name, func(w io.Writer) error { return render.JSON(w, r) })
}

// writeDoc writes a document into dir/name and returns the path.
func writeDoc(t *testing.T, dir, name string, write func(io.Writer) error) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := write(f); err != nil {
		t.Fatal(err)
	}
	return p
}

// savedMesh writes a 2-rank mesh document, n1 and n2, both directions at
// gbps.
func savedMesh(t *testing.T, dir, name string, gbps float64) string {
	t.Helper()
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, BWSize: 65536, LatSize: 8,
		Ranks: []results.MeshRank{{Rank: 0, Host: "n1"}, {Rank: 1, Host: "n2"}}}
	for _, d := range [][2]int{{0, 1}, {1, 0}} {
		m.Pairs = append(m.Pairs, results.MeshPair{From: d[0], To: d[1], MeshFigures: results.MeshFigures{BWGbps: gbps, LatP50us: 2, LatP99us: 3}})
	}
	return writeDoc(t, dir, name, func(w io.Writer) error { return render.MeshJSON(w, m) })
}

func TestCompareCommand(t *testing.T) {
	dir := t.TempDir()
	base := saved(t, dir, "base.json", results.WriteBW, 100, 101, 99, 100)
	same := saved(t, dir, "same.json", results.WriteBW, 100.5, 99.5, 100, 101)
	slower := saved(t, dir, "slower.json", results.WriteBW, 90, 91, 89, 90)
	noisy := saved(t, dir, "noisy.json", results.WriteBW, 70, 110, 85, 95)
	single := saved(t, dir, "single.json", results.WriteBW, 97)
	single2 := saved(t, dir, "single2.json", results.WriteBW, 98)
	lat := saved(t, dir, "lat.json", results.SendLat, 1)
	// The base with a second size the new runs lack.
	twoSizes := writeDoc(t, dir, "two-sizes.json", func(w io.Writer) error {
		r := &results.Run{Test: results.WriteBW, Device: "rxe0", Results: []results.Result{{Size: 4096, QPs: 1, BWAvgGbps: 97}, {Size: 8192, QPs: 1, BWAvgGbps: 99}}}
		return render.JSON(w, r)
	})
	bidir := writeDoc(t, dir, "bidir.json", func(w io.Writer) error {
		r := &results.Run{Test: results.WriteBW, Device: "rxe0", Bidirectional: true, Results: []results.Result{{Size: 4096, QPs: 1, BWAvgGbps: 180}}}
		return render.JSON(w, r)
	})
	meshBase := savedMesh(t, dir, "mesh-base.json", 100)
	meshSlow := savedMesh(t, dir, "mesh-slow.json", 80)
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("{not json"), 0o644)
	tests := []struct {
		name string
		args []string
		code int
		want string // in stdout, or stderr when the code is 2
	}{
		{"no change", []string{base, same}, 0, "0 regression(s) (0 missing, counted), 0 inconclusive"},
		{"family-wise rate stated", []string{base, same}, 0, "verdicts: 1 noise-aware: family-wise error rate 5% for the whole compare"},
		{"regression", []string{base, slower}, 1, "regression"},
		{"inconclusive passes", []string{base, noisy}, 0, "inconclusive (about"},
		{"base's repeats judge a single run", []string{base, single}, 0, "[-5.1%, -0.9%]       inconclusive (repeat the new run too)"},
		{"not noise-aware", []string{single, single2}, 0, "1 NOT noise-aware"},
		{"tighter threshold", []string{"--threshold", "2", base, single}, 1, "within the 2% threshold is never a regression"},
		{"json", []string{"--json", base, slower}, 1, `"regressions": 1`},
		{"a size missing", []string{twoSizes, single}, 1, "missing: regression"},
		{"a size missing, allowed", []string{"--allow-missing", twoSizes, single}, 0, "missing (allowed)"},
		{"other test", []string{base, lat}, 2, "the base ran write_bw and the new run send_lat"},
		{"bidirectional against not", []string{bidir, single}, 2, "bidirectional (-b) is on in the base and off in the new run"},
		{"unreadable", []string{base, garbage}, 2, "garbage.json: not a result document"},
		{"missing", []string{base, filepath.Join(dir, "nope.json")}, 2, "no such file"},
		{"one file", []string{base}, 2, "give two result files"},
		{"bad threshold", []string{"--threshold", "0", base, same}, 2, "threshold"},
		{"meshes", []string{meshBase, meshBase}, 0, "0 regression(s)"},
		{"slower mesh", []string{meshBase, meshSlow}, 1, "n1               n2               bw_avg_gbps  100.000      80.000       -20.0%    (no noise)           regression"},
		{"mesh json", []string{"--json", meshBase, meshSlow}, 1, `"regressions": 2`},
		{"mesh and run", []string{meshBase, base}, 2, "a mesh document with a mesh document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(append([]string{"compare"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, out, errOut)
			}
			got := out
			if code == 2 {
				got = errOut
				if strings.Count(errOut, "\n") != 1 {
					t.Errorf("not one line: %q", errOut)
				}
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("want %q in\n%s", tt.want, got)
			}
			if strings.HasPrefix(tt.name, "json") && !json.Valid([]byte(out)) {
				t.Error("--json is not JSON")
			}
		})
	}
}
