package render

import (
	"fmt"
	"io"
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/results"
)

// fixtureMeshMetrics is the mesh fixture with a suspect link, so that every
// family has a series.
func fixtureMeshMetrics() *results.Mesh {
	m := fixtureMesh()
	m.Links = []results.SuspectLink{{A: 0, B: 3}}
	return m
}

func meshMetricsText(t *testing.T, m *results.Mesh, o MetricsOptions) []byte {
	t.Helper()
	return textOf(t, func(w io.Writer) error { return MeshMetrics(w, m, o) })
}

func TestMeshMetricsGolden(t *testing.T) {
	golden.Check(t, "mesh.prom", meshMetricsText(t, fixtureMeshMetrics(), MetricsOptions{}))
}

// Every figure of the mesh report has its series: each direction's
// bandwidth and latency (first and retest), failures, outliers and bad
// directions, ranks that left, culprits, links, inventory mismatches.
func TestMeshMetricsParse(t *testing.T) {
	fams := parseMetrics(t, meshMetricsText(t, fixtureMeshMetrics(), MetricsOptions{}))
	tests := []struct {
		family string
		labels map[string]string
		want   float64
	}{
		{"rdmabench_mesh_bandwidth_bytes_per_second", map[string]string{"from": "node01:mlx5_0", "to": "node02:mlx5_0", "measurement": "first", "bw_size": "1048576"}, 97.5e9 / 8},
		{"rdmabench_mesh_bandwidth_bytes_per_second", map[string]string{"from": "node04:mlx5_0", "to": "node01:mlx5_0", "measurement": "retest"}, 97e9 / 8},
		{"rdmabench_mesh_latency_seconds", map[string]string{"from": "node02:mlx5_0", "to": "node03:mlx5_0", "measurement": "first", "stat": "p99"}, 5.5 * 1.5e-6},
		{"rdmabench_mesh_direction_failed", map[string]string{"from": "node02:mlx5_0", "to": "node04:mlx5_0"}, 1},
		{"rdmabench_mesh_direction_failed", map[string]string{"from": "node01:mlx5_0", "to": "node02:mlx5_0"}, 0},
		{"rdmabench_mesh_direction_outlier", map[string]string{"from": "node02:mlx5_0", "to": "node03:mlx5_0", "kind": "latency"}, 1},
		{"rdmabench_mesh_direction_bad", map[string]string{"from": "node04:mlx5_0", "to": "node01:mlx5_0"}, 0},
		{"rdmabench_mesh_direction_bad", map[string]string{"from": "node03:mlx5_0", "to": "node01:mlx5_0"}, 1},
		{"rdmabench_mesh_rank_left", map[string]string{"rank_host": "node05:mlx5_0"}, 1},
		{"rdmabench_mesh_culprit_bad_pairs", map[string]string{"rank_host": "node03:mlx5_0"}, 2},
		{"rdmabench_mesh_suspect_link", map[string]string{"a": "node01:mlx5_0", "b": "node04:mlx5_0"}, 1},
		{"rdmabench_mesh_mismatch_info", map[string]string{"rank_host": "node03:mlx5_0", "fact": "firmware", "value": "28.36.1010"}, 1},
		{"rdmabench_mesh_clean", nil, 0},
		{"rdmabench_mesh_ranks", nil, 5},
		{"rdmabench_mesh_median_latency_seconds", nil, 2.1e-6},
		{"rdmabench_mesh_outliers_not_retested", nil, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.family, tt.labels), func(t *testing.T) {
			got := find(t, fams, tt.family, tt.labels)
			if math.Abs(got-tt.want) > 1e-9*math.Max(1, math.Abs(tt.want)) {
				t.Errorf("%v, want %v", got, tt.want)
			}
		})
	}
	for name, mf := range fams {
		if mf.GetType() != dto.MetricType_GAUGE {
			t.Errorf("%s is a %v", name, mf.GetType())
		}
	}
	if out := promtest.Promtool(t, meshMetricsText(t, fixtureMeshMetrics(), MetricsOptions{SlurmJobID: "9"})); out != "" {
		t.Errorf("promtool check metrics: %s", out)
	}
}

// Ranks on one host and device (an emulated mesh) keep apart by rank, and
// a mesh file merges with a node's run files.
func TestMeshMetricsSharedHost(t *testing.T) {
	m := fixtureMeshMetrics()
	for i := range m.Ranks {
		m.Ranks[i].Host = "localhost"
	}
	fams := parseMetrics(t, meshMetricsText(t, m, MetricsOptions{}))
	find(t, fams, "rdmabench_mesh_bandwidth_bytes_per_second", map[string]string{"from": "localhost:mlx5_0#0", "to": "localhost:mlx5_0#1", "measurement": "first"})
	files := map[string][]byte{"mesh.prom": meshMetricsText(t, fixtureMeshMetrics(), MetricsOptions{})}
	for name, r := range fixtureRuns() {
		files[name+".prom"] = metricsText(t, r, MetricsOptions{})
	}
	if _, err := promtest.MergeTextfiles(files); err != nil {
		t.Error(err)
	}
}
