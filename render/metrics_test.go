package render

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/results"
)

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// textOf is what write writes, failing the test on an error.
func textOf(t *testing.T, write func(w io.Writer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func metricsText(t *testing.T, r *results.Run, o MetricsOptions) []byte {
	t.Helper()
	return textOf(t, func(w io.Writer) error { return Metrics(w, r, o) })
}

func parseMetrics(t *testing.T, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	return promtest.Parse(t, text)
}

// The text files of the fixture runs, as node_exporter would read them.
func TestMetricsGolden(t *testing.T) {
	for name, r := range fixtureRuns() {
		golden.Check(t, name+".prom", metricsText(t, r, MetricsOptions{}))
	}
}

// find is the value of the one series in fams[family] with every label of
// want; it fails the test unless there is exactly one.
func find(t *testing.T, fams map[string]*dto.MetricFamily, family string, want map[string]string) float64 {
	t.Helper()
	var got []float64
	for _, m := range fams[family].GetMetric() {
		ok := true
		for k, v := range want {
			ok = ok && label(m, k) == v
		}
		if ok {
			got = append(got, m.GetGauge().GetValue())
		}
	}
	if len(got) != 1 {
		t.Errorf("%s%v: %d series, want 1", family, want, len(got))
		return math.NaN()
	}
	return got[0]
}

// The metrics are read back with Prometheus's own text parser: what the
// textfile collector accepts, every figure of the text report in base
// units, every family a gauge.
func TestMetricsParse(t *testing.T) {
	runs := fixtureRuns()
	tests := []struct {
		run    string
		family string
		labels map[string]string
		want   float64
	}{
		{"bw", "rdmabench_bandwidth_bytes_per_second", map[string]string{"qps": "4", "size": "65536"}, 97.1e9 / 8},
		{"bw", "rdmabench_bandwidth_burst_bytes_per_second", map[string]string{"qps": "1"}, 96.25e9 / 8},
		{"bw", "rdmabench_messages_per_second", map[string]string{"qps": "4"}, 0.185e6},
		{"bw", "rdmabench_direction_bandwidth_bytes_per_second", map[string]string{"qps": "1", "way": "received"}, 46e9 / 8},
		{"bw", "rdmabench_qp_bandwidth_bytes_per_second", map[string]string{"qps": "4", "qp": "1"}, 24.5e9 / 8},
		{"bw", "rdmabench_qp_fairness_ratio", map[string]string{"qps": "4"}, 0.9999},
		{"bw", "rdmabench_messages_received", map[string]string{"qps": "4"}, 399000},
		{"bw", "rdmabench_cpu_usage_ratio", map[string]string{"qps": "1", "side": "remote", "mode": "user"}, 0.98},
		{"bw", "rdmabench_verify_bad_bytes", map[string]string{"qps": "4"}, 3},
		{"bw", "rdmabench_port_stat_increase", map[string]string{"side": "peer", "counter": "out_of_seq_request"}, 2},
		{"bw", "rdmabench_run_success", map[string]string{"test": "write_bw", "device": "mlx5_0", "peer": "node2:18515", "direction": "bi", "threads": "2", "post_list": "4", "imm": "yes", "verify": "yes"}, 1},
		{"single", "rdmabench_run_success", map[string]string{"transport": "UD"}, 0},
		{"lat", "rdmabench_latency_seconds", map[string]string{"size": "8", "stat": "p99"}, 1.5e-6},
		{"lat", "rdmabench_latency_seconds", map[string]string{"size": "8", "stat": "max"}, 9.5e-6},
		{"lat", "rdmabench_iterations", map[string]string{"size": "8"}, 1000},
		{"lat", "rdmabench_result_partial", map[string]string{"size": "4096"}, 1},
		{"lat", "rdmabench_result_partial", map[string]string{"size": "8"}, 0},
		{"rate", "rdmabench_loaded_latency_seconds", map[string]string{"stat": "p99_9"}, 12e-6},
		{"rate", "rdmabench_load_bandwidth_bytes_per_second", map[string]string{"load": "write_bw,65536,4"}, 80e9 / 8},
		{"rate", "rdmabench_load_messages", map[string]string{"load": "read_bw,4096,1"}, 10},
		{"rate", "rdmabench_rate_idle_latency_seconds", map[string]string{"stat": "p50"}, 5e-6},
		{"rate", "rdmabench_rate_latency_seconds", map[string]string{"rate": "100000", "timing": "corrected", "stat": "p99"}, 500e-6},
		{"rate", "rdmabench_rate_latency_seconds", map[string]string{"rate": "100000", "timing": "uncorrected", "stat": "p99"}, 20e-6},
		{"rate", "rdmabench_rate_achieved_requests_per_second", map[string]string{"rate": "100000"}, 62500},
		{"rate", "rdmabench_rate_reached", map[string]string{"rate": "100000"}, 0},
		{"rate", "rdmabench_rate_reached", map[string]string{"rate": "1000"}, 1},
		{"rate", "rdmabench_rate_knee", map[string]string{"rate": "100000"}, 1},
		{"rate", "rdmabench_run_success", map[string]string{"peer": "loopback", "memory": "gpu0", "peer_memory": "host"}, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.run, "/", tt.family, tt.labels), func(t *testing.T) {
			fams := parseMetrics(t, metricsText(t, runs[tt.run], MetricsOptions{}))
			got := find(t, fams, tt.family, tt.labels)
			if math.Abs(got-tt.want) > 1e-9*math.Max(1, math.Abs(tt.want)) {
				t.Errorf("%v, want %v", got, tt.want)
			}
		})
	}
	// A load too short for a figure has no bandwidth series, and every
	// family is a gauge: a per-run figure falls as readily as it rises.
	fams := parseMetrics(t, metricsText(t, runs["rate"], MetricsOptions{}))
	if n := len(fams["rdmabench_load_bandwidth_bytes_per_second"].GetMetric()); n != 1 {
		t.Errorf("%d load bandwidths, want 1 (the other load was too short)", n)
	}
	for _, r := range runs {
		for name, mf := range parseMetrics(t, metricsText(t, r, MetricsOptions{})) {
			if mf.GetType() != dto.MetricType_GAUGE {
				t.Errorf("%s is a %v", name, mf.GetType())
			}
			if !slices.Contains(MetricNames(), name) {
				t.Errorf("%s is not in MetricNames", name)
			}
		}
	}
}

func TestMetricsSlurmJob(t *testing.T) {
	r := fixtureRuns()["bw"]
	fams := parseMetrics(t, metricsText(t, r, MetricsOptions{SlurmJobID: "4242"}))
	if v := find(t, fams, "rdmabench_slurm_job_info", map[string]string{"slurm_job_id": "4242", "test": "write_bw"}); v != 1 {
		t.Errorf("slurm info %v", v)
	}
	// The job id is on the info series only: the figures stay one series
	// from job to job.
	for _, m := range fams["rdmabench_bandwidth_bytes_per_second"].GetMetric() {
		if label(m, "slurm_job_id") != "" {
			t.Errorf("a figure carries the job id: %v", m.GetLabel())
		}
	}
	if _, ok := parseMetrics(t, metricsText(t, r, MetricsOptions{}))["rdmabench_slurm_job_info"]; ok {
		t.Error("a Slurm job info series outside Slurm")
	}
}

func TestMetricsRefusesDuplicateResults(t *testing.T) {
	r := &results.Run{Test: results.WriteBW, Results: []results.Result{{Size: 8, QPs: 1}, {Size: 8, QPs: 1}}}
	var b bytes.Buffer
	if err := Metrics(&b, r, MetricsOptions{}); err == nil {
		t.Error("two results for one size and QP count were written")
	}
}

// cronRun is a run as one cron job's command makes it; change alters it into
// another job's.
func cronRun(change func(r *results.Run)) *results.Run {
	r := &results.Run{Test: results.WriteBW, Device: "mlx5_0", Port: 1, Transport: results.RC, Mode: "client",
		Peer: "node2:18515", TxDepth: 128, CQMod: 100, MTU: 4096, QPs: []int{1}, Threads: 1, PostList: 1,
		Memory: &results.Memory{Kind: results.HostMemory}, PeerMemory: &results.Memory{Kind: results.HostMemory},
		Results: []results.Result{{Size: 65536, QPs: 1, Iterations: 1000, BWAvgGbps: 90, BWBurstGbps: 95, MsgRateMpps: 0.17}}}
	if change != nil {
		change(r)
	}
	return r
}

// The files a node's cron jobs write, one per command, merge into one
// scrape as the textfile collector merges them: no series twice. The
// settings that tell two commands apart are each a label.
func TestMetricsUniqueAcrossCronFiles(t *testing.T) {
	gpu0, gpu1, node1 := 0, 1, 1
	jobs := map[string]func(r *results.Run){
		"a.prom": nil,
		"b.prom": func(r *results.Run) { r.Results[0].Size = 1 << 20 }, // write-bw -s 1M
		"c.prom": func(r *results.Run) { r.QPs = []int{4}; r.Results[0].QPs = 4 },
		"d.prom": func(r *results.Run) { r.Bidirectional = true },
		"e.prom": func(r *results.Run) { r.Memory = &results.Memory{Kind: results.GPUMemory, GPU: &gpu0} },
		"f.prom": func(r *results.Run) { r.Memory = &results.Memory{Kind: results.GPUMemory, GPU: &gpu1} },
		"g.prom": func(r *results.Run) { r.Threads = 2 },
		"h.prom": func(r *results.Run) { r.Memory = &results.Memory{Kind: results.HostMemory, NodeAsked: &node1} },
		"i.prom": func(r *results.Run) { r.Device = "mlx5_1" },
		"j.prom": func(r *results.Run) { r.Transport = results.UC },
		"k.prom": func(r *results.Run) { r.Test = results.AtomicBW; r.Atomic = results.FetchAndAdd },
		"l.prom": func(r *results.Run) { r.Test = results.AtomicBW; r.Atomic = results.CmpAndSwap },
		"m.prom": func(r *results.Run) { r.PostList = 8 },
		"n.prom": func(r *results.Run) { r.SharedCQ = true; r.Threads = 2 },
		"o.prom": func(r *results.Run) { r.Peer = "node3:18515" },
		"p.prom": func(r *results.Run) { r.Mode, r.Peer = "loopback", "127.0.0.1:41234" },
		"q.prom": func(r *results.Run) { r.Verify = true },
		"r.prom": func(r *results.Run) { r.Imm = true },
		"s.prom": func(r *results.Run) { r.TxDepth = 64 },
		"t.prom": func(r *results.Run) { r.Inline = 64 },
		"u.prom": func(r *results.Run) { r.PeerMemory = &results.Memory{Kind: results.GPUMemory, GPU: &gpu0} },
		"v.prom": func(r *results.Run) {
			r.Test, r.Results[0] = results.SendLat, results.Result{Size: 8, QPs: 1, Iterations: 1000, Lat: &results.LatencyStats{P50: 1}}
		},
	}
	files := map[string][]byte{}
	for name, change := range jobs {
		files[name] = metricsText(t, cronRun(change), MetricsOptions{})
	}
	// The fixtures too: four more commands, with every kind of series.
	for name, r := range fixtureRuns() {
		files[name+".prom"] = metricsText(t, r, MetricsOptions{})
	}
	if _, err := promtest.MergeTextfiles(files); err != nil {
		t.Errorf("the textfile collector would refuse the node's files: %v", err)
	}
	// The check can fail: two jobs whose runs differ only in a figure are
	// one series twice.
	files["z.prom"] = metricsText(t, cronRun(func(r *results.Run) { r.Results[0].BWAvgGbps = 10 }), MetricsOptions{})
	if _, err := promtest.MergeTextfiles(files); err == nil || !strings.Contains(err.Error(), "both hold") {
		t.Errorf("a series in two files: err %v", err)
	}
}

// seriesOf is every series' identity in a run's metrics.
func seriesOf(t *testing.T, r *results.Run) []string {
	t.Helper()
	var all []string
	for name, mf := range parseMetrics(t, metricsText(t, r, MetricsOptions{})) {
		for _, m := range mf.GetMetric() {
			all = append(all, promtest.Series(name, m))
		}
	}
	slices.Sort(all)
	return all
}

// A rate cut before the end of its warm-up (far beyond the path) has its
// achieved rate and no latency series: zeros would read as a fast path.
func TestMetricsRateWithoutSamples(t *testing.T) {
	r := fixtureRuns()["rate"]
	r.Results[0].Rates = append(r.Results[0].Rates, results.RateSeries{Rate: 10000000, Achieved: 62000})
	fams := parseMetrics(t, metricsText(t, r, MetricsOptions{}))
	rate := map[string]string{"rate": "10000000"}
	if got := find(t, fams, "rdmabench_rate_achieved_requests_per_second", rate); got != 62000 {
		t.Errorf("achieved %v, want 62000", got)
	}
	if got := find(t, fams, "rdmabench_rate_reached", rate); got != 0 {
		t.Errorf("reached %v", got)
	}
	for _, m := range fams["rdmabench_rate_latency_seconds"].GetMetric() {
		if label(m, "rate") == "10000000" {
			t.Errorf("a latency series of the rate without samples: %v", m)
		}
	}
}

// The same command run again (another ephemeral port in loopback, other
// figures) makes the same series: a time series per run is a cardinality
// bug.
func TestMetricsStableFromRunToRun(t *testing.T) {
	first := fixtureRuns()["rate"]
	second := fixtureRuns()["rate"]
	second.Peer = "127.0.0.1:45811"
	second.Results[0].Iterations++
	second.Results[0].Lat.P99 *= 2
	second.Results[0].Rates[0].Achieved = 990
	a, b := seriesOf(t, first), seriesOf(t, second)
	if !slices.Equal(a, b) {
		t.Errorf("a second run made other series:\n%s\nvs\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
	for _, s := range a {
		if strings.Contains(s, "37023") {
			t.Errorf("the loopback port is in a label: %s", s)
		}
	}
	// A run cut short after its first size is still the same kind of run:
	// the sizes asked for label it, not those measured.
	full := cronRun(func(r *results.Run) {
		r.Sizes = []int{65536, 1 << 20}
		r.Results = append(r.Results, results.Result{Size: 1 << 20, QPs: 1, BWAvgGbps: 1})
	})
	cut := cronRun(func(r *results.Run) { r.Sizes = []int{65536, 1 << 20}; r.Interrupted = true })
	f := seriesOf(t, full)
	for _, s := range seriesOf(t, cut) {
		if !slices.Contains(f, s) {
			t.Errorf("a cut-short run made a series the full run does not: %s", s)
		}
	}
	if RunGroup(full) != RunGroup(cut) {
		t.Errorf("a cut-short run is another group: %s, %s", RunGroup(full), RunGroup(cut))
	}
}

// promtool, as an operator checks a textfile: no complaint on any file.
func TestMetricsPromtool(t *testing.T) {
	for name, r := range fixtureRuns() {
		for _, o := range []MetricsOptions{{}, {SlurmJobID: "77"}} {
			if out := promtest.Promtool(t, metricsText(t, r, o)); out != "" {
				t.Errorf("%s %+v: promtool check metrics: %s", name, o, out)
			}
		}
	}
}

// A Pushgateway group holds one kind of run: the same command again is the
// same group, any other setting is another, and the grouping label is no
// label of a series (the Pushgateway would refuse the push).
func TestRunGroup(t *testing.T) {
	base := RunGroup(cronRun(nil))
	again := RunGroup(cronRun(func(r *results.Run) { r.Results[0].BWAvgGbps = 1 }))
	if base != again {
		t.Errorf("the same command is groups %q and %q", base, again)
	}
	if !strings.HasPrefix(base, "write_bw-s65536-q1-") {
		t.Errorf("group %q does not name the test, size and QPs", base)
	}
	seen := map[string]string{base: "base"}
	for name, change := range map[string]func(r *results.Run){
		"size":      func(r *results.Run) { r.Results[0].Size = 8 },
		"bidir":     func(r *results.Run) { r.Bidirectional = true },
		"threads":   func(r *results.Run) { r.Threads = 4 },
		"qps":       func(r *results.Run) { r.QPs = []int{1, 2} },
		"sizes":     func(r *results.Run) { r.Results = append(r.Results, results.Result{Size: 1 << 20, QPs: 1}) },
		"device":    func(r *results.Run) { r.Device = "mlx5_1" },
		"latency":   func(r *results.Run) { r.Test = results.WriteLat },
		"transport": func(r *results.Run) { r.Transport = results.UD },
	} {
		g := RunGroup(cronRun(change))
		if other, ok := seen[g]; ok {
			t.Errorf("%s and %s share group %q", name, other, g)
		}
		seen[g] = name
	}
	loop := func(port string) string {
		return RunGroup(cronRun(func(r *results.Run) { r.Mode, r.Peer = "loopback", "127.0.0.1:"+port }))
	}
	if loop("1234") != loop("5678") {
		t.Error("the loopback port changes the group")
	}
	for _, r := range fixtureRuns() {
		for _, mf := range parseMetrics(t, metricsText(t, r, MetricsOptions{SlurmJobID: "1"})) {
			for _, m := range mf.GetMetric() {
				for _, l := range []string{RunGroupLabel, "instance", "job"} {
					if slices.ContainsFunc(m.GetLabel(), func(p *dto.LabelPair) bool { return p.GetName() == l }) {
						t.Errorf("%s carries the grouping label %s", mf.GetName(), l)
					}
				}
			}
		}
	}
}

func TestMetricNames(t *testing.T) {
	names := MetricNames()
	if len(names) < 20 || !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("names %v", names)
	}
	// Every family a fixture exports is named, and every named family shows
	// up in some fixture (the Slurm one with a job id).
	exported := map[string]bool{}
	for _, r := range fixtureRuns() {
		for name := range parseMetrics(t, metricsText(t, r, MetricsOptions{SlurmJobID: "1"})) {
			exported[name] = true
		}
	}
	for name := range parseMetrics(t, meshMetricsText(t, fixtureMeshMetrics(), MetricsOptions{SlurmJobID: "1"})) {
		exported[name] = true
	}
	for _, r := range []*results.NCCLRun{ncclRun(), ncclRunHealthy()} {
		var nb bytes.Buffer
		if err := NCCLMetrics(&nb, r); err != nil {
			t.Fatal(err)
		}
		for name := range parseMetrics(t, nb.Bytes()) {
			exported[name] = true
		}
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s: no fixture exports it", n)
		}
	}
	if got := slices.Sorted(maps.Keys(exported)); !slices.Equal(got, names) {
		t.Errorf("exported %v, named %v", got, names)
	}
}
