package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/nccl/straggler"
)

// Device is one "# Using devices" line.
type Device struct {
	Rank   int    `json:"rank"`
	Group  int    `json:"group"`
	Pid    int    `json:"pid"`
	Host   string `json:"hostname"`
	Device int    `json:"device"`
	BusID  string `json:"bus_id"`
	Name   string `json:"name"`
}

// Result is one half (out-of-place or in-place) of a table row.
type Result struct {
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
	CPUTimeUs *float64 `json:"cpu_time_us,omitempty"`
	PerIter   *PerIter `json:"per_iter,omitempty"` // -I 1
}

// MarshalJSON leaves "wrong" out of an unchecked half: a 0 there would
// read as validated to a consumer that ignores "checked".
func (x Result) MarshalJSON() ([]byte, error) {
	type plain Result // without this method
	if x.Checked {
		return json.Marshal(plain(x))
	}
	return json.Marshal(struct {
		TimeUs  float64  `json:"time_us"`
		AlgBW   float64  `json:"algbw_gbps"`
		BusBW   float64  `json:"busbw_gbps"`
		Checked bool     `json:"checked"`
		PerIter *PerIter `json:"per_iter,omitempty"`
	}{x.TimeUs, x.AlgBW, x.BusBW, x.Checked, x.PerIter})
}

// Point is one table row.
type Point struct {
	Size       int    `json:"size"`
	Count      int    `json:"count"`
	Type       string `json:"type"`
	Redop      string `json:"redop"`
	Root       int    `json:"root"`
	OutOfPlace Result `json:"out_of_place"`
	InPlace    Result `json:"in_place"`
}

