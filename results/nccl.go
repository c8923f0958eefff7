package results

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/internal/version"
)

// NCCLTool marks an ncclbench document (--json, --save): its "tool" field.
const NCCLTool = "ncclbench"

// NCCLSchema is the version of ncclbench's --json document (NCCLRun). 2:
// "schema" itself, "rendezvous", -I 1's "per_iter" and "straggler", no
// "wrong" in unchecked halves; 1 (no "schema" field): before.
const NCCLSchema = 2

// NCCLRun is a whole ncclbench run, as written by --json: nccl-tests'
// figures and what ran them. It lives here, beside the verbs run and the
// mesh, so that every reader (the metrics, the plots, the report) reads
// one result model and none needs the runner.
type NCCLRun struct {
	Tool          string       `json:"tool"`
	Schema        int          `json:"schema"`
	NotGPU        bool         `json:"not_gpu_measurement"`
	NCCLVersion   string       `json:"nccl_version"`
	NCCLLibrary   string       `json:"nccl_library"`
	CudartLibrary string       `json:"cudart_library"`
	Config        NCCLConfig   `json:"config"`
	Devices       []NCCLDevice `json:"devices"`
	// Rendezvous is rank 0's host:port when several processes met, and
	// RendezvousFrom where that address came from (given or derived).
	Rendezvous     string      `json:"rendezvous,omitempty"`
	RendezvousFrom string      `json:"rendezvous_source,omitempty"`
	RendezvousSec  float64     `json:"rendezvous_seconds,omitempty"` // how long rank 0 waited for every process
	Results        []NCCLPoint `json:"results"`
	OutOfBounds    int         `json:"out_of_bounds"`
	AvgBusBW       float64     `json:"avg_bus_bandwidth_gbps"`
	// MinBusBW is NCCL_TESTS_MIN_BW's check of AvgBusBW; nil without it.
	MinBusBW *BusBWCheck     `json:"min_bus_bandwidth,omitempty"`
	NCCLLog  json.RawMessage `json:"nccl_log,omitempty"`
	// Straggler is the straggler analysis of -I 1 runs of several ranks.
	Straggler *StragglerReport `json:"straggler,omitempty"`
	Warnings  []string         `json:"warnings,omitempty"`
	Error     string           `json:"error,omitempty"`
	// Version is the ncclbench that wrote the document and the NCCL and
	// CUDA runtime it ran on.
	Version *version.Info `json:"version,omitempty"`
}

// NCCLDevice is one "# Using devices" line.
type NCCLDevice struct {
	Rank   int    `json:"rank"`
	Group  int    `json:"group"`
	Pid    int    `json:"pid"`
	Host   string `json:"hostname"`
	Device int    `json:"device"`
	BusID  string `json:"bus_id"`
	Name   string `json:"name"`
}

// NCCLResult is one half (out-of-place or in-place) of a table row.
type NCCLResult struct {
	TimeUs float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_gbps"`
	BusBW  float64 `json:"busbw_gbps"`
	// Wrong counts wrong elements when Checked; an unchecked half (-c 0,
	// or in-place alltoall and sendrecv, whose result NCCL leaves
	// undefined) has no count, and the JSON carries none.
	Wrong   int64 `json:"wrong"`
	Checked bool  `json:"checked"`
	// CPUTimeUs (-C 1) is the time this process spent issuing one
	// collective, not waiting for it: nccl-tests' "cputime".
	CPUTimeUs *float64     `json:"cpu_time_us,omitempty"`
	PerIter   *NCCLPerIter `json:"per_iter,omitempty"` // -I 1
}

// MarshalJSON leaves "wrong" out of an unchecked half: a 0 there would
// read as validated to a consumer that ignores "checked".
func (x NCCLResult) MarshalJSON() ([]byte, error) {
	type plain NCCLResult // without this method
	if x.Checked {
		return json.Marshal(plain(x))
	}
	return json.Marshal(struct {
		TimeUs  float64      `json:"time_us"`
		AlgBW   float64      `json:"algbw_gbps"`
		BusBW   float64      `json:"busbw_gbps"`
		Checked bool         `json:"checked"`
		PerIter *NCCLPerIter `json:"per_iter,omitempty"`
	}{x.TimeUs, x.AlgBW, x.BusBW, x.Checked, x.PerIter})
}

// NCCLPoint is one table row.
type NCCLPoint struct {
	Size       int        `json:"size"`
	Count      int        `json:"count"`
	Type       string     `json:"type"`
	Redop      string     `json:"redop"`
	Root       int        `json:"root"`
	OutOfPlace NCCLResult `json:"out_of_place"`
	InPlace    NCCLResult `json:"in_place"`
}

