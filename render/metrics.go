package render

import (
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/rdmabench/rdmabench/results"
)

// Every series is a gauge: a run replaces the figures of the one before, so
// none of them only grows (a summary's _count and _sum would be counters
// that fall back with every run). Names carry their unit, as Prometheus
// asks; figures are converted from the report's Gb/s, Mpps, µs and percent
// to base units.

// runLabel is a label every series of a run carries: a setting that tells
// two runs apart, the same each time the run is repeated. Two cron jobs on a
// node that differ in any of them write distinct series, and no label holds
// what changes from run to run (figures, ports the kernel picked, job ids).
type runLabel struct {
	name  string
	value func(r *results.Run) string
}

var runLabels = []runLabel{
	{"test", func(r *results.Run) string { return string(r.Test) }},
	{"device", func(r *results.Run) string { return r.Device }},
	{"port", func(r *results.Run) string { return strconv.Itoa(r.Port) }},
	{"peer", peerLabel},
	// The sizes and QP counts asked for: a sweep's 64 KiB row is another
	// series than the one of a run of 64 KiB alone.
	{"sizes", sizesLabel},
	{"qp_counts", func(r *results.Run) string { return joinInts(r.QPs) }},
	{"transport", func(r *results.Run) string { return string(r.Transport) }},
	{"direction", func(r *results.Run) string { return choose(r.Bidirectional, "bi", "uni") }},
	{"memory", func(r *results.Run) string { return memoryLabel(r.Memory) }},
	{"peer_memory", func(r *results.Run) string { return memoryLabel(r.PeerMemory) }},
	{"threads", func(r *results.Run) string { return strconv.Itoa(r.Threads) }},
	{"cq", func(r *results.Run) string { return choose(r.SharedCQ, "shared", "per_thread") }},
	{"post_list", func(r *results.Run) string { return strconv.Itoa(r.PostList) }},
	{"tx_depth", func(r *results.Run) string { return strconv.Itoa(r.TxDepth) }},
	{"cq_mod", func(r *results.Run) string { return strconv.Itoa(r.CQMod) }},
	{"inline", func(r *results.Run) string { return strconv.Itoa(r.Inline) }},
	{"mtu", func(r *results.Run) string { return strconv.Itoa(r.MTU) }},
	// Empty outside the atomic tests, which Prometheus reads as no label.
	{"atomic", func(r *results.Run) string {
		if r.Test.Op() != results.OpAtomic {
			return ""
		}
		return string(r.Atomic)
	}},
	{"imm", func(r *results.Run) string { return choose(r.Imm, "yes", "no") }},
	{"verify", func(r *results.Run) string { return choose(r.Verify, "yes", "no") }},
}

// runSizes are the sizes a run asked for; older documents do not say, and
// the sizes measured stand in.
func runSizes(r *results.Run) []int {
	if len(r.Sizes) > 0 {
		return r.Sizes
	}
	var sizes []int
	for _, res := range r.Results {
		if !slices.Contains(sizes, res.Size) {
			sizes = append(sizes, res.Size)
		}
	}
	return sizes
}

