package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/exitcode"
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
		{"unreadable", []string{base, garbage}, 2, "garbage.json: not a JSON document"},
		{"missing", []string{base, filepath.Join(dir, "nope.json")}, 2, "no such file"},
		{"one file", []string{base}, 2, "give two result files"},
		{"bad threshold", []string{"--threshold", "0", base, same}, 2, "threshold"},
		{"meshes", []string{meshBase, meshBase}, 0, "0 regression(s)"},
		{"slower mesh", []string{meshBase, meshSlow}, 1, "n1               n2               bw_avg_gbps  100.000      80.000       -20.0%    (no noise)           regression"},
		{"mesh json", []string{"--json", meshBase, meshSlow}, 1, `"regressions": 2`},
		{"mesh and run", []string{meshBase, base}, 2, "mesh-base.json is a mesh and "},
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

// engineRun is one repeat as the engine returns it: write_bw at each size,
// errText set when the repeat ended with that error after the sizes given.
func engineRun(sizes []int, gbps float64, errText string) *results.Run {
	r := &results.Run{Schema: results.Schema, Test: results.WriteBW, Device: "mlx5_0", Mode: "client", Peer: "10.0.0.2",
		Sizes: []int{8, 4096, 65536, 1 << 20}, QPs: []int{1}, Error: errText}
	for _, s := range sizes {
		r.Results = append(r.Results, results.Result{Size: s, QPs: 1, Iterations: 5000, BWAvgGbps: gbps})
	}
	return r
}

// savedRepeats folds repeats the way the bench commands do (finishRepeats,
// asked 5) and saves the document as --save does.
func savedRepeats(t *testing.T, dir, name string, runs []*results.Run, err error) string {
	t.Helper()
	run, ferr := finishRepeats(runs, 5, err)
	if !errors.Is(ferr, err) || run == nil {
		t.Fatalf("finishRepeats: %v, %v", ferr, run)
	}
	return writeDoc(t, dir, name, func(w io.Writer) error { return render.JSON(w, run) })
}

// A run whose --repeat 5 ended with an error fails the gate (exit 3, one
// line naming the run and the sizes) unless --allow-partial, which
// compares it as before: the error noted, exit 0 or 1 by the verdicts.
func TestComparePartialRun(t *testing.T) {
	dir := t.TempDir()
	all := []int{8, 4096, 65536, 1 << 20}
	five := func(gbps float64, last *results.Run) []*results.Run {
		var runs []*results.Run
		for i := range 4 {
			runs = append(runs, engineRun(all, gbps+float64(i)/10, ""))
		}
		if last != nil {
			runs = append(runs, last)
		}
		return runs
	}
	base := savedRepeats(t, dir, "base.json", five(100, engineRun(all, 100.2, "")), nil)
	// The run: the 5th repeat's peer went quiet after the 4 KiB size.
	stall := errors.New("size 65536: peer 10.0.0.2 sent nothing for 2m0s")
	stalled := savedRepeats(t, dir, "stalled.json", five(100, engineRun(all[:2], 100.1, stall.Error())), stall)
	slowStalled := savedRepeats(t, dir, "slow-stalled.json", five(80, engineRun(all[:2], 80.1, stall.Error())), stall)
	// The 5th repeat could not connect: it returned no run, and only what
	// finishRepeats records says that anything went wrong.
	refused := errors.New("dial 10.0.0.2:18515: connection refused")
	unreached := savedRepeats(t, dir, "unreached.json", five(100, nil), refused)
	const stalledLine = "rdmabench compare: new run is partial: it ended with an error (size 65536: peer 10.0.0.2 sent nothing for 2m0s); sizes 64K, 1M have 4 of 5 repeats; --allow-partial compares it anyway\n"
	tests := []struct {
		name       string
		args       []string
		code       int
		stderr     string // exactly, for a refusal
		wantStdout []string
	}{
		{"whole runs", []string{base, base}, 0, "", []string{"0 regression(s)"}},
		{"stalled new run", []string{base, stalled}, exitcode.NotMeasured, stalledLine, nil},
		{"stalled, --json", []string{"--json", base, stalled}, exitcode.NotMeasured, stalledLine, nil},
		{"stalled base", []string{stalled, base}, exitcode.NotMeasured,
			"rdmabench compare: base run is partial: it ended with an error (size 65536: peer 10.0.0.2 sent nothing for 2m0s); sizes 64K, 1M have 4 of 5 repeats; --allow-partial compares it anyway\n", nil},
		{"a repeat that never ran", []string{base, unreached}, exitcode.NotMeasured,
			"rdmabench compare: new run is partial: it ended with an error (dial 10.0.0.2:18515: connection refused); sizes 8, 4K, 64K, 1M have 4 of 5 repeats; --allow-partial compares it anyway\n", nil},
		{"stalled, allowed", []string{"--allow-partial", base, stalled}, 0, "",
			[]string{"the new run ended with an error: size 65536: peer 10.0.0.2 sent nothing for 2m0s", "the new run has fewer repeats than asked: sizes 64K, 1M have 4 of 5 repeats", "0 regression(s)"}},
		{"slower and stalled, allowed", []string{"--allow-partial", base, slowStalled}, 1, "", []string{"regression", "the new run ended with an error"}},
		{"allowed, --json", []string{"--allow-partial", "--json", base, stalled}, 0, "", []string{`"allow_partial": true`, `"repeats_asked": 5`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := run(append([]string{"compare"}, tt.args...)...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tt.code, out, errOut)
			}
			if errOut != tt.stderr {
				t.Errorf("stderr %q\nwant   %q", errOut, tt.stderr)
			}
			if tt.stderr != "" && out != "" {
				t.Errorf("a refusal printed a comparison:\n%s", out)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(out, w) {
					t.Errorf("want %q in\n%s", w, out)
				}
			}
		})
	}
}