// NCCLConfig is what the header line reports.
type NCCLConfig struct {
	Collective string `json:"collective"`
	NThreads   int    `json:"nthreads"`
	NGpus      int    `json:"ngpus"`
	NProcs     int    `json:"nprocs"`
	NRanks     int    `json:"nranks"`
	MinBytes   int    `json:"min_bytes"`
	MaxBytes   int    `json:"max_bytes"`
	StepBytes  int    `json:"step_bytes,omitempty"`
	StepFactor int    `json:"step_factor,omitempty"`
	Warmup     int    `json:"warmup_iters"`
	Iters      int    `json:"iters"`
	AggIters   int    `json:"agg_iters"`
	Check      int    `json:"validation"`
	Blocking   int    `json:"blocking"`
	Average    int    `json:"average"`
	AlltoAll   string `json:"alltoall_impl,omitempty"`
	PerIter    int    `json:"per_iter_timing,omitempty"` // -I
	// ReportCPUTime (-C 1): the tables' time column is the CPU time.
	ReportCPUTime bool `json:"report_cputime,omitempty"`
	PerIterSkp    int  `json:"per_iter_skip,omitempty"` // -K
	// Split is NCCL_TESTS_SPLIT(_MASK) as given, Groups the communicators
	// it made; the figures are the first group's (rank 0's), NRanks its
	// ranks, times averaged over every process.
	Split  string `json:"split,omitempty"`
	Groups int    `json:"groups,omitempty"`
	// Graphs (-G N): the timed iterations were captured into a CUDA graph
	// once and the graph launched N times; times are per iteration.
	Graphs int `json:"cuda_graph_launches,omitempty"`
}

// NCCLPerIter is -I 1's per-iteration report of one half of a row: each
// process's time per iteration (the slowest of its GPUs, as CUDA events
// timed them, divided by -m), the slowest process's per iteration, and
// statistics over the iterations after the first Skipped (-K).
type NCCLPerIter struct {
	Skipped int       `json:"skipped_iterations"`
	MinUs   float64   `json:"min_us"`
	MaxUs   float64   `json:"max_us"`
	AvgUs   float64   `json:"avg_us"`
	P50Us   float64   `json:"p50_us"`
	P95Us   float64   `json:"p95_us"`
	P99Us   float64   `json:"p99_us"`
	StdevUs float64   `json:"stdev_us"`
	CVPct   float64   `json:"cv_pct"` // stdev / avg, in percent
	TimesUs []float64 `json:"times_us"`
	// PerProcessUs holds a row per process (rank order); with one process
	// it is left out, as nccl-tests does.
	PerProcessUs [][]float64 `json:"per_process_max_times_us,omitempty"`
}

// BusBWCheck is the average bus bandwidth held against a minimum
// (nccl-tests' NCCL_TESTS_MIN_BW, GB/s).
type BusBWCheck struct {
	Minimum float64 `json:"minimum_gbps"`
	Okay    bool    `json:"okay"`
}

// minBusBWSlack is nccl-tests' allowance: a run passes at 90% of the
// minimum (common.cu: bw < check_avg_bw*0.9 fails).
const minBusBWSlack = 0.9

// Summarize fills OutOfBounds (rows with wrong results, counted per
// out-of-place/in-place half as nccl-tests does) and AvgBusBW (mean busbw
// over all halves).
func (r *NCCLRun) Summarize() {
	r.OutOfBounds, r.AvgBusBW = 0, 0
	n := 0
	for _, p := range r.Results {
		for _, x := range []NCCLResult{p.OutOfPlace, p.InPlace} {
			if x.Wrong != 0 {
				r.OutOfBounds++
			}
			r.AvgBusBW += x.BusBW
			n++
		}
	}
	if n > 0 {
		r.AvgBusBW /= float64(n)
	}
}

// CheckBusBW holds AvgBusBW (Summarize's) against min.
func (r *NCCLRun) CheckBusBW(min float64) {
	r.MinBusBW = &BusBWCheck{Minimum: min, Okay: r.AvgBusBW >= min*minBusBWSlack}
}

// BelowMinBusBW says why a checked run failed its minimum; empty when it
// passed or was not checked.
func (r *NCCLRun) BelowMinBusBW() string {
	if r.MinBusBW == nil || r.MinBusBW.Okay {
		return ""
	}
	return fmt.Sprintf("average bus bandwidth %.6g GB/s is below NCCL_TESTS_MIN_BW=%g (which passes from %.6g, 90%% of it)",
		r.AvgBusBW, r.MinBusBW.Minimum, r.MinBusBW.Minimum*minBusBWSlack)
}

// StragglerRank names an NCCL rank in a straggler report.
type StragglerRank struct {
	Rank   int    `json:"rank"`
	Host   string `json:"host"`
	Device int    `json:"device"`
	Pid    int    `json:"pid"`
}

func (r StragglerRank) String() string {
	return fmt.Sprintf("rank %d (%s GPU %d, pid %d)", r.Rank, r.Host, r.Device, r.Pid)
}