// sizesLabel lists a few sizes; a longer sweep is its first and last size
// and how many (-a: "2-8388608/23").
func sizesLabel(r *results.Run) string {
	sizes := runSizes(r)
	if len(sizes) > 4 {
		return fmt.Sprintf("%d-%d/%d", sizes[0], sizes[len(sizes)-1], len(sizes))
	}
	return joinInts(sizes)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func choose(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}

// peerLabel is the server a client measured against, as it was named; a
// loopback run's peer is this process on a port the kernel picked, which
// would make every run a new series.
func peerLabel(r *results.Run) string {
	if r.Mode == "loopback" {
		return "loopback"
	}
	return r.Peer
}

// memoryLabel names where buffers lived, in what tells two runs apart: host
// memory and the NUMA node asked for, or which GPU.
func memoryLabel(m *results.Memory) string {
	if m == nil {
		return "host"
	}
	var s string
	switch {
	case m.Kind == results.GPUMemory && m.GPU != nil:
		s = "gpu" + strconv.Itoa(*m.GPU)
	case m.Kind == results.GPUMemory:
		s = "gpu"
	case m.NodeAsked != nil:
		s = "host_node" + strconv.Itoa(*m.NodeAsked)
	default:
		s = "host"
	}
	if m.HugePages {
		s += "_hugepages"
	}
	if m.FakeCUDA {
		s += "_fake"
	}
	return s
}

// resultLabels follow the run's on every series of one result.
var resultLabels = []string{"size", "qps"}

// families are every metric rdmabench exports, for MetricNames; labelNames
// every label their series may carry, for LabelNames.
var (
	families   []string
	labelNames = map[string]bool{}
)

// newFamily describes a family whose series carry the run's labels, the
// result's when perResult, then extra.
func newFamily(name, help string, perResult bool, extra ...string) *prometheus.Desc {
	var labels []string
	for _, l := range runLabels {
		labels = append(labels, l.name)
	}
	if perResult {
		labels = append(labels, resultLabels...)
	}
	return register(name, help, append(labels, extra...))
}

// register describes a family and records its name and labels.
func register(name, help string, labels []string) *prometheus.Desc {
	families = append(families, name)
	for _, l := range labels {
		labelNames[l] = true
	}
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	successDesc = newFamily("rdmabench_run_success",
		"1 when the run measured every size without error, 0 when an error or Ctrl-C cut it short.", false)
	slurmDesc = newFamily("rdmabench_slurm_job_info",
		"1, labelled with the Slurm job the run was part of (SLURM_JOB_ID); only under Slurm.", false, "slurm_job_id")

	iterationsDesc = newFamily("rdmabench_iterations",
		"Messages (latency samples) measured, all QPs together.", true)
	partialDesc = newFamily("rdmabench_result_partial",
		"1 when Ctrl-C cut this size short: its figures cover what ran.", true)

	bandwidthDesc = newFamily("rdmabench_bandwidth_bytes_per_second",
		"Average bandwidth of all QPs together over the measured interval.", true)
	burstDesc = newFamily("rdmabench_bandwidth_burst_bytes_per_second",
		"Highest rate of all QPs together over a window of 2 ms or more.", true)
	msgRateDesc = newFamily("rdmabench_messages_per_second",
		"Message rate of all QPs together.", true)
	directionDesc = newFamily("rdmabench_direction_bandwidth_bytes_per_second",
		"A bidirectional run's bandwidth each way: sent to the peer, received from it.", true, "way")
	qpDesc = newFamily("rdmabench_qp_bandwidth_bytes_per_second",
		"Each QP's bandwidth (they add up to the average); qp is its index.", true, "qp")
	jainDesc = newFamily("rdmabench_qp_fairness_ratio",
		"Jain's fairness index of the QPs' bandwidths: 1 when all got the same, 1/n when one got everything.", true)
	receivedDesc = newFamily("rdmabench_messages_received",
		"Messages the receiver counted (UC and UD may lose some).", true)
	cpuDesc = newFamily("rdmabench_cpu_usage_ratio",
		"CPU time over the measured interval per second, of one CPU (2 means two CPUs busy).", true, "side", "mode")
	badBytesDesc = newFamily("rdmabench_verify_bad_bytes",
		"Bytes that did not match the pattern (--verify).", true)
	// Not "counter" in the name: promtool reads that as the type.
	countersDesc = newFamily("rdmabench_port_stat_increase",
		"How much a port counter grew during the measurement (traffic counters left out); side local or peer.", true, "side", "counter")

	latencyDesc = newFamily("rdmabench_latency_seconds",
		"Latency samples (what a sample is: docs/core-tests.md), idle link; stat is min, p50 … p99_99, max, mean or stdev, from the HDR histogram.", true, "stat")
	loadedDesc = newFamily("rdmabench_loaded_latency_seconds",
		"The same ping-pong while the loads (--load) ran; stat as in rdmabench_latency_seconds.", true, "stat")
	loadBWDesc = newFamily("rdmabench_load_bandwidth_bytes_per_second",
		"A load's bandwidth during the loaded ping-pong; absent when the window was too short for a figure.", true, "load")
	loadMsgsDesc = newFamily("rdmabench_load_messages",
		"Messages a load moved during the loaded ping-pong.", true, "load")
	loadSecondsDesc = newFamily("rdmabench_load_duration_seconds",
		"How long a load was counted during the loaded ping-pong.", true, "load")

	rateIdleDesc = newFamily("rdmabench_rate_idle_latency_seconds",
		"The idle closed-loop latency in the open-loop series' units (whole round trips for send and write); stat as in rdmabench_latency_seconds.", true, "stat")
	rateLatDesc = newFamily("rdmabench_rate_latency_seconds",
		"An open-loop rate's (--rate, requests per second per QP) latency: timing corrected is from each request's due time, uncorrected from its post.", true, "rate", "timing", "stat")
	rateAchievedDesc = newFamily("rdmabench_rate_achieved_requests_per_second",
		"The rate requests were posted at, per QP, against the rate asked.", true, "rate")
	rateReachedDesc = newFamily("rdmabench_rate_reached",
		"1 when the achieved rate came within 5% of the rate asked.", true, "rate")
	rateKneeDesc = newFamily("rdmabench_rate_knee",
		"1 on the first rate whose corrected p99 exceeds twice the idle p99.", true, "rate")
)

// MetricNames are the names of every metric family rdmabench exports, in
// order: what a dashboard may reference.
func MetricNames() []string { return slices.Sorted(slices.Values(families)) }

// LabelNames are the names of every label a series rdmabench exports may
// carry (the scrape's instance and job, and RunGroupLabel, come on top).
func LabelNames() []string { return slices.Sorted(maps.Keys(labelNames)) }

// latencyStats are a latency result's figures by their stat label, in base
// units.
func latencyStats(l *results.LatencyStats) []struct {
	stat string
	s    float64
} {
	us := func(v float64) float64 { return v / 1e6 }
	return []struct {
		stat string
		s    float64
	}{
		{"min", us(l.Min)}, {"p50", us(l.P50)}, {"p90", us(l.P90)}, {"p99", us(l.P99)}, {"p99_9", us(l.P99_9)},
		{"p99_99", us(l.P99_99)}, {"max", us(l.Max)}, {"mean", us(l.Mean)}, {"stdev", us(l.Stdev)},
	}
}

// MetricsOptions are what the metrics need beyond the run document.
type MetricsOptions struct {
	SlurmJobID string // SLURM_JOB_ID, when the run was part of a Slurm job
}

// collectFunc is a collector of constant metrics: what a document holds.
type collectFunc func(ch chan<- prometheus.Metric)

func (f collectFunc) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(f, ch) }
func (f collectFunc) Collect(ch chan<- prometheus.Metric) { f(ch) }

