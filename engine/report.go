package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// ReportSchema is the version of the JSON document Run.WriteJSON emits.
const ReportSchema = 1

// Run is a whole benchmark run: what was measured and how.
type Run struct {
	Schema    int      `json:"schema"`
	Test      Test     `json:"test"`
	Device    string   `json:"device"`
	Port      int      `json:"port"`
	GIDIndex  int      `json:"gid_index"`
	GID       string   `json:"gid,omitempty"`
	MTU       int      `json:"mtu"`
	LinkLayer string   `json:"link_layer,omitempty"`
	Transport string   `json:"transport"`
	Mode      string   `json:"mode"` // "client" or "loopback"
	Peer      string   `json:"peer,omitempty"`
	TxDepth   int      `json:"tx_depth"`
	CQMod     int      `json:"cq_mod"`
	Inline    int      `json:"inline"`
	Duration  float64  `json:"duration_s,omitempty"`
	Latency   string   `json:"latency,omitempty"` // what a latency sample is
	Results   []Result `json:"results"`
	Error     string   `json:"error,omitempty"`
	// Interrupted is set when Ctrl-C ended the run; Results hold what was
	// measured until then.
	Interrupted bool `json:"interrupted,omitempty"`
}

// Result is one message size's figures.
type Result struct {
	Size        int           `json:"size"`
	Iterations  uint64        `json:"iterations"`
	BWAvgGbps   float64       `json:"bw_avg_gbps,omitempty"`
	BWPeakGbps  float64       `json:"bw_peak_gbps,omitempty"`
	MsgRateMpps float64       `json:"msg_rate_mpps,omitempty"`
	Lat         *LatencyStats `json:"lat_us,omitempty"`
	// Partial marks a size cut short by Ctrl-C: its figures cover what ran.
	Partial bool `json:"partial,omitempty"`

	Hist *hdrhistogram.Histogram `json:"-"`
}

// LatencyMeaning says what a latency sample is for a test, as perftest does.
func LatencyMeaning(t Test) string {
	if t == ReadLat {
		return "whole RDMA READ operation (post to completion)"
	}
	return "half the round trip (ping-pong)"
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
	SendBW: "Send BW Test", WriteBW: "RDMA_Write BW Test", ReadBW: "RDMA_Read BW Test",
	SendLat: "Send Latency Test", WriteLat: "RDMA_Write Latency Test", ReadLat: "RDMA_Read Latency Test",
}

// TextOptions select units in text tables.
type TextOptions struct {
	Gbits bool // --report-gbits: Gb/s instead of MiB/s
}

// WriteTextHeader writes the perftest-style banner and the table's header row.
func (r *Run) WriteTextHeader(w io.Writer, o TextOptions) error {
	var b strings.Builder
	fmt.Fprintln(&b, rule)
	fmt.Fprintf(&b, "                    %s (rdmabench)\n", testTitles[r.Test])
	fmt.Fprintf(&b, " Device          : %s port %d (%s)\n", r.Device, r.Port, r.LinkLayer)
	fmt.Fprintf(&b, " Connection type : %s        Mode : %s\n", r.Transport, r.Mode)
	if r.GIDIndex >= 0 {
		fmt.Fprintf(&b, " GID index       : %d  (%s)\n", r.GIDIndex, r.GID)
	}
	fmt.Fprintf(&b, " Mtu             : %d[B]\n", r.MTU)
	fmt.Fprintf(&b, " TX depth        : %d\n", r.TxDepth)
	if !r.Test.IsLatency() {
		fmt.Fprintf(&b, " CQ Moderation   : %d\n", r.CQMod)
	}
	fmt.Fprintf(&b, " Max inline data : %d[B]\n", r.Inline)
	if r.Duration > 0 {
		fmt.Fprintf(&b, " Duration        : %g s (warm-up and cool-down excluded)\n", r.Duration)
	}
	if r.Test.IsLatency() {
		fmt.Fprintf(&b, " Latency         : %s\n", LatencyMeaning(r.Test))
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
		fmt.Fprintf(&b, " %-10s %-13s %-20s %-22s %-14s\n", "#bytes", "#iterations",
			"BW peak["+unit+"]", "BW average["+unit+"]", "MsgRate[Mpps]")
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
	peak, avg := res.BWPeakGbps, res.BWAvgGbps
	if !o.Gbits {
		peak, avg = gbpsToMiBps(peak), gbpsToMiBps(avg)
	}
	_, err = fmt.Fprintf(w, " %-10d %-13d %-20.2f %-22.2f %-14.6f%s\n", res.Size, res.Iterations, peak, avg, res.MsgRateMpps, partialMark(res))
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

func gbpsToMiBps(g float64) float64 { return g * 1e9 / 8 / (1 << 20) }

// BandwidthResult computes a bandwidth row from a measured interval.
func BandwidthResult(size int, messages uint64, seconds, peakBytesPerSec float64) Result {
	res := Result{Size: size, Iterations: messages}
	if seconds > 0 {
		res.BWAvgGbps = float64(messages) * float64(size) * 8 / seconds / 1e9
		res.MsgRateMpps = float64(messages) / seconds / 1e6
	}
	res.BWPeakGbps = max(peakBytesPerSec*8/1e9, res.BWAvgGbps)
	return res
}