// StragglerKind says which end of the collective a rank is late at.
type StragglerKind int

const (
	// LateEnter: the rank reaches the collective after the others.
	LateEnter StragglerKind = iota
	// SlowFinish: the rank is done with it after the others.
	SlowFinish
)

func (k StragglerKind) String() string {
	if k == SlowFinish {
		return "slow to finish"
	}
	return "late to enter"
}

// MarshalText writes the kind as its JSON name.
func (k StragglerKind) MarshalText() ([]byte, error) {
	if k == SlowFinish {
		return []byte("slow_finish"), nil
	}
	return []byte("late_enter"), nil
}

// UnmarshalText reads MarshalText's names.
func (k *StragglerKind) UnmarshalText(b []byte) error {
	switch string(b) {
	case "late_enter":
		*k = LateEnter
	case "slow_finish":
		*k = SlowFinish
	default:
		return fmt.Errorf("straggler kind %q (want late_enter or slow_finish)", b)
	}
	return nil
}

// StragglerFinding is one rank named, at one end of the collective
// (nccl/straggler's analysis; its criteria are documented there).
type StragglerFinding struct {
	Rank StragglerRank `json:"rank"`
	Kind StragglerKind `json:"kind"`
	// Late of Iterations were past the threshold (for a steady lag, past
	// the clock error bounds and FloorFrac of an iteration), by
	// MedianLagUs (median of those) and at most MaxLagUs behind the
	// median of the others.
	Late        int     `json:"late_iterations"`
	Iterations  int     `json:"iterations"`
	MedianLagUs float64 `json:"median_lag_us"`
	MaxLagUs    float64 `json:"max_lag_us"`
	// LongestStallUs is the most one iteration cost.
	LongestStallUs float64 `json:"longest_stall_us"`
	// CostUs is what its lateness cost over every loop, CostPct that in
	// percent of the timed span.
	CostUs  float64 `json:"cost_us"`
	CostPct float64 `json:"cost_pct"`
	// Consistent: its usual place was behind the others' past the clock
	// error bounds, in at least one loop (a slow rank); otherwise it was
	// late now and then (stalls).
	Consistent bool `json:"consistent"`
}

// StragglerReport is the straggler analysis of a whole run.
type StragglerReport struct {
	Ranks      int                `json:"ranks"`
	Iterations int                `json:"iterations"` // over every segment
	Stragglers []StragglerFinding `json:"stragglers"`
	// Worst is the rank closest to being named when none is, and Margin
	// its score, its cost past the forgiven stall over the bar: 1 names a
	// rank, so 0.25 is four times below the bar (the text's "margin
	// 4.0x").
	Worst  *StragglerFinding `json:"closest,omitempty"`
	Margin float64           `json:"closest_score,omitempty"`
	// CostBarPct is the cost that names a rank, in percent of the timed
	// span (Criteria.CostFrac), past its longest stall up to HiccupUs
	// (Criteria.HiccupUs).
	CostBarPct float64 `json:"cost_bar_pct"`
	HiccupUs   float64 `json:"hiccup_us"`
	// ThresholdUs is the largest stall threshold used, JitterUs the
	// largest robust jitter, ClockErrUs the largest clock error bound.
	ThresholdUs float64 `json:"threshold_us"`
	JitterUs    float64 `json:"jitter_us"`
	ClockErrUs  float64 `json:"clock_error_us"`
}

// Named says whether the report names rank r.
func (rep StragglerReport) Named(r int) bool {
	for _, f := range rep.Stragglers {
		if f.Rank.Rank == r {
			return true
		}
	}
	return false
}

// maxNCCLDocument bounds what DecodeNCCL reads: -I 1 keeps every
// iteration's time of every process, a few MiB for a long sweep.
const maxNCCLDocument = 256 << 20

// DecodeNCCL reads an ncclbench document (--json, --save). Schemas 1 to
// NCCLSchema are read; a newer one is refused.
func DecodeNCCL(r io.Reader) (*NCCLRun, error) {
	var run NCCLRun
	if err := json.NewDecoder(io.LimitReader(r, maxNCCLDocument)).Decode(&run); err != nil {
		return nil, fmt.Errorf("not an ncclbench document: %w", err)
	}
	switch {
	case run.Tool != NCCLTool:
		return nil, fmt.Errorf("not an ncclbench document (tool %q)", run.Tool)
	case run.Schema > NCCLSchema:
		return nil, fmt.Errorf("ncclbench schema %d is newer than this rdmabench reads (%d)", run.Schema, NCCLSchema)
	}
	return &run, nil
}

// ReadNCCLFile reads an ncclbench document from a file.
func ReadNCCLFile(path string) (*NCCLRun, error) { return readFile(path, DecodeNCCL) }