// collectRun sends one run's results as constant metrics.
func collectRun(ch chan<- prometheus.Metric, r *results.Run, opts MetricsOptions) {
	rl := make([]string, len(runLabels))
	for i, l := range runLabels {
		rl[i] = l.value(r)
	}
	gauge := func(d *prometheus.Desc, v float64, lv ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, lv...)
	}
	gauge(successDesc, oneIf(r.Error == "" && !r.Interrupted), rl...)
	if opts.SlurmJobID != "" {
		gauge(slurmDesc, 1, append(slices.Clone(rl), opts.SlurmJobID)...)
	}
	for _, res := range r.Results {
		rg := resultGauges{gauge: gauge, lv: append(slices.Clone(rl), strconv.Itoa(res.Size), strconv.Itoa(res.QPs))}
		rg.gauge(iterationsDesc, float64(res.Iterations), rg.lv...)
		rg.gauge(partialDesc, oneIf(res.Partial), rg.lv...)
		if res.Lat != nil {
			rg.latency(res)
		} else {
			rg.gauge(bandwidthDesc, bps(res.BWAvgGbps), rg.lv...)
			rg.gauge(burstDesc, bps(res.BWBurstGbps), rg.lv...)
			rg.gauge(msgRateDesc, res.MsgRateMpps*1e6, rg.lv...)
		}
		rg.sides(res)
	}
}

// bps is Gb/s as bytes a second, Prometheus's unit.
func bps(gbps float64) float64 { return gbps * 1e9 / 8 }

// resultGauges sends one result's gauges, labelled with the run's and the
// result's labels (lv) and what each family adds.
type resultGauges struct {
	gauge func(d *prometheus.Desc, v float64, lv ...string)
	lv    []string
}

func (g resultGauges) with(extra ...string) []string { return append(slices.Clone(g.lv), extra...) }

func (g resultGauges) stats(d *prometheus.Desc, l *results.LatencyStats, extra ...string) {
	for _, st := range latencyStats(l) {
		g.gauge(d, st.s, g.with(append(slices.Clone(extra), st.stat)...)...)
	}
}

// latency: a latency test's percentiles, loaded and under --rate.
func (g resultGauges) latency(res results.Result) {
	g.stats(latencyDesc, res.Lat)
	if res.Loaded != nil {
		g.stats(loadedDesc, res.Loaded)
	}
	for _, f := range res.Loads {
		if !f.TooShort {
			g.gauge(loadBWDesc, bps(f.Gbps), g.with(f.Load)...)
		}
		g.gauge(loadMsgsDesc, float64(f.Messages), g.with(f.Load)...)
		g.gauge(loadSecondsDesc, f.Seconds, g.with(f.Load)...)
	}
	if res.RateIdle != nil {
		g.stats(rateIdleDesc, res.RateIdle)
	}
	for _, s := range res.Rates {
		rate := strconv.Itoa(s.Rate)
		if s.Iterations > 0 { // a pass cut in its warm-up has no latencies, only its rate
			g.stats(rateLatDesc, &s.Lat, rate, "corrected")
			g.stats(rateLatDesc, &s.Uncorrected, rate, "uncorrected")
		}
		g.gauge(rateAchievedDesc, s.Achieved, g.with(rate)...)
		g.gauge(rateReachedDesc, oneIf(s.Reached), g.with(rate)...)
		g.gauge(rateKneeDesc, oneIf(s.Knee), g.with(rate)...)
	}
}

