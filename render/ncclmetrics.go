package render

import (
	"fmt"
	"hash/fnv"
	"io"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rdmabench/rdmabench/results"
)

// ncclbench's series, gauges as rdmabench's: every figure of a run in base
// units, labelled by what makes the run the run it is (the collective, the
// ranks and the sizes asked for), then by the row (size, type, reduction,
// root) and the half (placement: out_of_place or in_place).

var ncclRunLabels = []struct {
	name  string
	value func(r *results.NCCLRun) string
}{
	{"collective", func(r *results.NCCLRun) string { return r.Config.Collective }},
	{"nranks", func(r *results.NCCLRun) string { return strconv.Itoa(r.Config.NRanks) }},
	{"ngpus", func(r *results.NCCLRun) string { return strconv.Itoa(r.Config.NGpus) }},
	{"min_bytes", func(r *results.NCCLRun) string { return strconv.Itoa(r.Config.MinBytes) }},
	{"max_bytes", func(r *results.NCCLRun) string { return strconv.Itoa(r.Config.MaxBytes) }},
	{"step", func(r *results.NCCLRun) string {
		if r.Config.StepFactor > 1 {
			return "x" + strconv.Itoa(r.Config.StepFactor)
		}
		return "+" + strconv.Itoa(r.Config.StepBytes)
	}},
	{"agg_iters", func(r *results.NCCLRun) string { return strconv.Itoa(r.Config.AggIters) }},
}

var ncclPointLabels = []string{"size", "type", "redop", "root", "placement"}

// ncclFamily is a series labelled by the run's labels, then extra ones
// (a row's ncclPointLabels, a straggler's ncclStragglerLabels).
func ncclFamily(name, help string, extra ...string) *prometheus.Desc {
	var labels []string
	for _, l := range ncclRunLabels {
		labels = append(labels, l.name)
	}
	return register(name, help, append(labels, extra...))
}

// ncclStragglerLabels name a straggler: its rank, where it runs and how it
// is late (enter or finish).
var ncclStragglerLabels = []string{"rank", "host", "device", "kind"}

var (
	ncclSuccessDesc = ncclFamily("ncclbench_run_success",
		"1 when the run measured every size without error, 0 when an error cut it short.")
	ncclNotGPUDesc = ncclFamily("ncclbench_cpu_test_library",
		"1 when the figures come from rdmabench's CPU stand-in for NCCL, not a GPU: they measure nothing.")
	ncclAvgBusBWDesc = ncclFamily("ncclbench_average_bus_bandwidth_bytes_per_second",
		"The mean bus bandwidth over every row and half, as nccl-tests' footer.")
	ncclOOBDesc = ncclFamily("ncclbench_out_of_bounds_values",
		"Halves whose results were wrong, over all processes (nccl-tests' \"Out of bounds values\").")
	ncclMinBWOKDesc = ncclFamily("ncclbench_min_bus_bandwidth_ok",
		"1 when the average bus bandwidth reached 90% of NCCL_TESTS_MIN_BW, 0 when not; absent without it.")
	ncclTimeDesc = ncclFamily("ncclbench_time_seconds",
		"Time of one collective, as nccl-tests' time column (combined over the processes as -a says).", ncclPointLabels...)
	ncclAlgBWDesc = ncclFamily("ncclbench_algorithm_bandwidth_bytes_per_second",
		"Algorithm bandwidth: bytes of the operation over its time.", ncclPointLabels...)
	ncclBusBWDesc = ncclFamily("ncclbench_bus_bandwidth_bytes_per_second",
		"Bus bandwidth: algorithm bandwidth times the collective's factor, comparable with the hardware's.", ncclPointLabels...)
	ncclWrongDesc = ncclFamily("ncclbench_wrong_values",
		"Wrong elements in a checked half; absent for a half that was not checked.", ncclPointLabels...)

	// The straggler analysis (-I 1, several ranks): present only when it ran.
	ncclStragglersDesc = ncclFamily("ncclbench_stragglers",
		"Ranks the straggler analysis named (-I 1 with several ranks); 0: no straggler.")
	ncclStragglerMarginDesc = ncclFamily("ncclbench_straggler_closest_score",
		"With no straggler named, the score of the rank closest to being named (1 names a rank).")
	ncclStragglerLateDesc = ncclFamily("ncclbench_straggler_late_iterations_ratio",
		"Share of the timed iterations in which a named straggler was late: past the stall threshold, or for a steady lag past the clock error bounds.", ncclStragglerLabels...)
	ncclStragglerMedianLagDesc = ncclFamily("ncclbench_straggler_median_lag_seconds",
		"A named straggler's median lag behind the others' median, over its late iterations.", ncclStragglerLabels...)
	ncclStragglerMaxLagDesc = ncclFamily("ncclbench_straggler_max_lag_seconds",
		"A named straggler's largest lag behind the others' median.", ncclStragglerLabels...)
	ncclStragglerCostDesc = ncclFamily("ncclbench_straggler_cost_ratio",
		"What a named straggler's lateness cost (stalls past the threshold, a steady lag past the clock error bounds), as a share of the timed span.", ncclStragglerLabels...)
)

