package render

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/results"
)

// The results as the outputs (publish.Destinations) write them: one
// model for --save, --metrics, --push and --otlp, whichever command.

// RunDocument is a verbs run of rdmabench's tests.
func RunDocument(run *results.Run, opts MetricsOptions) publish.Document {
	return publish.Document{
		JSON:    func(w io.Writer) error { return JSON(w, run) },
		Metrics: func(w io.Writer) error { return Metrics(w, run, opts) },
		Series:  func() (prometheus.Gatherer, error) { return MetricsGatherer(run, opts) },
		Tool:    "rdmabench", GroupLabel: RunGroupLabel, Group: RunGroup(run),
	}
}

// NCCLDocument is an ncclbench run.
func NCCLDocument(run *results.NCCLRun) publish.Document {
	return publish.Document{
		JSON:    func(w io.Writer) error { return NCCLJSON(w, run) },
		Metrics: func(w io.Writer) error { return NCCLMetrics(w, run) },
		Series:  func() (prometheus.Gatherer, error) { return NCCLMetricsGatherer(run) },
		Tool:    "ncclbench", GroupLabel: RunGroupLabel, Group: NCCLRunGroup(run),
	}
}

// MeshDocument is a mesh (measured, or judged again by --analyze).
func MeshDocument(m *results.Mesh, opts MetricsOptions) publish.Document {
	return publish.Document{
		JSON:    func(w io.Writer) error { return MeshJSON(w, m) },
		Metrics: func(w io.Writer) error { return MeshMetrics(w, m, opts) },
		Series:  func() (prometheus.Gatherer, error) { return MeshMetricsGatherer(m, opts) },
		Tool:    "rdmabench", GroupLabel: RunGroupLabel, Group: "mesh",
	}
}
