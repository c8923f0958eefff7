package render

import (
	"fmt"
	"io"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/rdmabench/rdmabench/results"
)

// Metric names carry their unit, as Prometheus asks; figures are converted
// from the report's Gb/s, Mpps and µs to base units.
var (
	resultLabels  = []string{"test", "device", "peer", "size", "qps"}
	bandwidthDesc = prometheus.NewDesc("rdmabench_bandwidth_bytes_per_second",
		"Average bandwidth of all QPs together over the measured interval.", resultLabels, nil)
	burstDesc = prometheus.NewDesc("rdmabench_bandwidth_burst_bytes_per_second",
		"Highest rate of all QPs together over a window of 2 ms or more.", resultLabels, nil)
	msgRateDesc = prometheus.NewDesc("rdmabench_messages_per_second",
		"Message rate of all QPs together.", resultLabels, nil)
	latencyDesc = prometheus.NewDesc("rdmabench_latency_seconds",
		"Latency samples (what a sample is: see the README); quantiles from the HDR histogram.", resultLabels, nil)
	latencyMaxDesc = prometheus.NewDesc("rdmabench_latency_max_seconds",
		"Largest latency sample.", resultLabels, nil)
	successDesc = prometheus.NewDesc("rdmabench_run_success",
		"1 when the run measured every size without error, 0 when an error or Ctrl-C cut it short.", resultLabels[:3], nil)
)

// runCollector exposes one run's results as constant metrics.
type runCollector struct{ run *results.Run }

func (c runCollector) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(c, ch) }

func (c runCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.run
	ok := 1.0
	if r.Error != "" || r.Interrupted {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(successDesc, prometheus.GaugeValue, ok, string(r.Test), r.Device, r.Peer)
	for _, res := range r.Results {
		lv := []string{string(r.Test), r.Device, r.Peer, strconv.Itoa(res.Size), strconv.Itoa(res.QPs)}
		if res.Lat != nil {
			l := res.Lat
			s := func(us float64) float64 { return us / 1e6 }
			q := map[float64]float64{0.5: s(l.P50), 0.9: s(l.P90), 0.99: s(l.P99), 0.999: s(l.P99_9), 0.9999: s(l.P99_99)}
			ch <- prometheus.MustNewConstSummary(latencyDesc, res.Iterations, s(l.Mean)*float64(res.Iterations), q, lv...)
			ch <- prometheus.MustNewConstMetric(latencyMaxDesc, prometheus.GaugeValue, s(l.Max), lv...)
			continue
		}
		ch <- prometheus.MustNewConstMetric(bandwidthDesc, prometheus.GaugeValue, res.BWAvgGbps*1e9/8, lv...)
		ch <- prometheus.MustNewConstMetric(burstDesc, prometheus.GaugeValue, res.BWBurstGbps*1e9/8, lv...)
		ch <- prometheus.MustNewConstMetric(msgRateDesc, prometheus.GaugeValue, res.MsgRateMpps*1e6, lv...)
	}
}

// MetricsGatherer is a run's results as Prometheus metrics, for the text
// file and for a Pushgateway alike. A run whose results repeat a size and
// QP count (not one rdmabench wrote) is refused.
func MetricsGatherer(run *results.Run) (prometheus.Gatherer, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(runCollector{run}); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if _, err := reg.Gather(); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return reg, nil
}

// Metrics writes a run's results in the Prometheus text exposition format
// (version 0.0.4), which node_exporter's textfile collector reads.
func Metrics(w io.Writer, run *results.Run) error {
	g, err := MetricsGatherer(run)
	if err != nil {
		return err
	}
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
