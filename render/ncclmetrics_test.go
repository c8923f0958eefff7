package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/nccl/bench"
)

func ncclRun() *bench.Run {
	r := &bench.Run{Tool: "ncclbench", NotGPU: true, Config: bench.Config{Collective: "all_reduce", NGpus: 1, NProcs: 2, NRanks: 2, MinBytes: 1024, MaxBytes: 2048, StepFactor: 2, AggIters: 1}}
	for _, size := range []int{1024, 2048} {
		r.Results = append(r.Results, bench.Point{Size: size, Count: size / 4, Type: "float", Redop: "sum",
			OutOfPlace: bench.Result{TimeUs: 20, AlgBW: 0.05, BusBW: 0.05, Checked: true},
			InPlace:    bench.Result{TimeUs: 25, AlgBW: 0.04, BusBW: 0.04}})
	}
	r.Summarize()
	r.CheckBusBW(1)
	return r
}

// Every figure of the run in base units, the unchecked half without a
// wrong count, promtool content, and a grouping key that names the run.
func TestNCCLMetrics(t *testing.T) {
	var b bytes.Buffer
	if err := NCCLMetrics(&b, ncclRun()); err != nil {
		t.Fatal(err)
	}
	if out := promtest.Promtool(t, b.Bytes()); out != "" {
		t.Errorf("promtool: %s", out)
	}
	fams := promtest.Parse(t, b.Bytes())
	want := map[string]int{
		"ncclbench_bus_bandwidth_bytes_per_second": 4, "ncclbench_algorithm_bandwidth_bytes_per_second": 4, "ncclbench_time_seconds": 4,
		"ncclbench_wrong_values": 2, "ncclbench_average_bus_bandwidth_bytes_per_second": 1, "ncclbench_out_of_bounds_values": 1,
		"ncclbench_run_success": 1, "ncclbench_cpu_test_library": 1, "ncclbench_min_bus_bandwidth_ok": 1,
	}
	for name, n := range want {
		if f := fams[name]; f == nil || len(f.GetMetric()) != n {
			t.Errorf("%s: %d series, want %d", name, len(fams[name].GetMetric()), n)
		}
	}
	for _, m := range fams["ncclbench_bus_bandwidth_bytes_per_second"].GetMetric() {
		s := promtest.Series("x", m)
		if strings.Contains(s, `size="1024"`) && strings.Contains(s, `placement="out_of_place"`) && m.GetGauge().GetValue() != 0.05e9 {
			t.Errorf("%s = %v, want 5e7 (0.05 GB/s)", s, m.GetGauge().GetValue())
		}
	}
	for _, m := range fams["ncclbench_wrong_values"].GetMetric() {
		if s := promtest.Series("x", m); strings.Contains(s, "in_place") {
			t.Errorf("an unchecked half has a wrong count: %s", s)
		}
	}
	if m := fams["ncclbench_min_bus_bandwidth_ok"].GetMetric()[0]; m.GetGauge().GetValue() != 0 {
		t.Errorf("0.045 GB/s against a minimum of 1 reads okay")
	}
	if g := NCCLRunGroup(ncclRun()); !strings.HasPrefix(g, "all_reduce-b1024-e2048-n2-") || g != NCCLRunGroup(ncclRun()) {
		t.Errorf("run group %q", g)
	}
}
