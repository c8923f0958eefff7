package saved

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The documents are ones the tools saved (cmd/rdmabench/testdata/report:
// make demo's, doctor's and health's on a fixture, ncclbench's on the
// test library) and render's golden JSON.
func TestReadFileKinds(t *testing.T) {
	report := filepath.Join("..", "cmd", "rdmabench", "testdata", "report")
	render := filepath.Join("..", "render", "testdata")
	tests := []struct {
		path string
		kind Kind
		set  func(*Document) bool
	}{
		{filepath.Join(report, "write-bw.json"), Run, func(d *Document) bool { return d.Run != nil && len(d.Run.Results) > 0 }},
		{filepath.Join(render, "lat.json"), Run, func(d *Document) bool { return d.Run != nil && d.Run.Test.IsLatency() }},
		{filepath.Join(report, "send-lat.hgrm"), Hgrm, func(d *Document) bool { return d.Hgrm != nil && len(d.Hgrm.Percentiles) > 10 }},
		{filepath.Join(report, "mesh.json"), Mesh, func(d *Document) bool { return d.Mesh != nil && len(d.Mesh.Ranks) == 4 }},
		{filepath.Join(render, "mesh.json"), Mesh, func(d *Document) bool { return d.Mesh != nil && len(d.Mesh.Culprits) > 0 }},
		{filepath.Join(report, "ncclbench.json"), NCCL, func(d *Document) bool { return d.NCCL != nil && d.NCCL.Straggler != nil }},
		{filepath.Join(report, "doctor.json"), Doctor, func(d *Document) bool { return d.Doctor != nil && d.Doctor.Summary.Fail == 1 }},
		{filepath.Join(report, "health.json"), Health, func(d *Document) bool { return d.Health != nil && len(d.Health.Faults) == 1 }},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(filepath.Dir(tc.path))+"/"+filepath.Base(tc.path), func(t *testing.T) {
			d, err := ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if d.Kind != tc.kind || !tc.set(d) || d.Path != tc.path {
				t.Errorf("kind %v (want %v), path %q, document %+v", d.Kind, tc.kind, d.Path, d)
			}
		})
	}
}

// TestKindByContent: the name says nothing; a run saved as .hgrm is a
// run, an .hgrm saved as .json an .hgrm.
func TestKindByContent(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		src, savedAs string
		want         Kind
	}{{"write-bw.json", "run.hgrm", Run}, {"send-lat.hgrm", "latency.json", Hgrm}} {
		b, err := os.ReadFile(filepath.Join("..", "cmd", "rdmabench", "testdata", "report", tc.src))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, tc.savedAs)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if d, err := ReadFile(p); err != nil || d.Kind != tc.want {
			t.Errorf("%s saved as %s: %v, %v; want kind %v", tc.src, tc.savedAs, d, err, tc.want)
		}
	}
}

func TestDecodeRefuses(t *testing.T) {
	for name, tc := range map[string]struct{ text, want string }{
		"empty":        {"  \n", "empty"},
		"a JSON array": {"[1, 2]", "a JSON array"},
		"no kind":      {`{"results": []}`, "of no kind rdmabench reads"},
		"text":         {"Value Percentile\nabc def ghi jkl\n", "line 2"},
		"null run":     {`{"schema": 2, "test": null, "results": null}`, "unknown test"},
		"no interval":  {`{"test": "write_bw", "threshold_pct": 5, "rows": [{"size": 8, "qps": 1, "metric": "bw_avg_gbps", "base_n": 3, "new_n": 3, "noise_aware": true, "verdict": "same"}]}`, "noise-aware without its interval"},
	} {
		if _, err := Decode([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one with %q", name, err, tc.want)
		}
	}
}