// sides: what any test reports besides its figure: both directions, per
// QP, received, CPU, verification and port counters.
func (g resultGauges) sides(res results.Result) {
	if res.Bidir != nil {
		g.gauge(directionDesc, bps(res.Bidir.SentGbps), g.with("sent")...)
		g.gauge(directionDesc, bps(res.Bidir.ReceivedGbps), g.with("received")...)
	}
	if res.QPs > 1 {
		for i, q := range res.PerQPGbps {
			g.gauge(qpDesc, bps(q), g.with(strconv.Itoa(i))...)
		}
		if res.Spread != nil {
			g.gauge(jainDesc, res.Spread.Jain, g.lv...)
		}
	}
	if res.Received > 0 {
		g.gauge(receivedDesc, float64(res.Received), g.lv...)
	}
	if res.CPU != nil {
		for _, side := range []struct {
			name string
			f    results.CPUFigure
		}{{"local", res.CPU.Local}, {"remote", res.CPU.Remote}} {
			g.gauge(cpuDesc, side.f.UserPct/100, g.with(side.name, "user")...)
			g.gauge(cpuDesc, side.f.SysPct/100, g.with(side.name, "system")...)
		}
	}
	if res.BadBytes != nil {
		g.gauge(badBytesDesc, float64(*res.BadBytes), g.lv...)
	}
	for _, side := range []struct {
		name string
		m    map[string]uint64
	}{{"local", res.PortCounters}, {"peer", res.PeerPortCounters}} {
		for _, name := range slices.Sorted(maps.Keys(side.m)) {
			g.gauge(countersDesc, float64(side.m[name]), g.with(side.name, name)...)
		}
	}
}

// oneIf is a yes-or-no figure as a gauge's value.
func oneIf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// RunGroupLabel is the Pushgateway grouping label that keeps one kind of run
// apart from every other (RunGroup): not a label of any series, as the
// Pushgateway requires.
const RunGroupLabel = "run"

// RunGroup names the kind of run for the Pushgateway's grouping key: the
// test, its sizes and QP counts, and a hash of every run label, so that a
// push replaces the last push of the same command on the same node and no
// other. It is readable at a glance and stable from run to run.
func RunGroup(r *results.Run) string {
	h := fnv.New32a()
	for _, l := range runLabels {
		fmt.Fprintf(h, "%s=%q,", l.name, l.value(r))
	}
	fmt.Fprintf(h, "sizes=%v", runSizes(r)) // the label shortens a long sweep
	sizes := runSizes(r)
	sz := "none"
	switch {
	case len(sizes) == 1:
		sz = strconv.Itoa(sizes[0])
	case len(sizes) > 1:
		sz = fmt.Sprintf("%d-%d", slices.Min(sizes), slices.Max(sizes))
	}
	return fmt.Sprintf("%s-s%s-q%s-%08x", r.Test, sz, joinInts(r.QPs), h.Sum32())
}

// MetricsGatherer is a run's results as Prometheus metrics, for the text
// file and for a Pushgateway alike. A run whose results repeat a size and
// QP count (not one rdmabench wrote) is refused.
func MetricsGatherer(run *results.Run, opts MetricsOptions) (prometheus.Gatherer, error) {
	return gatherer(collectFunc(func(ch chan<- prometheus.Metric) { collectRun(ch, run, opts) }))
}

// gatherer registers c alone and gathers once, so that a duplicate series
// is an error here rather than at the collector.
func gatherer(c prometheus.Collector) (prometheus.Gatherer, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if _, err := reg.Gather(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return reg, nil
}

// Metrics writes a run's results in the Prometheus text exposition format
// (version 0.0.4), which node_exporter's textfile collector reads.
func Metrics(w io.Writer, run *results.Run, opts MetricsOptions) error {
	g, err := MetricsGatherer(run, opts)
	if err != nil {
		return err
	}
	return writeText(w, g)
}

func writeText(w io.Writer, g prometheus.Gatherer) error {
	mfs, err := g.Gather()
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
