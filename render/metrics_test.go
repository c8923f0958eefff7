package render

import (
	"bytes"
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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

// The metrics are read back with Prometheus's own text parser: what the
// textfile collector accepts, with the figures in base units.
func TestMetricsParse(t *testing.T) {
	runs := fixtureRuns()
	tests := []struct {
		run    *results.Run
		family string
		n      int // metrics in the family
		check  func(t *testing.T, m *dto.Metric)
	}{
		{runs["bw"], "rdmabench_bandwidth_bytes_per_second", 2, func(t *testing.T, m *dto.Metric) {
			if label(m, "qps") == "4" && math.Abs(m.GetGauge().GetValue()-97.1e9/8) > 1 {
				t.Errorf("4 QPs: %v B/s", m.GetGauge().GetValue())
			}
			if label(m, "test") != "write_bw" || label(m, "device") != "mlx5_0" || label(m, "peer") != "node2:18515" || label(m, "size") != "65536" {
				t.Errorf("labels %v", m.GetLabel())
			}
		}},
		{runs["bw"], "rdmabench_messages_per_second", 2, nil},
		{runs["bw"], "rdmabench_run_success", 1, func(t *testing.T, m *dto.Metric) {
			if m.GetGauge().GetValue() != 1 {
				t.Error("a run without error is not a success")
			}
		}},
		{runs["single"], "rdmabench_run_success", 1, func(t *testing.T, m *dto.Metric) {
			if m.GetGauge().GetValue() != 0 {
				t.Error("a run with an error is a success")
			}
		}},
		{runs["lat"], "rdmabench_latency_seconds", 2, func(t *testing.T, m *dto.Metric) {
			s := m.GetSummary()
			if label(m, "size") != "8" {
				return
			}
			if s.GetSampleCount() != 1000 || math.Abs(s.GetSampleSum()-1.125e-6*1000) > 1e-12 || len(s.GetQuantile()) != 5 {
				t.Errorf("summary %v", s)
			}
			for _, q := range s.GetQuantile() {
				if q.GetQuantile() == 0.99 && math.Abs(q.GetValue()-1.5e-6) > 1e-15 {
					t.Errorf("p99 %v s", q.GetValue())
				}
			}
		}},
		{runs["lat"], "rdmabench_latency_max_seconds", 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.run.Device+"/"+tt.family, func(t *testing.T) {
			var b bytes.Buffer
			if err := Metrics(&b, tt.run); err != nil {
				t.Fatal(err)
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			fams, err := p.TextToMetricFamilies(&b)
			if err != nil {
				t.Fatalf("the parser refused the metrics: %v", err)
			}
			mf, ok := fams[tt.family]
			if !ok {
				t.Fatalf("no %s in %v", tt.family, fams)
			}
			if len(mf.GetMetric()) != tt.n {
				t.Fatalf("%d metrics, want %d", len(mf.GetMetric()), tt.n)
			}
			for _, m := range mf.GetMetric() {
				if tt.check != nil {
					tt.check(t, m)
				}
			}
		})
	}
}

func TestMetricsRefusesDuplicateResults(t *testing.T) {
	r := &results.Run{Test: results.WriteBW, Results: []results.Result{{Size: 8, QPs: 1}, {Size: 8, QPs: 1}}}
	var b bytes.Buffer
	if err := Metrics(&b, r); err == nil {
		t.Error("two results for one size and QP count were written")
	}
}
