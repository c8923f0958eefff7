// Package csrc runs the measurement loops, written in C, over verbs objects.
// Go calls one loop per measurement (or per chunk of a long latency run),
// never once per message: a cgo call costs more than a message on real HCAs.
package csrc

/*
#cgo CFLAGS: -O2 -Wall
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "loops.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/rdmabench/rdmabench/verbs"
)

// Kind selects a loop.
type Kind int

const (
	BWPost   Kind = iota // bandwidth initiator over QPs [Lo, Hi)
	BWRecv               // receiver of a send bandwidth test
	LatSend              // SEND/RECV ping-pong
	LatWrite             // RDMA WRITE ping-pong
	LatOne               // one outstanding READ or atomic at a time
	// LatRate is --rate's open-loop initiator: requests on a fixed
	// schedule, several in flight; RateByRecv says what answers them.
	LatRate
)

// Target is one QP of a measurement and the memory it moves.
type Target struct {
	QP         *verbs.QP
	AH         *verbs.AH // UD destination
	RemoteQPN  uint32    // UD
	LocalAddr  uint64
	LKey       uint32
	RemoteAddr uint64
	RKey       uint32
	RecvAddr   uint64
	RecvLKey   uint32
	RecvLen    uint32
	// PrepostRecvs is how many receives to post before the loop starts:
	// what the loop keeps posted less what earlier loops left posted.
	PrepostRecvs int
	// Index is the QP's index in its connection (its place in the set may
	// change from one measurement to the next; receives left posted carry
	// the index).
	Index int
	// MaxInFlight, when non-zero, caps this QP's requests in flight below
	// the tx depth, and PostGap spaces its posts (the test hook that slows
	// one QP).
	MaxInFlight int
	PostGap     time.Duration

	raw unsafe.Pointer // a struct ibv_qp of the fake device (tests), instead of QP
}

func (t Target) rawQP() unsafe.Pointer {
	if t.raw != nil {
		return t.raw
	}
	return t.QP.Raw()
}

// QPSet holds a measurement's QPs in C memory, where every thread's loop sees
// the per-QP counts (a shared CQ hands one thread another's completions).
type QPSet struct {
	p       *C.struct_rb_qp
	posOf   *C.uint32_t // set position of each QP index
	nIndex  int
	targets []Target
}

// NewQPSet copies targets into C memory. Free it after the last loop.
func NewQPSet(targets []Target) *QPSet {
	n := max(len(targets), 1)
	p := (*C.struct_rb_qp)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_rb_qp{}))))
	s := &QPSet{p: p, targets: targets}
	for _, t := range targets {
		s.nIndex = max(s.nIndex, t.Index+1)
	}
	s.posOf = (*C.uint32_t)(C.malloc(C.size_t(max(s.nIndex, 1)) * 4))
	pos := unsafe.Slice(s.posOf, max(s.nIndex, 1))
	for i := range pos {
		pos[i] = C.uint32_t(^uint32(0))
	}
	all := unsafe.Slice(p, n)
	for i, t := range targets {
		q := &all[i]
		q.qp = (*C.struct_ibv_qp)(t.rawQP())
		if t.AH != nil {
			q.ah = (*C.struct_ibv_ah)(t.AH.Raw())
			q.remote_qpn, q.remote_qkey = C.uint32_t(t.RemoteQPN), verbs.UDQKey
		}
		q.laddr, q.lkey = C.uint64_t(t.LocalAddr), C.uint32_t(t.LKey)
		q.raddr, q.rkey = C.uint64_t(t.RemoteAddr), C.uint32_t(t.RKey)
		q.recv_addr, q.recv_lkey, q.recv_len = C.uint64_t(t.RecvAddr), C.uint32_t(t.RecvLKey), C.uint32_t(t.RecvLen)
		q.prepost = C.uint32_t(t.PrepostRecvs)
		q.index = C.uint32_t(t.Index)
		pos[t.Index] = C.uint32_t(i)
		q.max_in_flight = C.uint32_t(t.MaxInFlight)
		q.post_gap_ns = C.uint64_t(max(t.PostGap, 0))
	}
	return s
}

// Len is the number of QPs.
func (s *QPSet) Len() int { return len(s.targets) }

// QPCounts are one QP's figures after a loop.
type QPCounts struct {
	Completed uint64 // messages completed (received, for a receiver)
	Measured  uint64 // messages inside the measured interval
	BadBytes  uint64 // --verify: bytes that differed from the pattern
	// Start and End are the QP's own measured interval (initiators):
	// iteration mode, its first post to its last completion; duration mode,
	// its loop's window. CLOCK_MONOTONIC since boot.
	Start, End time.Duration
}

// Seconds is the QP's own measured interval.
func (c QPCounts) Seconds() float64 { return (c.End - c.Start).Seconds() }

// Counts reads QP i's figures; call it after the loops have returned.
func (s *QPSet) Counts(i int) QPCounts {
	q := &unsafe.Slice(s.p, len(s.targets))[i]
	return QPCounts{Completed: uint64(q.completed), Measured: uint64(q.win_end - q.win_start), BadBytes: uint64(q.bad_bytes),
		Start: time.Duration(q.t_first_ns), End: time.Duration(q.t_last_ns)}
}

// Free releases the C memory.
func (s *QPSet) Free() {
	if s.p != nil {
		C.free(unsafe.Pointer(s.p))
		C.free(unsafe.Pointer(s.posOf))
		s.p, s.posOf = nil, nil
	}
}

// Params describe one loop; see rb_params in loops.h.
type Params struct {
	Set    *QPSet
	Lo, Hi int // this loop's QPs; Hi 0 means Lo+1
	CQ     *verbs.CQ
	cqRaw  unsafe.Pointer // a struct ibv_cq of the fake device (tests), instead of CQ
	Opcode verbs.SendOpcode
	Size   uint32
	Imm    uint32 // host order
	// Atomics: the add value, or compare and swap values.
	CompareAdd, Swap uint64

	TxDepth   uint32
	RxDepth   uint32
	CQMod     uint32
	PostList  uint32
	UseInline bool
	UDGRH     bool // receives carry a 40-byte GRH before the payload
	Initiator bool

	Iterations             uint64    // per QP; 0: run until End (duration mode)
	End                    time.Time // duration mode: stop posting
	MeasureFrom, MeasureTo time.Time
	Deadline               time.Time // hard limit, required

	Samples  []uint64 // latency samples (ns), filled from index 0
	TagBase  uint32
	Stop     *Flag
	Ready    *Flag    // set by the loop once it may receive (initiators: once set up)
	Start    *Flag    // initiators wait for it after Ready, so that all lanes start at once
	Progress *Counter // messages completed, all lanes together, readable while the loops run
	// Interval (--interval) lowers the CQ moderation as the rate requires,
	// so that each QP signals about 50 completions an interval.
	Interval time.Duration
	Verify   bool
	Seed     uint32
	// Slots > 1 gives message n its own slot (n-1)%Slots, SlotStride bytes
	// apart, in the local, remote and receive regions.
	Slots       uint32
	SlotStride  uint64
	CorruptMsg  uint64 // test hook: damage this message after filling it
	PatternBase uint64 // message n carries pattern PatternBase+n
	// FixedPattern: every message carries pattern 1 (a side on GPU memory
	// fills and checks its slots outside the loops).
	FixedPattern bool
	// LatRate: request n is due RateInterval after request n-1's due
	// time. Samples get each answer's time from its due time (corrected
	// for coordinated omission), SamplesRaw (as long as Samples) from its
	// actual post. RateByRecv: answers are the peer's SENDs, not the
	// requests' own completions.
	RateInterval time.Duration
	SamplesRaw   []uint64
	RateByRecv   bool
	// StallAt is a test hook for ping-pong responders: before answering
	// message StallAt (from 1, counted over the call) wait StallFor, once.
	StallAt  uint64
	StallFor time.Duration
}

// Status is how a loop ended.
type Status int

const (
	OK        Status = C.RB_OK
	Timeout   Status = C.RB_TIMEOUT
	Stopped   Status = C.RB_STOPPED
	WCError   Status = C.RB_WC_ERROR
	PostError Status = C.RB_POST_ERROR
	PollError Status = C.RB_POLL_ERROR
	ForeignWC Status = C.RB_FOREIGN_WC
)

// Result is what a loop measured.
type Result struct {
	Status     Status
	WCStatus   verbs.WCStatus
	VendorErr  uint32
	WRID       uint64
	QPNum      uint32 // the QP whose completion or post failed
	PostErrno  int
	Completed  uint64        // messages in the measured interval, this loop's QPs
	Start, End time.Duration // CLOCK_MONOTONIC since boot
	// BurstBytesPerSec is the highest rate of all lanes together over a
	// window of 2 ms or more inside the measured interval.
	BurstBytesPerSec float64
	MinCQMod         uint32 // the lowest CQ moderation the loop used
	Samples          int
	// LatRate: requests posted, and the time from the first post to the
	// last (the achieved rate is Posted-1 over it).
	Posted   uint64
	PostSpan time.Duration
	// RateCut (LatRate): the loop fell behind its schedule by more than
	// the schedule's span and RateCutGrace, and stopped posting: the rate
	// was not reached, and the samples of what it posted stand (Status OK).
	RateCut bool
}

// RateCutGrace is the slack LatRate allows beyond twice its planned span
// before it stops posting (RB_RATE_CUT_GRACE_NS; see loops.h): the engine's
// step deadline counts it for each rate.
const RateCutGrace = time.Duration(C.RB_RATE_CUT_GRACE_NS)

// Elapsed is the measured interval.
func (r Result) Elapsed() time.Duration { return r.End - r.Start }

// Err turns an unsuccessful status into an error naming what failed.
// ErrStopped is a loop ended by its stop flag (Ctrl-C, or another side's
// failure): not a failure of its own.
var ErrStopped = errors.New("stopped")

func (r Result) Err(what string) error {
	switch r.Status {
	case OK:
		return nil
	case Timeout:
		return fmt.Errorf("%s: deadline passed after %d messages (peer gone or link down?)", what, r.Completed)
	case Stopped:
		return fmt.Errorf("%s: %w after %d messages", what, ErrStopped, r.Completed)
	case WCError:
		return fmt.Errorf("%s: %w", what, &verbs.CompletionError{Status: r.WCStatus, VendorErr: r.VendorErr, WRID: r.WRID, QPN: r.QPNum})
	case PostError:
		return fmt.Errorf("%s: ibv_post on QP %d: %w", what, r.QPNum, syscall.Errno(r.PostErrno))
	case ForeignWC:
		return fmt.Errorf("%s: a completion of QP %d, which another loop owns, arrived on this loop's CQ", what, r.QPNum)
	default:
		return fmt.Errorf("%s: ibv_poll_cq failed", what)
	}
}

// Now is CLOCK_MONOTONIC, the clock the loops report in.
func Now() time.Duration { return time.Duration(C.rb_now_ns()) }

// monoNS converts a wall-clock time into the loops' monotonic clock.
func monoNS(t time.Time) C.uint64_t {
	if t.IsZero() {
		return 0
	}
	d := time.Until(t)
	if d < 0 {
		d = 0
	}
	return C.uint64_t(Now() + d)
}

var calibrateOnce sync.Once
var nsPerCycle float64

// Calibrate measures the loops' cycle counter against CLOCK_MONOTONIC (once
// per process, 20 ms) and returns nanoseconds per cycle; Run calls it first.
func Calibrate() float64 {
	calibrateOnce.Do(func() { nsPerCycle = float64(C.rb_calibrate(20e6)) })
	return nsPerCycle
}

var running atomic.Int64

// Running is the number of loops running now: none may be left running once
// their owner returns (tests check it).
func Running() int { return int(running.Load()) }

// Run executes one loop and blocks until it ends.
func Run(kind Kind, p Params) Result {
	Calibrate()
	running.Add(1)
	defer running.Add(-1)
	cp := cParams(p)
	// cp holds Go pointers (the sample buffers) while C runs: pin them
	// for the call.
	var pin runtime.Pinner
	defer pin.Unpin()
	pinSamples(&pin, p, &cp)
	var r C.struct_rb_result
	switch kind {
	case BWPost:
		C.rb_bw_post(&cp, &r)
	case BWRecv:
		C.rb_bw_recv(&cp, &r)
	case LatSend:
		C.rb_lat_send(&cp, &r, cBool(p.Initiator))
	case LatWrite:
		C.rb_lat_write(&cp, &r, cBool(p.Initiator))
	case LatOne:
		C.rb_lat_one(&cp, &r)
	case LatRate:
		C.rb_lat_rate(&cp, &r, cBool(p.RateByRecv))
	default:
		panic(fmt.Sprintf("csrc: unknown loop kind %d", kind))
	}
	return resultOf(&r)
}

// cParams is p as the loops take it, less the sample buffers (pinSamples).
func cParams(p Params) C.struct_rb_params {
	hi := p.Hi
	if hi == 0 {
		hi = p.Lo + 1
	}
	if p.Lo < 0 || hi > p.Set.Len() || p.Lo >= hi {
		panic(fmt.Sprintf("csrc: QP range [%d, %d) outside a set of %d", p.Lo, hi, p.Set.Len()))
	}
	var cp C.struct_rb_params
	cp.qps, cp.lo, cp.hi = p.Set.p, C.uint32_t(p.Lo), C.uint32_t(hi)
	cp.pos_of, cp.n_index = p.Set.posOf, C.uint32_t(p.Set.nIndex)
	if p.cqRaw != nil {
		cp.cq = (*C.struct_ibv_cq)(p.cqRaw)
	} else {
		cp.cq = (*C.struct_ibv_cq)(p.CQ.Raw())
	}
	cp.opcode = C.int(p.Opcode)
	cp.size = C.uint32_t(p.Size)
	cp.imm = C.uint32_t(verbs.NetworkOrder(p.Imm))
	cp.compare_add, cp.swap = C.uint64_t(p.CompareAdd), C.uint64_t(p.Swap)
	cp.tx_depth, cp.rx_depth, cp.cq_mod = C.uint32_t(p.TxDepth), C.uint32_t(p.RxDepth), C.uint32_t(p.CQMod)
	cp.post_list = C.uint32_t(p.PostList)
	if t := p.Set.targets[p.Lo]; t.QP != nil {
		cp.sq_size = C.uint32_t(t.QP.SendQueueSize())
	}
	cp.use_inline = cBool(p.UseInline)
	cp.ud_grh = cBool(p.UDGRH)
	cp.iters = C.uint64_t(p.Iterations)
	cp.end_ns = monoNS(p.End)
	cp.measure_from_ns = monoNS(p.MeasureFrom)
	cp.measure_to_ns = monoNS(p.MeasureTo)
	cp.deadline_ns = monoNS(p.Deadline)
	if p.Deadline.IsZero() {
		cp.deadline_ns = monoNS(time.Now().Add(time.Hour)) // never unbounded
	}
	if p.Stop != nil {
		cp.stop = p.Stop.p
	}
	if p.Ready != nil {
		cp.ready = p.Ready.p
	}
	if p.Start != nil {
		cp.start = p.Start.p
	}
	cp.interval_ns = C.uint64_t(max(p.Interval, 0))
	if p.Progress != nil {
		cp.progress = p.Progress.p
	}
	cp.rate_interval_ns = C.uint64_t(max(p.RateInterval, 0))
	cp.stall_at, cp.stall_ns = C.uint64_t(p.StallAt), C.uint64_t(max(p.StallFor, 0))
	cp.tag_base = C.uint32_t(p.TagBase)
	cp.verify = cBool(p.Verify)
	cp.pattern_seed = C.uint32_t(p.Seed)
	cp.slots, cp.slot_stride, cp.corrupt_msg = C.uint32_t(p.Slots), C.uint64_t(p.SlotStride), C.uint64_t(p.CorruptMsg)
	cp.pattern_base = C.uint64_t(p.PatternBase)
	cp.fixed_pattern = cBool(p.FixedPattern)
	return cp
}

// pinSamples points cp at p's sample buffers, pinned by pin until the
// caller unpins it after the loop.
func pinSamples(pin *runtime.Pinner, p Params, cp *C.struct_rb_params) {
	if len(p.Samples) > 0 {
		pin.Pin(&p.Samples[0])
		cp.samples = (*C.uint64_t)(unsafe.Pointer(&p.Samples[0]))
		cp.sample_cap = C.uint64_t(len(p.Samples))
	}
	if len(p.SamplesRaw) > 0 {
		if len(p.SamplesRaw) < len(p.Samples) {
			panic("csrc: SamplesRaw shorter than Samples") // a caller's bug: C would write past it
		}
		pin.Pin(&p.SamplesRaw[0])
		cp.samples_raw = (*C.uint64_t)(unsafe.Pointer(&p.SamplesRaw[0]))
	}
}

// resultOf is the Go form of a loop's result.
func resultOf(r *C.struct_rb_result) Result {
	return Result{
		Status: Status(r.status), WCStatus: verbs.WCStatus(r.wc_status), VendorErr: uint32(r.vendor_err),
		WRID: uint64(r.wr_id), QPNum: uint32(r.qp_num), PostErrno: int(r.post_errno), Completed: uint64(r.completed),
		Start: time.Duration(r.t_start_ns), End: time.Duration(r.t_end_ns),
		BurstBytesPerSec: float64(r.burst_bytes_per_ns) * 1e9, MinCQMod: uint32(r.min_cq_mod), Samples: int(r.samples),
		Posted: uint64(r.posted), PostSpan: time.Duration(r.post_span_ns), RateCut: r.rate_cut != 0,
	}
}

func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Flag is an int in C memory that loops poll; Go sets it from another
// goroutine (Ctrl-C, a dropped control connection) to end a loop early, or a
// loop sets it (ready).
type Flag struct{ p *C.int }

// NewFlag allocates a cleared flag. Free it with Free.
func NewFlag() *Flag {
	return &Flag{p: (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))}
}

// Set sets the flag.
func (f *Flag) Set() { C.rb_set_flag(f.p, 1) }

// Clear resets the flag.
func (f *Flag) Clear() { C.rb_set_flag(f.p, 0) }

// IsSet reports whether the flag is set.
func (f *Flag) IsSet() bool { return C.rb_get_flag(f.p) != 0 }

// Free releases the flag's memory; no loop may be using it.
func (f *Flag) Free() {
	if f.p != nil {
		C.free(unsafe.Pointer(f.p))
		f.p = nil
	}
}

// Counter is a uint64 in C memory that loops add to as messages complete, so
// Go can report intervals while they run.
type Counter struct{ p *C.uint64_t }

// NewCounter allocates a zeroed counter. Free it with Free.
func NewCounter() *Counter {
	return &Counter{p: (*C.uint64_t)(C.calloc(1, 8))}
}

// Load reads the counter.
func (c *Counter) Load() uint64 { return uint64(C.rb_get_u64(c.p)) }

// Reset zeroes the counter; no loop may be running.
func (c *Counter) Reset() { *c.p = 0 }

// Free releases the counter's memory; no loop may be using it.
func (c *Counter) Free() {
	if c.p != nil {
		C.free(unsafe.Pointer(c.p))
		c.p = nil
	}
}

// Pattern fills buf with the verification pattern of message msg.
func Pattern(buf []byte, seed uint32, msg uint64) {
	if len(buf) > 0 {
		C.rb_pattern((*C.uint8_t)(unsafe.Pointer(&buf[0])), C.uint32_t(len(buf)), C.uint32_t(seed), C.uint64_t(msg))
	}
}

// PatternCheck counts the bytes of buf that differ from message msg's pattern.
func PatternCheck(buf []byte, seed uint32, msg uint64) uint64 {
	if len(buf) == 0 {
		return 0
	}
	return uint64(C.rb_pattern_check((*C.uint8_t)(unsafe.Pointer(&buf[0])), C.uint32_t(len(buf)), C.uint32_t(seed), C.uint64_t(msg)))
}

// cycles reads the loops' counter (for tests).
func cycles() uint64 { return uint64(C.rb_cycles_now()) }
