// Package render shows results: the perftest-style text table, the JSON
// document, .hgrm files, OpenMetrics and plots. Each renderer is a
// func(io.Writer, ...) error over the result model (results/); none measures
// anything.
package render

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/internal/intlist"
	"github.com/rdmabench/rdmabench/results"
)

const rule = "---------------------------------------------------------------------------------------"

// TextOptions select units and details in text tables.
type TextOptions struct {
	Gbits bool // --report-gbits: Gb/s instead of MiB/s
	PerQP bool // a line per QP under each row
	CPU   bool // CPU use under each row
}

// TextHeader writes the perftest-style banner and the table's header row.
func TextHeader(w io.Writer, r *results.Run, o TextOptions) error {
	var b strings.Builder
	fmt.Fprintln(&b, rule)
	fmt.Fprintf(&b, "                    %s (rdmabench)\n", r.Test.Title())
	fmt.Fprintf(&b, " Device          : %s port %d (%s)\n", r.Device, r.Port, r.LinkLayer)
	fmt.Fprintf(&b, " Connection type : %s        Mode : %s\n", r.Transport, r.Mode)
	fmt.Fprintf(&b, " QPs             : %s   threads %d, %s\n", intlist.Comma(r.QPs), r.Threads, cqMode(r.SharedCQ))
	if len(r.CPUs) > 0 || len(r.PeerCPUs) > 0 {
		fmt.Fprintf(&b, " CPUs            : %s, peer %s\n", cpuList(r.CPUs), cpuList(r.PeerCPUs))
	}
	if r.Memory != nil || r.PeerMemory != nil {
		fmt.Fprintf(&b, " Memory          : %s; peer %s\n", r.Memory, r.PeerMemory)
	}
	if r.Test.Op() == results.OpAtomic {
		fmt.Fprintf(&b, " Atomic          : %s\n", r.Atomic)
	}
	if r.Imm {
		fmt.Fprintf(&b, " Immediate data  : yes\n")
	}
	if r.PostList > 1 {
		fmt.Fprintf(&b, " Post list       : %d\n", r.PostList)
	}
	if r.Bidirectional {
		fmt.Fprintf(&b, " Bidirectional   : yes (figures are the sum of both directions)\n")
	}
	if r.GIDIndex >= 0 {
		fmt.Fprintf(&b, " GID index       : %d  (%s)\n", r.GIDIndex, r.GID)
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", r.MTU)
	fmt.Fprintf(&b, " TX depth        : %d\n", r.TxDepth)
	if !r.Test.IsLatency() {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", r.CQMod)
	}
	fmt.Fprintf(&b, " Max inline data : %d[B]%s\n", r.Inline, inlineNote(r))
	if r.Duration > 0 {
		fmt.Fprintf(&b, " Duration        : %g s (warm-up and cool-down excluded)\n", r.Duration)
	}
	if r.Test.IsLatency() {
		meaning := r.Latency // what the run measured (WRITE_WITH_IMM on GPU memory or with --rate)
		if meaning == "" {
			meaning = results.LatencyMeaning(r.Test)
		}
		fmt.Fprintf(&b, " Latency         : %s\n", meaning)
		if r.RateLatency != "" {
			fmt.Fprintf(&b, " Open loop       : %s\n", r.RateLatency)
		}
		fmt.Fprintf(&b, " Warm-up         : %d iterations dropped before each size (--warmup)\n", r.Warmup)
	} else {
		fmt.Fprintf(&b, " BW burst        : the highest rate of all QPs together over 2 ms or more (not perftest's BW peak)\n")
	}
	if r.Interval > 0 {
		fmt.Fprintf(&b, " Intervals       : every %g s, from completions; CQ moderation lowered so that each QP signals ~50 an interval\n", r.Interval)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, " Note            : %s\n", n)
	}
	fmt.Fprintln(&b, rule)
	if r.Test.IsLatency() {
		fmt.Fprintf(&b, " %-8s %-12s %-12s %-12s %-16s %-12s %-14s %-16s %-18s %-18s\n", "#bytes", "#iterations",
			"t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]",
			"99% [usec]", "99.9% [usec]", "99.99% [usec]")
	} else {
		unit := "MiB/sec"
		if o.Gbits {
			unit = "Gb/sec"
		}
		if multiQP(r) {
			fmt.Fprintf(&b, " %-10s %-5s %-13s %-20s %-22s %-14s %-8s\n", "#bytes", "#qps", "#iterations",
				"BW burst["+unit+"]", "BW average["+unit+"]", "MsgRate[Mpps]", "Jain")
		} else {
			fmt.Fprintf(&b, " %-10s %-13s %-20s %-22s %-14s\n", "#bytes", "#iterations",
				"BW burst["+unit+"]", "BW average["+unit+"]", "MsgRate[Mpps]")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// TextRow writes one result row and the lines under it.
func TextRow(w io.Writer, r *results.Run, res results.Result, o TextOptions) error {
	var err error
	if res.Lat != nil {
		l := res.Lat
		var b strings.Builder
		fmt.Fprintf(&b, " %-8d %-12d %-12.3f %-12.3f %-16.3f %-12.3f %-14.3f %-16.3f %-18.3f %-18.3f%s\n",
			res.Size, res.Iterations, l.Min, l.Max, l.P50, l.Mean, l.Stdev, l.P99, l.P99_9, l.P99_99, partialMark(res))
		writeLoaded(&b, res)
		writeRates(&b, res)
		writeCounters(&b, res)
		_, err = io.WriteString(w, b.String())
		return err
	}
	peak, avg := res.BWBurstGbps, res.BWAvgGbps
	if !o.Gbits {
		peak, avg = gbpsToMiBps(peak), gbpsToMiBps(avg)
	}
	if multiQP(r) {
		_, err = fmt.Fprintf(w, " %-10d %-5d %-13d %-20.2f %-22.2f %-14.6f %-8.3f%s\n", res.Size, res.QPs, res.Iterations, peak, avg, res.MsgRateMpps, jain(res), partialMark(res))
	} else {
		_, err = fmt.Fprintf(w, " %-10d %-13d %-20.2f %-22.2f %-14.6f%s\n", res.Size, res.Iterations, peak, avg, res.MsgRateMpps, partialMark(res))
	}
	if err != nil {
		return err
	}
	return textDetails(w, r, res, o)
}

// multiQP is true when the table needs the #qps and fairness columns.
func multiQP(r *results.Run) bool { return len(r.QPs) > 1 || (len(r.QPs) == 1 && r.QPs[0] > 1) }

func jain(res results.Result) float64 {
	if res.Spread == nil {
		return 1
	}
	return res.Spread.Jain
}

// textDetails prints the lines under a row: per-QP spread, directions,
// CPU, verification.
func textDetails(w io.Writer, r *results.Run, res results.Result, o TextOptions) error {
	unit, conv := "Gb/s", func(g float64) float64 { return g }
	if !o.Gbits {
		unit, conv = "MiB/s", gbpsToMiBps
	}
	var b strings.Builder
	if res.Spread != nil && res.QPs > 1 {
		fmt.Fprintf(&b, "     per QP [%s]: min %.2f  median %.2f  max %.2f  (Jain's fairness %.4f)\n", unit,
			conv(res.Spread.MinGbps), conv(res.Spread.MedianGbps), conv(res.Spread.MaxGbps), res.Spread.Jain)
		if o.PerQP {
			for i, g := range res.PerQPGbps {
				fmt.Fprintf(&b, "       qp %-4d %.2f\n", i, conv(g))
			}
		}
	}
	if res.Bidir != nil {
		fmt.Fprintf(&b, "     bidirectional [%s]: sent %.2f + received %.2f = %.2f\n", unit,
			conv(res.Bidir.SentGbps), conv(res.Bidir.ReceivedGbps), conv(res.BWAvgGbps))
	}
	if res.Received > 0 && res.Received < res.Iterations {
		fmt.Fprintf(&b, "     receiver counted %d of %d messages (%s does not retransmit)\n", res.Received, res.Iterations, r.Transport)
	}
	if o.CPU && res.CPU != nil {
		fmt.Fprintf(&b, "     cpu: local %.1f%% user %.1f%% sys, remote %.1f%% user %.1f%% sys (of one CPU)\n",
			res.CPU.Local.UserPct, res.CPU.Local.SysPct, res.CPU.Remote.UserPct, res.CPU.Remote.SysPct)
	}
	if res.BadBytes != nil {
		verdict := "all bytes match the pattern"
		if *res.BadBytes > 0 {
			verdict = fmt.Sprintf("%d BAD BYTES", *res.BadBytes)
		}
		fmt.Fprintf(&b, "     verify: %s\n", verdict)
	}
	writeCounters(&b, res)
	_, err := io.WriteString(w, b.String())
	return err
}

// writeLoaded prints the ping-pong under load (--load) beside the idle one
// of the row, every percentile, and what each load moved meanwhile.
func writeLoaded(b *strings.Builder, res results.Result) {
	if res.Loaded == nil || res.Lat == nil {
		return
	}
	fmt.Fprintf(b, "     under load   %-10s %-10s %-10s %-10s %-10s %-10s %-10s %-10s [usec]\n", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max", "avg")
	for _, row := range []struct {
		name string
		l    *results.LatencyStats
	}{{"idle", res.Lat}, {"loaded", res.Loaded}} {
		l := row.l
		fmt.Fprintf(b, "     %-12s %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f\n", row.name, l.Min, l.P50, l.P90, l.P99, l.P99_9, l.P99_99, l.Max, l.Mean)
	}
	for _, f := range res.Loads {
		if f.TooShort {
			fmt.Fprintf(b, "     load %s: no figure: the loaded ping-pong was too short for it (%d messages in %.2f s)\n", f.Load, f.Messages, f.Seconds)
			continue
		}
		fmt.Fprintf(b, "     load %s: %.3f Gb/s during the loaded ping-pong (%d messages in %.2f s)\n", f.Load, f.Gbps, f.Messages, f.Seconds)
	}
}

// writeRates prints the --rate series under a latency row, beside the idle
// figures of the row: corrected percentiles (from each request's due time),
// the uncorrected p99 for contrast, the knee and rates not reached.
func writeRates(b *strings.Builder, res results.Result) {
	if len(res.Rates) == 0 || res.RateIdle == nil {
		return
	}
	fmt.Fprintf(b, "     open loop [usec: see Open loop above]\n")
	fmt.Fprintf(b, "     %-12s %-12s %-10s %-10s %-10s %-10s %-10s %-10s %-12s\n", "rate/s", "achieved/s", "p50", "p90", "p99", "p99.9", "p99.99", "max", "uncorr. p99")
	l := res.RateIdle
	fmt.Fprintf(b, "     %-12s %-12s %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-12s\n", "idle", "closed loop", l.P50, l.P90, l.P99, l.P99_9, l.P99_99, l.Max, "")
	for _, s := range res.Rates {
		c := s.Lat
		if s.Iterations == 0 {
			// A pass cut before the end of its warm-up has an achieved
			// rate and no latencies: zeros would read as a fast path.
			fmt.Fprintf(b, "     %-12d %-12.0f %-10s %-10s %-10s %-10s %-10s %-10s %-12s%s\n",
				s.Rate, s.Achieved, "-", "-", "-", "-", "-", "-", "-", rateMark(s))
			continue
		}
		fmt.Fprintf(b, "     %-12d %-12.0f %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-10.3f %-12.3f%s\n",
			s.Rate, s.Achieved, c.P50, c.P90, c.P99, c.P99_9, c.P99_99, c.Max, s.Uncorrected.P99, rateMark(s))
	}
}

// rateMark says what is special about a rate: not reached (the link or the
// peer could not take it, so its latencies include the backlog), the knee.
func rateMark(s results.RateSeries) string {
	var m []string
	if !s.Reached {
		m = append(m, fmt.Sprintf("rate not reached (achieved %.0f/s)", s.Achieved))
	}
	if s.Iterations == 0 {
		m = append(m, "no samples past the warm-up")
	}
	if s.Knee {
		m = append(m, "knee: p99 > 2× idle p99")
	}
	if len(m) == 0 {
		return ""
	}
	return "  ← " + strings.Join(m, "; ")
}

// writeCounters prints the port counters that moved during a measurement,
// under its row: latency rows too, where loss shows as retransmissions.
func writeCounters(b *strings.Builder, res results.Result) {
	if len(res.PortCounters) > 0 {
		fmt.Fprintf(b, "     port counters moved: %s\n", countersText(res.PortCounters))
	}
	if len(res.PeerPortCounters) > 0 {
		fmt.Fprintf(b, "     peer port counters moved: %s\n", countersText(res.PeerPortCounters))
	}
}

func partialMark(r results.Result) string {
	if r.Partial {
		return " (partial: interrupted)"
	}
	return ""
}

// TextFooter closes the table.
func TextFooter(w io.Writer) error {
	_, err := fmt.Fprintln(w, rule)
	return err
}

func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "unpinned"
	}
	return intlist.Comma(cpus)
}

// inlineNote tells when the inline size used differs from what the device
// granted, and the server's when it differs from ours.
func inlineNote(r *results.Run) string {
	var n string
	if r.InlineGranted != 0 && r.InlineGranted != r.Inline {
		n = fmt.Sprintf(" (the device granted %d)", r.InlineGranted)
	}
	if r.PeerInline != nil && *r.PeerInline != r.Inline {
		n += fmt.Sprintf(", peer %d[B]", *r.PeerInline)
	}
	return n
}

func cqMode(shared bool) string {
	if shared {
		return "one shared CQ"
	}
	return "one CQ per thread"
}

func gbpsToMiBps(g float64) float64 { return g * 1e9 / 8 / (1 << 20) }

// countersText is "name +N, name +N" in name order.
func countersText(m map[string]uint64) string {
	names := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s +%d", n, m[n])
	}
	return strings.Join(parts, ", ")
}
