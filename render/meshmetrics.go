package render

import (
	"io"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rdmabench/rdmabench/results"
)

// A mesh's series are labelled by what the mesh measured (its sizes) and by
// the ranks' host and device, not their rank numbers: a launcher may number
// the nodes differently from one job to the next.
var meshLabels = []string{"bw_size", "lat_size"}

func newMeshFamily(name, help string, extra ...string) *prometheus.Desc {
	return register(name, help, append(slices.Clone(meshLabels), extra...))
}

var (
	meshCleanDesc = newMeshFamily("rdmabench_mesh_clean",
		"1 when every direction was measured and none stayed an outlier, no rank left and the inventories agree.")
	meshRanksDesc = newMeshFamily("rdmabench_mesh_ranks",
		"Ranks in the mesh.")
	meshMedianBWDesc = newMeshFamily("rdmabench_mesh_median_bandwidth_bytes_per_second",
		"The median write-bw of all directions: what outliers are measured against.")
	meshMedianLatDesc = newMeshFamily("rdmabench_mesh_median_latency_seconds",
		"The median send-lat p50 of all directions.")
	meshNotRetestedDesc = newMeshFamily("rdmabench_mesh_outliers_not_retested",
		"Outliers beyond --max-retests: inconclusive unless a culprit explains them.")
	meshSlurmDesc = newMeshFamily("rdmabench_mesh_slurm_job_info",
		"1, labelled with the Slurm job the mesh ran in (SLURM_JOB_ID); only under Slurm.", "slurm_job_id")

	meshBWDesc = newMeshFamily("rdmabench_mesh_bandwidth_bytes_per_second",
		"One direction's write-bw, from the rank that wrote to the one that served; measurement first or retest (an outlier alone).", "from", "to", "measurement")
	meshLatDesc = newMeshFamily("rdmabench_mesh_latency_seconds",
		"One direction's send-lat; stat p50 or p99, measurement as in rdmabench_mesh_bandwidth_bytes_per_second.", "from", "to", "measurement", "stat")
	meshFailedDesc = newMeshFamily("rdmabench_mesh_direction_failed",
		"1 when the direction was not measured (an error, or a rank that left).", "from", "to")
	meshOutlierDesc = newMeshFamily("rdmabench_mesh_direction_outlier",
		"1 when the direction's first measurement was an outlier; kind bandwidth or latency.", "from", "to", "kind")
	meshBadDesc = newMeshFamily("rdmabench_mesh_direction_bad",
		"1 when the direction stayed an outlier (its retest was one too, or it was not retested).", "from", "to")

	meshDeadDesc = newMeshFamily("rdmabench_mesh_rank_left",
		"1 when the rank left the mesh before it ended.", "rank_host")
	meshCulpritDesc = newMeshFamily("rdmabench_mesh_culprit_bad_pairs",
		"Pairs with this rank that stayed bad, for a rank in most of them (the likely cause).", "rank_host")
	meshLinkDesc = newMeshFamily("rdmabench_mesh_suspect_link",
		"1 for a bad pair no culprit explains: likely the path between the two.", "a", "b")
	meshMismatchDesc = newMeshFamily("rdmabench_mesh_mismatch_info",
		"1 for a rank whose inventory differs from most: fact, the majority's value and its own.", "rank_host", "fact", "majority", "value")
)

// meshEndpoints names each rank by host and device, and by rank number as
// well where two ranks share both (ranks on one host and device).
func meshEndpoints(m *results.Mesh) []string {
	names := make([]string, len(m.Ranks))
	count := map[string]int{}
	for i, r := range m.Ranks {
		names[i] = r.Host + ":" + r.Device
		count[names[i]]++
	}
	for i, r := range m.Ranks {
		if count[names[i]] > 1 {
			names[i] += "#" + strconv.Itoa(r.Rank)
		}
	}
	return names
}

// collectMesh sends a mesh's figures as constant metrics.
func collectMesh(ch chan<- prometheus.Metric, m *results.Mesh, opts MetricsOptions) {
	base := []string{strconv.Itoa(m.BWSize), strconv.Itoa(m.LatSize)}
	gauge := func(d *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, append(slices.Clone(base), extra...)...)
	}
	bps := func(gbps float64) float64 { return gbps * 1e9 / 8 }
	gauge(meshCleanDesc, oneIf(MeshClean(m)))
	gauge(meshRanksDesc, float64(len(m.Ranks)))
	gauge(meshMedianBWDesc, bps(m.MedianBW))
	gauge(meshMedianLatDesc, m.MedianLat/1e6)
	gauge(meshNotRetestedDesc, float64(m.NotRetested))
	if opts.SlurmJobID != "" {
		gauge(meshSlurmDesc, 1, opts.SlurmJobID)
	}
	names := meshEndpoints(m)
	name := func(i int) string { // a document's rank out of range is named, not a panic
		if i < 0 || i >= len(names) {
			return "rank#" + strconv.Itoa(i)
		}
		return names[i]
	}
	for _, p := range m.Pairs {
		from, to := name(p.From), name(p.To)
		figures := func(f *results.MeshFigures, measurement string) {
			if f.Error != "" || f.BWGbps <= 0 {
				return
			}
			gauge(meshBWDesc, bps(f.BWGbps), from, to, measurement)
			if f.LatP50us > 0 {
				gauge(meshLatDesc, f.LatP50us/1e6, from, to, measurement, "p50")
			}
			if f.LatP99us > 0 {
				gauge(meshLatDesc, f.LatP99us/1e6, from, to, measurement, "p99")
			}
		}
		figures(&p.MeshFigures, "first")
		if p.Retest != nil {
			figures(p.Retest, "retest")
		}
		gauge(meshFailedDesc, oneIf(!p.Measured()), from, to)
		gauge(meshOutlierDesc, oneIf(p.SlowBW), from, to, "bandwidth")
		gauge(meshOutlierDesc, oneIf(p.SlowLat), from, to, "latency")
		gauge(meshBadDesc, oneIf(p.Bad()), from, to)
	}
	for i, r := range m.Ranks {
		gauge(meshDeadDesc, oneIf(r.Dead != ""), names[i])
	}
	for _, cu := range m.Culprits {
		gauge(meshCulpritDesc, float64(cu.BadPairs), name(cu.Rank))
	}
	for _, l := range m.Links {
		gauge(meshLinkDesc, 1, name(l.A), name(l.B))
	}
	for _, mm := range m.Mismatches {
		for _, odd := range mm.Odd {
			gauge(meshMismatchDesc, 1, name(odd.Rank), mm.Fact, mm.Majority, odd.Value)
		}
	}
}

// MeshMetricsGatherer is a mesh as Prometheus metrics. A mesh document with
// one direction twice (not one rdmabench wrote) is refused.
func MeshMetricsGatherer(m *results.Mesh, opts MetricsOptions) (prometheus.Gatherer, error) {
	return gatherer(collectFunc(func(ch chan<- prometheus.Metric) { collectMesh(ch, m, opts) }))
}

// MeshMetrics writes a mesh in the Prometheus text exposition format.
func MeshMetrics(w io.Writer, m *results.Mesh, opts MetricsOptions) error {
	g, err := MeshMetricsGatherer(m, opts)
	if err != nil {
		return err
	}
	return writeText(w, g)
}
