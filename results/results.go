// Package results is the versioned result model of the verbs tests: what
// --json and --save write, and what compare, plot and the metrics read. It
// holds data and the rules for reading it back; how a result is shown lives
// in render/, how it is measured in engine/.
package results

import (
	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// Schema is the version of the result document (--json, --save).
// 2: bw_peak_gbps became bw_burst_gbps (a different quantity); inline_granted,
// peer_cpus, notes and warmup added. Later fields that a reader of 2 may
// ignore (repeats; memory and peer_memory; repeat_asked) are added without a
// new version.
const Schema = 2

// Run is a whole benchmark run: what was measured and how.
type Run struct {
	Schema    int               `json:"schema"`
	Test      Test              `json:"test"`
	Device    string            `json:"device"`
	Port      int               `json:"port"`
	GIDIndex  int               `json:"gid_index"`
	GID       string            `json:"gid,omitempty"`
	MTU       int               `json:"mtu"`
	LinkLayer rdmasys.LinkLayer `json:"link_layer,omitempty"`
	Transport Transport         `json:"transport"`
	Mode      string            `json:"mode"` // "client" or "loopback"
	Peer      string            `json:"peer,omitempty"`
	TxDepth   int               `json:"tx_depth"`
	CQMod     int               `json:"cq_mod"`
	// Inline is the inline size used: the smaller of the one asked for and
	// the one the device granted (InlineGranted, when it differs).
	Inline        int     `json:"inline"`
	InlineGranted int     `json:"inline_granted,omitempty"`
	PeerInline    *int    `json:"peer_inline,omitempty"` // the server's (client mode)
	Warmup        uint64  `json:"warmup,omitempty"`      // iterations measured but dropped before each size
	Duration      float64 `json:"duration_s,omitempty"`
	Interval      float64 `json:"interval_s,omitempty"`
	Latency       string  `json:"latency,omitempty"` // what a latency sample is
	// RateLatency is what a --rate sample is (Result.Rates).
	RateLatency   string   `json:"rate_latency,omitempty"`
	QPs           []int    `json:"qps"`
	Sizes         []int    `json:"sizes,omitempty"` // asked for, in order; Results may hold fewer (cut short)
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
	// Memory is where this side's buffers live; PeerMemory the server's (or
	// the loopback peer's). Absent in documents from before --use-cuda.
	Memory     *Memory  `json:"memory,omitempty"`
	PeerMemory *Memory  `json:"peer_memory,omitempty"`
	Results    []Result `json:"results"`
	Error      string   `json:"error,omitempty"`
	// Interrupted is set when Ctrl-C ended the run; Results hold what was
	// measured until then.
	Interrupted bool `json:"interrupted,omitempty"`
	// Repeat is how many times the whole measurement ran (--repeat N); each
	// result's figures are then the means and Repeats holds every run's.
	Repeat int `json:"repeat,omitempty"`
	// RepeatAsked is the N of --repeat N (2 or more). A failure ends the
	// repeats early, so Repeat, and the repeats of the sizes the failing
	// one did not reach, may be fewer: compare refuses such a run as a
	// gate. Absent without --repeat and in documents from before it.
	RepeatAsked int `json:"repeat_asked,omitempty"`
	// Version is the rdmabench that wrote the document and the libibverbs
	// it ran on; absent in documents from before it.
	Version *version.Info `json:"version,omitempty"`
}

// Result is one message size's figures (over one QP count of a sweep).
type Result struct {
	Size       int     `json:"size"`
	QPs        int     `json:"qps"`
	Iterations uint64  `json:"iterations"` // messages measured, all QPs together
	BWAvgGbps  float64 `json:"bw_avg_gbps,omitempty"`
	// BWBurstGbps is the highest rate of all QPs together over a window of
	// 2 ms or more (8 samples 250 µs or more apart) inside the measured
	// interval; at least the average. Not perftest's "BW peak" (docs/core-tests.md).
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
	// Repeats are each repetition's headline figures (--repeat), in order.
	Repeats []Figures `json:"repeats,omitempty"`
	// Rates are the open-loop series (--rate) measured after Lat, the idle
	// closed-loop ping-pong, in the order asked.
	Rates []RateSeries `json:"rates,omitempty"`
	// Loaded is the ping-pong again while the loads (--load) ran, as many
	// iterations as Lat, which was measured with the link idle; Loads are
	// the loads' figures during it.
	Loaded     *LatencyStats           `json:"loaded_lat_us,omitempty"`
	Loads      []LoadFigures           `json:"loads,omitempty"`
	LoadedHist *hdrhistogram.Histogram `json:"-"`
	// RateIdle is Lat in the rate series' units (Run.RateLatency): whole
	// round trips for send and write, whose Lat is half of one.
	RateIdle *LatencyStats `json:"rate_idle_lat_us,omitempty"`

	Hist *hdrhistogram.Histogram `json:"-"`
}

// RateSeries is one open-loop rate (--rate): requests sent on a fixed
// schedule, several in flight, each sample timed from the request's due
// time (corrected for coordinated omission: a stall counts for every
// request that should have gone during it), and the same samples timed
// from the actual post (what a tool without the correction reports).
type RateSeries struct {
	Rate int `json:"rate"` // asked, requests per second per QP
	// Achieved is the rate the requests were posted at (per QP, averaged
	// over QPs); Reached says it came within RateReachedShare of Rate.
	Achieved   float64 `json:"achieved"`
	Reached    bool    `json:"reached"`
	Iterations uint64  `json:"iterations"` // samples, all QPs together
	// Knee marks the first rate whose corrected p99 exceeds twice the idle
	// p99 (Result.Lat).
	Knee        bool         `json:"knee,omitempty"`
	Lat         LatencyStats `json:"lat_us"`             // corrected
	Uncorrected LatencyStats `json:"uncorrected_lat_us"` // from the actual post

	Hist            *hdrhistogram.Histogram `json:"-"`
	UncorrectedHist *hdrhistogram.Histogram `json:"-"`
}

// LoadFigures are one background load's (--load) figures while the loaded
// ping-pong ran: its warm-up and what came after are left out.
type LoadFigures struct {
	Load     string  `json:"load"` // as a SPEC: test, size, QPs
	Test     Test    `json:"test"`
	Size     int     `json:"size"`
	QPs      int     `json:"qps"`
	Messages uint64  `json:"messages"`
	Seconds  float64 `json:"seconds"`
	Gbps     float64 `json:"gbps"`
	// TooShort: the loaded ping-pong, extended as far as it may be, ended
	// before the load counted enough signalled completions for a figure.
	TooShort bool `json:"window_too_short,omitempty"`
}

// RateReachedShare is how close to the asked rate the achieved one must be
// for the rate to count as reached: the schedule may slip by a few per cent
// on a busy host without the link being the limit.
const RateReachedShare = 0.95

// MarkKnee sets Knee on the first series whose corrected p99 exceeds twice
// idleP99; it returns that series' index, or -1.
func MarkKnee(series []RateSeries, idleP99 float64) int {
	for i := range series {
		series[i].Knee = false
	}
	for i := range series {
		if idleP99 > 0 && series[i].Lat.P99 > 2*idleP99 {
			series[i].Knee = true
			return i
		}
	}
	return -1
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

// CPUFigure is CPU time over a measured interval, in percent of one CPU
// (qperf's convention: 200 means two CPUs busy).
type CPUFigure struct {
	UserPct float64 `json:"user_pct"`
	SysPct  float64 `json:"sys_pct"`
}

// Interval is one --interval report of a bandwidth run.
type Interval struct {
	StartS   float64 `json:"start_s"`
	EndS     float64 `json:"end_s"`
	Messages uint64  `json:"messages"`
	Bytes    uint64  `json:"bytes"`
	Gbps     float64 `json:"gbps"`
}

// QPSpread summarises how evenly QPs shared the bandwidth.
type QPSpread struct {
	MinGbps    float64 `json:"min_gbps"`
	MedianGbps float64 `json:"median_gbps"`
	MaxGbps    float64 `json:"max_gbps"`
	// Jain is Jain's fairness index, (Σx)² / (n·Σx²): 1 when all QPs got the
	// same, 1/n when one got everything.
	Jain float64 `json:"jain"`
}

// LatencyStats are the figures of a latency result, in microseconds.
type LatencyStats struct {
	Min    float64 `json:"min"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	P99_9  float64 `json:"p99_9"`
	P99_99 float64 `json:"p99_99"`
	Max    float64 `json:"max"`
	Mean   float64 `json:"mean"`
	Stdev  float64 `json:"stdev"`
}

// Figures are one repetition's headline figures of a result (--repeat): what
// compare needs to tell a change from noise.
type Figures struct {
	BWAvgGbps   float64 `json:"bw_avg_gbps,omitempty"`
	MsgRateMpps float64 `json:"msg_rate_mpps,omitempty"`
	LatP50us    float64 `json:"lat_p50_us,omitempty"`
	LatP99us    float64 `json:"lat_p99_us,omitempty"`
}
