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
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/rdmabench/rdmabench/verbs"
)

// Kind selects a loop.
type Kind int

const (
	BWPost Kind = iota
	BWRecv
	LatSend
	LatWrite
	LatRead
)

// Params describe one measurement; see rb_params in loops.h.
type Params struct {
	QP     *verbs.QP
	CQ     *verbs.CQ
	Opcode verbs.SendOpcode

	LocalAddr uint64
	LKey      uint32
	Size      uint32

	RemoteAddr uint64
	RKey       uint32

	RecvAddr uint64
	RecvLKey uint32
	RecvLen  uint32

	TxDepth   uint32
	RxDepth   uint32
	CQMod     uint32
	UseInline bool
	Initiator bool

	Iterations             uint64    // 0: run until End (duration mode)
	End                    time.Time // duration mode: stop posting
	MeasureFrom, MeasureTo time.Time
	Deadline               time.Time // hard limit, required

	Samples []uint64 // latency samples (ns), filled from index 0
	TagBase uint32
	Prepost bool
	Stop    *StopFlag
	Ready   *StopFlag // set by the loop once it may receive
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
)

// Result is what a loop measured.
type Result struct {
	Status          Status
	WCStatus        verbs.WCStatus
	VendorErr       uint32
	WRID            uint64
	PostErrno       int
	Completed       uint64
	Start, End      time.Duration // CLOCK_MONOTONIC since boot
	PeakBytesPerSec float64
	Samples         int
}

// Elapsed is the measured interval.
func (r Result) Elapsed() time.Duration { return r.End - r.Start }

// Err turns an unsuccessful status into an error naming what failed.
func (r Result) Err(what string) error {
	switch r.Status {
	case OK:
		return nil
	case Timeout:
		return fmt.Errorf("%s: deadline passed after %d messages (peer gone or link down?)", what, r.Completed)
	case Stopped:
		return fmt.Errorf("%s: stopped after %d messages", what, r.Completed)
	case WCError:
		return fmt.Errorf("%s: %w", what, &verbs.CompletionError{Status: r.WCStatus, VendorErr: r.VendorErr, WRID: r.WRID})
	case PostError:
		return fmt.Errorf("%s: ibv_post: errno %d", what, r.PostErrno)
	default:
		return fmt.Errorf("%s: ibv_poll_cq failed", what)
	}
}

// Now is CLOCK_MONOTONIC, the clock the loops use.
func Now() time.Duration { return time.Duration(C.rb_now_ns()) }

// monoNS converts a wall-clock deadline into the loops' monotonic clock.
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

// Calibrate measures the loops' cycle counter against CLOCK_MONOTONIC (once
// per process, 20 ms) and returns nanoseconds per cycle; Run calls it first.
func Calibrate() float64 {
	calibrateOnce.Do(func() { nsPerCycle = float64(C.rb_calibrate(20e6)) })
	return nsPerCycle
}

var nsPerCycle float64

// Run executes one loop and blocks until it ends.
func Run(kind Kind, p Params) Result {
	Calibrate()
	var cp C.struct_rb_params
	cp.qp = (*C.struct_ibv_qp)(p.QP.Raw())
	cp.cq = (*C.struct_ibv_cq)(p.CQ.Raw())
	cp.opcode = C.int(p.Opcode)
	cp.laddr, cp.lkey, cp.size = C.uint64_t(p.LocalAddr), C.uint32_t(p.LKey), C.uint32_t(p.Size)
	cp.raddr, cp.rkey = C.uint64_t(p.RemoteAddr), C.uint32_t(p.RKey)
	cp.recv_addr, cp.recv_lkey, cp.recv_len = C.uint64_t(p.RecvAddr), C.uint32_t(p.RecvLKey), C.uint32_t(p.RecvLen)
	cp.tx_depth, cp.rx_depth, cp.cq_mod = C.uint32_t(p.TxDepth), C.uint32_t(p.RxDepth), C.uint32_t(p.CQMod)
	cp.sq_size = C.uint32_t(p.QP.SendQueueSize())
	if p.UseInline {
		cp.use_inline = 1
	}
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
	if len(p.Samples) > 0 {
		// cp holds this Go pointer while C runs: pin it for the call.
		var pin runtime.Pinner
		pin.Pin(&p.Samples[0])
		defer pin.Unpin()
		cp.samples = (*C.uint64_t)(unsafe.Pointer(&p.Samples[0]))
		cp.sample_cap = C.uint64_t(len(p.Samples))
	}
	cp.tag_base = C.uint32_t(p.TagBase)
	if p.Prepost {
		cp.prepost = 1
	}
	init := C.int(0)
	if p.Initiator {
		init = 1
	}
	var r C.struct_rb_result
	switch kind {
	case BWPost:
		C.rb_bw_post(&cp, &r)
	case BWRecv:
		C.rb_bw_recv(&cp, &r)
	case LatSend:
		C.rb_lat_send(&cp, &r, init)
	case LatWrite:
		C.rb_lat_write(&cp, &r, init)
	case LatRead:
		C.rb_lat_read(&cp, &r)
	default:
		panic(fmt.Sprintf("csrc: unknown loop kind %d", kind))
	}
	return Result{
		Status: Status(r.status), WCStatus: verbs.WCStatus(r.wc_status), VendorErr: uint32(r.vendor_err),
		WRID: uint64(r.wr_id), PostErrno: int(r.post_errno), Completed: uint64(r.completed),
		Start: time.Duration(r.t_start_ns), End: time.Duration(r.t_end_ns),
		PeakBytesPerSec: float64(r.peak_bytes_per_ns) * 1e9, Samples: int(r.samples),
	}
}

// StopFlag is a flag in C memory that a loop polls; Go sets it from another
// goroutine (Ctrl-C, a dropped control connection) to end the loop early.
type StopFlag struct{ p *C.int }

// NewStopFlag allocates a cleared flag. Free it with Free.
func NewStopFlag() *StopFlag {
	p := (*C.int)(C.calloc(1, C.size_t(unsafe.Sizeof(C.int(0)))))
	return &StopFlag{p: p}
}

// Set asks running loops to stop.
func (s *StopFlag) Set() { C.rb_set_flag(s.p, 1) }

// Clear resets the flag for the next loop.
func (s *StopFlag) Clear() { C.rb_set_flag(s.p, 0) }

// IsSet reports whether the flag is set.
func (s *StopFlag) IsSet() bool { return C.rb_get_flag(s.p) != 0 }

// Free releases the flag's memory; no loop may be using it.
func (s *StopFlag) Free() {
	if s.p != nil {
		C.free(unsafe.Pointer(s.p))
		s.p = nil
	}
}

// cycles reads the loops' counter (for tests).
func cycles() uint64 { return uint64(C.rb_cycles_now()) }
