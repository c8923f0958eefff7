package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// ReportSchema is the version of the JSON document Run.WriteJSON emits.
// 2: bw_peak_gbps became bw_burst_gbps (a different quantity); inline_granted,
// peer_cpus, notes and warmup added.
const ReportSchema = 2

// Run is a whole benchmark run: what was measured and how.
type Run struct {
	Schema    int       `json:"schema"`
	Test      Test      `json:"test"`
	Device    string    `json:"device"`
	Port      int       `json:"port"`
	GIDIndex  int       `json:"gid_index"`
	GID       string    `json:"gid,omitempty"`
	MTU       int       `json:"mtu"`
	LinkLayer string    `json:"link_layer,omitempty"`
	Transport Transport `json:"transport"`
	Mode      string    `json:"mode"` // "client" or "loopback"
	Peer      string    `json:"peer,omitempty"`
	TxDepth   int       `json:"tx_depth"`
	CQMod     int       `json:"cq_mod"`
	// Inline is the inline size used: the smaller of the one asked for and
	// the one the device granted (InlineGranted, when it differs).
	Inline        int      `json:"inline"`
	InlineGranted int      `json:"inline_granted,omitempty"`
	PeerInline    *int     `json:"peer_inline,omitempty"` // the server's (client mode)
	Warmup        uint64   `json:"warmup,omitempty"`      // iterations measured but dropped before each size
	Duration      float64  `json:"duration_s,omitempty"`
	Interval      float64  `json:"interval_s,omitempty"`
	Latency       string   `json:"latency,omitempty"` // what a latency sample is
	QPs           []int    `json:"qps"`
	Threads       int      `json:"threads"`
	SharedCQ      bool     `json:"shared_cq,omitempty"`
	CPUs          []int    `json:"cpus,omitempty"`      // threads pinned to these, in turn
	PeerCPUs      []int    `json:"peer_cpus,omitempty"` // the server's (or loopback peer's)
	Notes         []string `json:"notes,omitempty"`     // depths lowered, and why
	Bidirectional bool     `json:"bidirectional,omitempty"`
	PostList      int      `json:"post_list"`
	Verify        bool     `json:"verify,omitempty"`
	Atomic        AtomicOp `json:"atomic,omitempty"`
	Imm           bool     `json:"imm,omitempty"`
	Results       []Result `json:"results"`
	Error         string   `json:"error,omitempty"`
	// Interrupted is set when Ctrl-C ended the run; Results hold what was
	// measured until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Result is one message size's figures (over one QP count of a sweep).
type Result struct {
	Size       int     `json:"size"`
	QPs        int     `json:"qps"`
	Iterations uint64  `json:"iterations"` // messages measured, all QPs together
	BWAvgGbps  float64 `json:"bw_avg_gbps,omitempty"`
	// BWBurstGbps is the highest rate of all QPs together over a window of
	// 2 ms or more (8 samples 250 µs or more apart) inside the measured
	// interval; at least the average. Not perftest's "BW peak" (see README).
	BWBurstGbps float64 `json:"bw_burst_gbps,omitempty"`
	// MinCQMod is the lowest CQ moderation used, when --interval lowered it
	// so that each QP signals about 50 completions an interval.
	MinCQMod    uint32        `json:"min_cq_mod,omitempty"`
	MsgRateMpps float64       `json:"msg_rate_mpps,omitempty"`
	Lat         *LatencyStats `json:"lat_us,omitempty"`
	// Partial marks a size cut short by Ctrl-C: its figures cover what ran.
	Partial bool `json:"partial,omitempty"`
	// PerQPGbps is each QP's bandwidth (they add up to BWAvgGbps); Spread
	// summarises them.
	PerQPGbps []float64 `json:"per_qp_gbps,omitempty"`
	Spread    *QPSpread `json:"qp_spread,omitempty"`
	// Bidir splits a bidirectional result; BWAvgGbps is then the sum.
	Bidir *Bidir `json:"bidirectional,omitempty"`
	// Received is what the receiver counted (UC and UD may lose messages).
	Received  uint64     `json:"received,omitempty"`
	CPU       *CPUUsage  `json:"cpu,omitempty"`
	Intervals []Interval `json:"intervals,omitempty"`
	BadBytes  *uint64    `json:"bad_bytes,omitempty"` // --verify
	// PortCounters are the port counters that grew during the measurement
	// on this side (traffic counters left out); PeerPortCounters the
	// server's, in client mode.
	PortCounters     map[string]uint64 `json:"port_counters,omitempty"`
	PeerPortCounters map[string]uint64 `json:"peer_port_counters,omitempty"`

	Hist *hdrhistogram.Histogram `json:"-"`
}

// LatencyMeaning says what a latency sample is for a test: the interval the
// loop times, and how it differs from perftest's.
func LatencyMeaning(t Test) string {
	switch t {
	case ReadLat:
		return "whole RDMA READ: post to its completion polled (as perftest)"
	case AtomicLat:
		return "whole atomic: post to its completion polled (as perftest)"
	case WriteLat:
		return "half the round trip: post of the WRITE to the peer's WRITE seen in memory; send completions reaped after the sample (perftest's sample includes them)"
	}
	return "half the round trip: post of the SEND to the peer's SEND polled from the CQ; the receive re-post and send-completion reaping come after the sample (perftest's sample includes them)"
}

// WriteJSON writes the run as one JSON document.
func (r *Run) WriteJSON(w io.Writer) error {
	out := *r
	out.Schema = ReportSchema
	if out.Results == nil {
		out.Results = []Result{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

const rule = "---------------------------------------------------------------------------------------"

var testTitles = map[Test]string{
	SendBW: "Send BW Test", WriteBW: "RDMA_Write BW Test", ReadBW: "RDMA_Read BW Test", AtomicBW: "Atomic BW Test",
	SendLat: "Send Latency Test", WriteLat: "RDMA_Write Latency Test", ReadLat: "RDMA_Read Latency Test", AtomicLat: "Atomic Latency Test",
}

// TextOptions select units and details in text tables.
type TextOptions struct {
	Gbits bool // --report-gbits: Gb/s instead of MiB/s
	PerQP bool // a line per QP under each row
	CPU   bool // CPU use under each row
}

// WriteTextHeader writes the perftest-style banner and the table's header row.
func (r *Run) WriteTextHeader(w io.Writer, o TextOptions) error {
	var b strings.Builder
	fmt.Fprintln(&b, rule)
	fmt.Fprintf(&b, "                    %s (rdmabench)\n", testTitles[r.Test])
	fmt.Fprintf(&b, " Device          : %s port %d (%s)\n", r.Device, r.Port, r.LinkLayer)
	fmt.Fprintf(&b, " Connection type : %s        Mode : %s\n", r.Transport, r.Mode)
	fmt.Fprintf(&b, " QPs             : %s   threads %d, %s\n", intList(r.QPs), r.Threads, cqMode(r.SharedCQ))
	if len(r.CPUs) > 0 || len(r.PeerCPUs) > 0 {
		fmt.Fprintf(&b, " CPUs            : %s, peer %s\n", cpuList(r.CPUs), cpuList(r.PeerCPUs))
	}
	if r.Test.Op() == OpAtomic {
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
	fmt.Fprintf(&b, " Max inline data : %d[B]%s\n", r.Inline, r.inlineNote())
	if r.Duration > 0 {
		fmt.Fprintf(&b, " Duration        : %g s (warm-up and cool-down excluded)\n", r.Duration)
	}
	if r.Test.IsLatency() {
		fmt.Fprintf(&b, " Latency         : %s\n", LatencyMeaning(r.Test))
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
		if r.multiQP() {
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

// WriteTextRow writes one result row.
func (r *Run) WriteTextRow(w io.Writer, res Result, o TextOptions) error {
	var err error
	if res.Lat != nil {
		l := res.Lat
		_, err = fmt.Fprintf(w, " %-8d %-12d %-12.3f %-12.3f %-16.3f %-12.3f %-14.3f %-16.3f %-18.3f %-18.3f%s\n",
			res.Size, res.Iterations, l.Min, l.Max, l.P50, l.Mean, l.Stdev, l.P99, l.P99_9, l.P99_99, partialMark(res))
		return err
	}
	peak, avg := res.BWBurstGbps, res.BWAvgGbps
	if !o.Gbits {
		peak, avg = gbpsToMiBps(peak), gbpsToMiBps(avg)
	}
	if r.multiQP() {
		_, err = fmt.Fprintf(w, " %-10d %-5d %-13d %-20.2f %-22.2f %-14.6f %-8.3f%s\n", res.Size, res.QPs, res.Iterations, peak, avg, res.MsgRateMpps, jain(res), partialMark(res))
	} else {
		_, err = fmt.Fprintf(w, " %-10d %-13d %-20.2f %-22.2f %-14.6f%s\n", res.Size, res.Iterations, peak, avg, res.MsgRateMpps, partialMark(res))
	}
	if err != nil {
		return err
	}
	return r.writeDetails(w, res, o)
}

// multiQP is true when the table needs the #qps and fairness columns.
func (r *Run) multiQP() bool { return len(r.QPs) > 1 || (len(r.QPs) == 1 && r.QPs[0] > 1) }

func jain(res Result) float64 {
	if res.Spread == nil {
		return 1
	}
	return res.Spread.Jain
}

// writeDetails prints the lines under a row: per-QP spread, directions,
// CPU, verification.
func (r *Run) writeDetails(w io.Writer, res Result, o TextOptions) error {
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
	if len(res.PortCounters) > 0 {
		fmt.Fprintf(&b, "     port counters moved: %s\n", countersText(res.PortCounters))
	}
	if len(res.PeerPortCounters) > 0 {
		fmt.Fprintf(&b, "     peer port counters moved: %s\n", countersText(res.PeerPortCounters))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func partialMark(r Result) string {
	if r.Partial {
		return " (partial: interrupted)"
	}
	return ""
}

// WriteTextFooter closes the table.
func (r *Run) WriteTextFooter(w io.Writer) error {
	_, err := fmt.Fprintln(w, rule)
	return err
}

func intList(v []int) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprint(x)
	}
	return strings.Join(parts, ",")
}

func cpuList(cpus []int) string {
	if len(cpus) == 0 {
		return "unpinned"
	}
	return intList(cpus)
}

// inlineNote tells when the inline size used differs from what the device
// granted, and the server's when it differs from ours.
func (r *Run) inlineNote() string {
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

// Bidir is a bidirectional result's two directions.
type Bidir struct {
	SentGbps     float64 `json:"sent_gbps"`     // this side to the peer
	ReceivedGbps float64 `json:"received_gbps"` // the peer to this side
}

// CPUUsage is both sides' CPU use over the measured interval.
type CPUUsage struct {
	Local  CPUFigure `json:"local"`
	Remote CPUFigure `json:"remote"`
}

// BandwidthResult computes a bandwidth row from a measured interval.
func BandwidthResult(size int, messages uint64, seconds, burstBytesPerSec float64) Result {
	res := Result{Size: size, Iterations: messages}
	if seconds > 0 {
		res.BWAvgGbps = float64(messages) * float64(size) * 8 / seconds / 1e9
		res.MsgRateMpps = float64(messages) / seconds / 1e6
	}
	res.BWBurstGbps = max(burstBytesPerSec*8/1e9, res.BWAvgGbps)
	return res
}