// Config is what the header line reports.
type Config struct {
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

// Schema is the version of --json's document (Run). 2: "schema" itself,
// "rendezvous", -I 1's "per_iter" and "straggler", no "wrong" in unchecked halves; 1 (no
// "schema" field): before.
const Schema = 2

// Run is the whole run, as written by --json.
type Run struct {
	Tool          string   `json:"tool"`
	Schema        int      `json:"schema"`
	NotGPU        bool     `json:"not_gpu_measurement"`
	NCCLVersion   string   `json:"nccl_version"`
	NCCLLibrary   string   `json:"nccl_library"`
	CudartLibrary string   `json:"cudart_library"`
	Config        Config   `json:"config"`
	Devices       []Device `json:"devices"`
	// Rendezvous is rank 0's host:port when several processes met, and
	// RendezvousFrom where that address came from (given or derived).
	Rendezvous     string  `json:"rendezvous,omitempty"`
	RendezvousFrom string  `json:"rendezvous_source,omitempty"`
	RendezvousSec  float64 `json:"rendezvous_seconds,omitempty"` // how long rank 0 waited for every process
	Results        []Point `json:"results"`
	OutOfBounds    int     `json:"out_of_bounds"`
	AvgBusBW       float64 `json:"avg_bus_bandwidth_gbps"`
	// MinBusBW is NCCL_TESTS_MIN_BW's check of AvgBusBW; nil without it.
	MinBusBW *BusBWCheck     `json:"min_bus_bandwidth,omitempty"`
	NCCLLog  json.RawMessage `json:"nccl_log,omitempty"`
	// Straggler is the straggler analysis of -I 1 runs of several ranks.
	Straggler *straggler.Report `json:"straggler,omitempty"`
	Warnings  []string          `json:"warnings,omitempty"`
	Error     string            `json:"error,omitempty"`
	// Version is the ncclbench that wrote the document and the NCCL and
	// CUDA runtime it ran on.
	Version *version.Info `json:"version,omitempty"`
}

// FloatStr formats like nccl-tests' getFloatStr: as many decimals as fit in
// width, then exponent notation.
func FloatStr(v float64, width int) string {
	power := 0
	for val := 1.0; v >= val && power < 40; val *= 10 {
		power++
	}
	switch {
	case power < width-2:
		return fmt.Sprintf("%*.2f", width, v)
	case power < width-1:
		return fmt.Sprintf("%*.1f", width, v)
	case power < width+1:
		return fmt.Sprintf("%*.0f", width, v)
	case width >= 7:
		return fmt.Sprintf("%*.1e", width, v)
	default:
		return fmt.Sprintf("%*.0e", width, v)
	}
}

// WriteHeader prints the lines before the table.
func WriteHeader(w io.Writer, r *Run) {
	c := r.Config
	step, kind := c.StepBytes, "bytes"
	if c.StepFactor > 1 {
		step, kind = c.StepFactor, "factor"
	}
	fmt.Fprintf(w, "# ncclbench %s (nccl-tests compatible output) NCCL %s\n", c.Collective, r.NCCLVersion)
	if r.NotGPU {
		fmt.Fprintln(w, "# WARNING: not a GPU measurement (test library)")
	}
	fmt.Fprintf(w, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d\n",
		c.NThreads, c.NGpus, c.MinBytes, c.MaxBytes, step, kind, c.Warmup, c.Iters, c.AggIters, c.Check, c.Graphs)
	if c.Blocking != 0 {
		fmt.Fprintln(w, "# Blocking Enabled: wait for completion and barrier after each collective ")
	}
	if c.PerIter != 0 {
		fmt.Fprint(w, "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows")
		if c.PerIterSkp > 0 {
			fmt.Fprintf(w, "; summary skips first %d iterations", c.PerIterSkp)
		}
		fmt.Fprintln(w, " ")
	}
	if c.AlltoAll != "" {
		fmt.Fprintf(w, "# alltoall implemented with %s\n", c.AlltoAll)
	}
	if r.Rendezvous != "" {
		fmt.Fprintf(w, "# rendezvous: %s (%s)\n", r.Rendezvous, r.RendezvousFrom)
	}
	if c.Split != "" {
		fmt.Fprintf(w, "# %s: %d groups, a communicator each, at once; the figures are rank 0's group's (%d ranks), times averaged over all %d processes\n", c.Split, c.Groups, c.NRanks, c.NProcs)
	}
	if c.NProcs > 1 && r.RendezvousSec > 0 {
		fmt.Fprintf(w, "# Rendezvous: %d processes joined in %.3f s\n", c.NProcs, r.RendezvousSec)
	}
	fmt.Fprintln(w, "#")
	fmt.Fprintln(w, "# Using devices")
	for _, d := range r.Devices {
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n", d.Rank, d.Group, d.Pid, d.Host, d.Device, d.BusID, d.Name)
	}
	fmt.Fprintln(w, "#")
	timeCol := "time"
	if c.ReportCPUTime {
		timeCol = "cputime"
	}
	if c.PerIter != 0 {
		// nccl-tests' -I 1 table: four more columns per half.
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n", "", "", "", "", "")
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s\n",
			"size", "count", "type", "redop", "root", timeCol, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
			timeCol, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
		fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s\n",
			"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)",
			"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)")
		return
	}
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root",
		timeCol, "algbw", "busbw", "#wrong", timeCol, "algbw", "busbw", "#wrong")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
}

func writeResult(w io.Writer, x Result) {
	t := x.TimeUs
	if x.CPUTimeUs != nil { // -C 1 prints the CPU time, as nccl-tests
		t = *x.CPUTimeUs
	}
	if x.Checked {
		fmt.Fprintf(w, "  %7s  %6s  %6s  %6g", FloatStr(t, 7), FloatStr(x.AlgBW, 6), FloatStr(x.BusBW, 6), float64(x.Wrong))
	} else {
		fmt.Fprintf(w, "  %7s  %6s  %6s    N/A", FloatStr(t, 7), FloatStr(x.AlgBW, 6), FloatStr(x.BusBW, 6))
	}
	if p := x.PerIter; p != nil {
		fmt.Fprintf(w, "  %7s  %7s  %7s  %7s", FloatStr(p.MinUs, 7), FloatStr(p.MaxUs, 7), FloatStr(p.P99Us, 7), FloatStr(p.CVPct, 7))
	}
}