func collectNCCL(ch chan<- prometheus.Metric, r *results.NCCLRun) {
	var labels []string
	for _, l := range ncclRunLabels {
		labels = append(labels, l.value(r))
	}
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(append([]string{}, labels...), extra...)...)
	}
	gauge(ncclSuccessDesc, oneIf(r.Error == ""))
	gauge(ncclNotGPUDesc, oneIf(r.NotGPU))
	gauge(ncclAvgBusBWDesc, r.AvgBusBW*1e9)
	gauge(ncclOOBDesc, float64(r.OutOfBounds))
	if r.MinBusBW != nil {
		gauge(ncclMinBWOKDesc, oneIf(r.MinBusBW.Okay))
	}
	if s := r.Straggler; s != nil {
		gauge(ncclStragglersDesc, float64(len(s.Stragglers)))
		if len(s.Stragglers) == 0 && s.Worst != nil {
			gauge(ncclStragglerMarginDesc, s.Margin)
		}
		for _, f := range s.Stragglers {
			kind, _ := f.Kind.MarshalText()
			who := []string{strconv.Itoa(f.Rank.Rank), f.Rank.Host, strconv.Itoa(f.Rank.Device), string(kind)}
			if f.Iterations > 0 {
				gauge(ncclStragglerLateDesc, float64(f.Late)/float64(f.Iterations), who...)
			}
			gauge(ncclStragglerMedianLagDesc, f.MedianLagUs/1e6, who...)
			gauge(ncclStragglerMaxLagDesc, f.MaxLagUs/1e6, who...)
			gauge(ncclStragglerCostDesc, f.CostPct/100, who...)
		}
	}
	for _, p := range r.Results {
		for _, half := range []struct {
			placement string
			res       results.NCCLResult
		}{{"out_of_place", p.OutOfPlace}, {"in_place", p.InPlace}} {
			row := []string{strconv.Itoa(p.Size), p.Type, p.Redop, strconv.Itoa(p.Root), half.placement}
			gauge(ncclTimeDesc, half.res.TimeUs/1e6, row...)
			gauge(ncclAlgBWDesc, half.res.AlgBW*1e9, row...)
			gauge(ncclBusBWDesc, half.res.BusBW*1e9, row...)
			if half.res.Checked {
				gauge(ncclWrongDesc, float64(half.res.Wrong), row...)
			}
		}
	}
}

// NCCLMetricsGatherer is an ncclbench run's series, for a push.
func NCCLMetricsGatherer(r *results.NCCLRun) (prometheus.Gatherer, error) {
	return gatherer(collectFunc(func(ch chan<- prometheus.Metric) { collectNCCL(ch, r) }))
}

// NCCLMetrics writes an ncclbench run's series in the Prometheus text
// format (node_exporter's textfile collector).
func NCCLMetrics(w io.Writer, r *results.NCCLRun) error {
	g, err := NCCLMetricsGatherer(r)
	if err != nil {
		return err
	}
	return writeText(w, g)
}

// NCCLRunGroup names an ncclbench run for the Pushgateway's grouping key
// (RunGroupLabel): the collective, its sizes and a hash of every run label.
func NCCLRunGroup(r *results.NCCLRun) string {
	h := fnv.New32a()
	for _, l := range ncclRunLabels {
		fmt.Fprintf(h, "%s=%q,", l.name, l.value(r))
	}
	return fmt.Sprintf("%s-b%d-e%d-n%d-%08x", r.Config.Collective, r.Config.MinBytes, r.Config.MaxBytes, r.Config.NRanks, h.Sum32())
}
