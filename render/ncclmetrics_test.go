package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/results"
)

func ncclRun() *results.NCCLRun {
	r := &results.NCCLRun{Tool: "ncclbench", NotGPU: true, Config: results.NCCLConfig{Collective: "all_reduce", NGpus: 1, NProcs: 2, NRanks: 2, MinBytes: 1024, MaxBytes: 2048, StepFactor: 2, AggIters: 1}}
	for _, size := range []int{1024, 2048} {
		r.Results = append(r.Results, results.NCCLPoint{Size: size, Count: size / 4, Type: "float", Redop: "sum",
			OutOfPlace: results.NCCLResult{TimeUs: 20, AlgBW: 0.05, BusBW: 0.05, Checked: true},
			InPlace:    results.NCCLResult{TimeUs: 25, AlgBW: 0.04, BusBW: 0.04}})
	}
	r.Summarize()
	r.CheckBusBW(1)
	// -I 1's straggler analysis named rank 1, late to enter in 30 of 40.
	r.Straggler = &results.StragglerReport{Ranks: 2, Iterations: 40, Stragglers: []results.StragglerFinding{{
		Rank: results.StragglerRank{Rank: 1, Host: "node2", Device: 0, Pid: 7}, Kind: results.LateEnter,
		Late: 30, Iterations: 40, MedianLagUs: 250, MaxLagUs: 900, CostPct: 12.5, Consistent: true}}}
	return r
}

// ncclRunHealthy is the same run with no straggler: only how close the
// closest rank came.
func ncclRunHealthy() *results.NCCLRun {
	r := ncclRun()
	r.Straggler = &results.StragglerReport{Ranks: 2, Iterations: 40, Stragglers: []results.StragglerFinding{},
		Worst: &results.StragglerFinding{Rank: results.StragglerRank{Rank: 0, Host: "node1"}}, Margin: 0.25}
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
		"ncclbench_stragglers": 1, "ncclbench_straggler_late_iterations_ratio": 1, "ncclbench_straggler_median_lag_seconds": 1,
		"ncclbench_straggler_max_lag_seconds": 1, "ncclbench_straggler_cost_ratio": 1,
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
	// The straggler, by rank, host, GPU and kind, in base units.
	for name, want := range map[string]float64{"ncclbench_stragglers": 1, "ncclbench_straggler_late_iterations_ratio": 0.75,
		"ncclbench_straggler_median_lag_seconds": 250e-6, "ncclbench_straggler_max_lag_seconds": 900e-6, "ncclbench_straggler_cost_ratio": 0.125} {
		m := fams[name].GetMetric()[0]
		s := promtest.Series(name, m)
		if m.GetGauge().GetValue() != want {
			t.Errorf("%s = %v, want %v", s, m.GetGauge().GetValue(), want)
		}
		if name != "ncclbench_stragglers" && !(strings.Contains(s, `host="node2"`) && strings.Contains(s, `kind="late_enter"`) && strings.Contains(s, `rank="1"`)) {
			t.Errorf("%s: want the straggler's rank, host and kind as labels", s)
		}
	}
	var hb bytes.Buffer
	if err := NCCLMetrics(&hb, ncclRunHealthy()); err != nil {
		t.Fatal(err)
	}
	healthy := promtest.Parse(t, hb.Bytes())
	if f := healthy["ncclbench_stragglers"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 0 || healthy["ncclbench_straggler_cost_ratio"] != nil {
		t.Errorf("a run with no straggler: %v", healthy["ncclbench_stragglers"])
	}
	if f := healthy["ncclbench_straggler_closest_score"]; f == nil || f.GetMetric()[0].GetGauge().GetValue() != 0.25 {
		t.Errorf("no closest score for a run with no straggler")
	}
	if g := NCCLRunGroup(ncclRun()); !strings.HasPrefix(g, "all_reduce-b1024-e2048-n2-") || g != NCCLRunGroup(ncclRun()) {
		t.Errorf("run group %q", g)
	}
}