// WritePoint prints one table row.
func WritePoint(w io.Writer, p Point) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", p.Size, p.Count, p.Type, p.Redop, p.Root)
	writeResult(w, p.OutOfPlace)
	writeResult(w, p.InPlace)
	fmt.Fprintln(w)
}

// Summarize fills OutOfBounds (rows with wrong results, counted per
// out-of-place/in-place half as nccl-tests does) and AvgBusBW (mean busbw
// over all halves).
func (r *Run) Summarize() {
	r.OutOfBounds, r.AvgBusBW = 0, 0
	n := 0
	for _, p := range r.Results {
		for _, x := range []Result{p.OutOfPlace, p.InPlace} {
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

// BusBWCheck is the average bus bandwidth held against a minimum
// (nccl-tests' NCCL_TESTS_MIN_BW, GB/s).
type BusBWCheck struct {
	Minimum float64 `json:"minimum_gbps"`
	Okay    bool    `json:"okay"`
}

// minBusBWSlack is nccl-tests' allowance: a run passes at 90% of the
// minimum (common.cu: bw < check_avg_bw*0.9 fails).
const minBusBWSlack = 0.9

// CheckBusBW holds AvgBusBW (Summarize's) against min.
func (r *Run) CheckBusBW(min float64) {
	r.MinBusBW = &BusBWCheck{Minimum: min, Okay: r.AvgBusBW >= min*minBusBWSlack}
}

// BelowMinBusBW says why a checked run failed its minimum; empty when it
// passed or was not checked.
func (r *Run) BelowMinBusBW() string {
	if r.MinBusBW == nil || r.MinBusBW.Okay {
		return ""
	}
	return fmt.Sprintf("average bus bandwidth %.6g GB/s is below NCCL_TESTS_MIN_BW=%g (which passes from %.6g, 90%% of it)",
		r.AvgBusBW, r.MinBusBW.Minimum, r.MinBusBW.Minimum*minBusBWSlack)
}

// WriteFooter prints the summary lines and the note on busbw.
func WriteFooter(w io.Writer, r *Run, coll Collective) {
	ok := "OK"
	if r.OutOfBounds != 0 {
		ok = "FAILED"
	}
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", r.OutOfBounds, ok)
	bwOK := ""
	if r.MinBusBW != nil {
		bwOK = map[bool]string{true: "OK", false: "FAILED"}[r.MinBusBW.Okay]
	}
	fmt.Fprintf(w, "# %-20s : %.6g %s\n", "Avg bus bandwidth", r.AvgBusBW, bwOK)
	fmt.Fprintln(w, "#")
	fmt.Fprint(w, BusBWNote(coll, r.Config.NRanks))
	if r.NotGPU {
		fmt.Fprintln(w, "# WARNING: these numbers come from the CPU test library, not a GPU: they measure nothing about NCCL or your network.")
	}
}

// BusBWNote explains the two bandwidth columns, which are easy to misread.
func BusBWNote(coll Collective, n int) string {
	var b strings.Builder
	f := coll.BusFactor(n)
	var rule string
	switch coll.Name {
	case "all_reduce":
		rule = "2(n-1)/n"
	case "all_gather", "reduce_scatter", "alltoall":
		rule = "(n-1)/n"
	default:
		rule = "1"
	}
	fmt.Fprintf(&b, "# Note: algbw = size / time. busbw = algbw x %s = algbw x %.3g for n=%d ranks: the traffic each rank's\n", rule, f, n)
	fmt.Fprintln(&b, "#   busiest link carries, independent of n. Compare busbw (not algbw) with the hardware's link speed;")
	fmt.Fprintln(&b, "#   GB/s here is 10^9 bytes/s (a 400 Gb/s NIC is 50 GB/s).")
	return b.String()
}

// WriteJSON writes the whole run.
func WriteJSON(w io.Writer, r *Run) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}
