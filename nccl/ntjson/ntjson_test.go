package ntjson

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/internal/ntanalyzer"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/results"
)

// sampleRun is a 3-process all_reduce with -I 1 -K 1 -n 4 over two sizes;
// process 2 is slow in iteration 2 of the 8-byte out-of-place half.
func sampleRun() *results.NCCLRun {
	r := &results.NCCLRun{Tool: "ncclbench", NCCLVersion: "2.29.1",
		Config: results.NCCLConfig{Collective: "all_reduce", NThreads: 1, NGpus: 1, NProcs: 3, NRanks: 3, MinBytes: 8, MaxBytes: 1024,
			StepFactor: 128, Warmup: 5, Iters: 4, AggIters: 1, Check: 1, PerIter: 1, PerIterSkp: 1},
	}
	for i, h := range []string{"node1", "node1", "node2"} {
		r.Devices = append(r.Devices, results.NCCLDevice{Rank: i, Pid: 100 + i, Host: h, Device: i % 2, BusID: "0000:0A:00.0", Name: "NVIDIA H100"})
	}
	rows := [][][]float64{
		{{10, 11, 12, 11}, {10.5, 11, 12.5, 11}, {10, 11, 60, 11}},
		{{20, 21, 22, 21}, {20, 21.25, 22, 21}, {20.5, 21, 22, 21}},
	}
	for i, size := range []int{8, 1024} {
		oop := results.NCCLResult{TimeUs: 13.5 * float64(i+1), AlgBW: 0.0006, BusBW: 0.0008, Checked: true, PerIter: bench.NewPerIter(rows[i], 1)}
		ip := results.NCCLResult{TimeUs: 21.25, AlgBW: 0.048, BusBW: 0.064, Checked: i == 0, Wrong: 0, PerIter: bench.NewPerIter(rows[1], 1)}
		r.Results = append(r.Results, results.NCCLPoint{Size: size, Count: size / 4, Type: "float", Redop: "sum", Root: -1, OutOfPlace: oop, InPlace: ip})
	}
	r.Summarize()
	return r
}

func sampleDoc() *Doc {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local)
	return Build(sampleRun(), Meta{Args: []string{"ncclbench", "all_reduce", "-I", "1", "-K", "1", "-J", "x.json"},
		Env: []string{"HOME=/root", "NCCL_BENCH_TOKEN=s3cret", "AWS_SECRET_ACCESS_KEY=k", "NCCL_IB_HCA=mlx5"}, Start: at, End: at.Add(time.Second),
		NCCLVersion: 22901, PerIter: true, Skip: 1})
}

// The per-iteration file, byte for byte.
func TestGolden(t *testing.T) {
	var b bytes.Buffer
	if err := Write(&b, sampleDoc()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "perf.golden.json", b.Bytes())
}

func TestLayout(t *testing.T) {
	var b bytes.Buffer
	Write(&b, sampleDoc())
	ntanalyzer.CheckLayout(t, b.Bytes(), true, 3)
	s := b.String()
	for _, want := range []string{`"NCCL_BENCH_TOKEN=<redacted>"`, `"AWS_SECRET_ACCESS_KEY=<redacted>"`, `"NCCL_IB_HCA=mlx5"`, `"root":"    -1"`,
		`"in_place":{"time":21.250000,"alg_bw":0.048000,"bus_bw":0.064000,"nwrong":null}`, `"device_hex":"0000:0a:00"`, `"okay":"unchecked"`} {
		if !strings.Contains(s, want) {
			t.Errorf("file lacks %s", want)
		}
	}
	if strings.Contains(s, "s3cret") {
		t.Error("a token reached the file")
	}
}

// PerIter's statistics as nccl-tests computes them (population stdev,
// percentile index rounded up, the skipped iterations left out).
func TestPerIterStats(t *testing.T) {
	p := bench.NewPerIter([][]float64{{100, 1, 2, 3, 4}, {50, 2, 2, 3, 8}}, 1)
	if !reflect.DeepEqual(p.TimesUs, []float64{100, 2, 2, 3, 8}) {
		t.Fatalf("times %v", p.TimesUs)
	}
	// Over 2 2 3 8: avg 3.75, population variance (3.0625*2+0.5625+18.0625)/4 = 6.1875.
	if p.MinUs != 2 || p.MaxUs != 8 || p.AvgUs != 3.75 || p.P50Us != 3 || p.P99Us != 8 || p.P95Us != 8 {
		t.Errorf("stats %+v", p)
	}
	if d := p.StdevUs - 2.4874685927665499; d > 1e-12 || d < -1e-12 {
		t.Errorf("stdev %v", p.StdevUs)
	}
	if one := bench.NewPerIter([][]float64{{5, 6}}, 0); one.PerProcessUs != nil || one.AvgUs != 5.5 {
		t.Errorf("one process: %+v", one)
	}
}

// nccl-tests' own analyzer reads the file without an error and finds what
// is in it: the process rows, the skip, the slow process 2.
func TestAnalyzer(t *testing.T) {
	path := filepath.Join("testdata", "perf.golden.json")
	out := ntanalyzer.Run(t, path, "--all", "--threshold", "2")
	for _, want := range []string{"Version:    3", "Summary skip: 1 leading iterations", "Process rows: 3",
		"Consistency (times_us == max over process rows, OOP): PASS", "PER-PROCESS STRAGGLER ANALYSIS",
		"slowest=process  2", "STRAGGLER: process 2", "Node 0 (node1, processes  0- 1)", "Node 1 (node2, processes  2)"} {
		if !strings.Contains(out, want) {
			t.Errorf("analyzer output lacks %q:\n%s", want, out)
		}
	}
	if out := ntanalyzer.Run(t, path, "--in-place", "--straggler"); !strings.Contains(out, "IP): PASS") || !strings.Contains(out, "Placement:  in-place") {
		t.Errorf("in-place:\n%s", out)
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "r.json")
	var names []string
	for range 3 {
		f, name, err := Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		names = append(names, filepath.Base(name))
	}
	if !reflect.DeepEqual(names, []string{"r.json", "r.json.0", "r.json.1"}) {
		t.Errorf("names %q", names)
	}
	if _, _, err := Create(filepath.Join(dir, "no", "such", "r.json")); err == nil || !strings.Contains(err.Error(), "-J") {
		t.Errorf("missing directory: %v", err)
	}
	if !IsJSONName("a.JSON") || IsJSONName("a.txt") || IsJSONName("json") {
		t.Error("IsJSONName")
	}
}
