package bench

import (
	"fmt"
	"io"
	"strings"

	"github.com/rdmabench/rdmabench/results"
)

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
func WriteHeader(w io.Writer, r *results.NCCLRun) {
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

func writeResult(w io.Writer, x results.NCCLResult) {
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
func WritePoint(w io.Writer, p results.NCCLPoint) {
	fmt.Fprintf(w, "%12d  %12d  %8s  %6s  %6d", p.Size, p.Count, p.Type, p.Redop, p.Root)
	writeResult(w, p.OutOfPlace)
	writeResult(w, p.InPlace)
	fmt.Fprintln(w)
}

// WriteFooter prints the summary lines and the note on busbw.
func WriteFooter(w io.Writer, r *results.NCCLRun, coll Collective) {
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
