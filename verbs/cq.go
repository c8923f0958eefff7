package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"time"
	"unsafe"
)

// CQ is a completion queue. QPs that use it are closed before it.
type CQ struct {
	res resource
	cq  *C.struct_ibv_cq
	ex  *C.struct_ibv_cq_ex // an extended CQ with timestamps, else nil
	ctx *Context
}

// CreateCQ makes a completion queue with at least entries slots.
func (c *Context) CreateCQ(entries int) (*CQ, error) { return c.createCQ(entries, nil) }

// createCQ makes a CQ, raising its events on ch when ch is not nil (the
// channel is then its parent too: it must outlive the CQ).
func (c *Context) createCQ(entries int, ch *CompChannel) (*CQ, error) {
	if c.res.isClosed() || ch != nil && ch.res.isClosed() {
		return nil, ErrClosed
	}
	if entries <= 0 {
		return nil, fmt.Errorf("create CQ: %d entries must be positive", entries)
	}
	var native *C.struct_ibv_comp_channel
	what := fmt.Sprintf("%d entries", entries)
	parents := []*resource{&c.res}
	if ch != nil {
		native, what, parents = ch.ch, what+", with a completion channel", append(parents, &ch.res)
	}
	cq, err := C.ibv_create_cq(c.ctx, C.int(entries), nil, native, 0)
	if cq == nil {
		return nil, verbErr("ibv_create_cq", what, err)
	}
	q := &CQ{cq: cq, ctx: c}
	q.res.init("cq", func() error {
		return rcErr("ibv_destroy_cq", "", C.ibv_destroy_cq(cq))
	}, parents...)
	return q, nil
}

// Close destroys the CQ after the QPs that use it.
func (q *CQ) Close() error { return q.res.close() }

// Raw is the native ibv_cq pointer, for the C loops in csrc/.
func (q *CQ) Raw() unsafe.Pointer { return unsafe.Pointer(q.cq) }

// Opcode of a completion (enum ibv_wc_opcode).
type WCOpcode int

const (
	WCSend        WCOpcode = C.IBV_WC_SEND
	WCRDMAWrite   WCOpcode = C.IBV_WC_RDMA_WRITE
	WCRDMARead    WCOpcode = C.IBV_WC_RDMA_READ
	WCCompSwap    WCOpcode = C.IBV_WC_COMP_SWAP
	WCFetchAdd    WCOpcode = C.IBV_WC_FETCH_ADD
	WCRecv        WCOpcode = C.IBV_WC_RECV
	WCRecvRDMAImm WCOpcode = C.IBV_WC_RECV_RDMA_WITH_IMM
)

// Completion is one polled work completion.
type Completion struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	ByteLen uint32
	Imm     uint32 // host order
	HasImm  bool
	QPN     uint32
	SrcQP   uint32
	Vendor  uint32
	// A UD receive's sender: its LID (0 on RoCE), and whether the buffer
	// starts with the 40-byte GRH that carries its GID.
	SLID   uint16
	HasGRH bool
	// The RNIC's time of the completion in its ticks, from a CQ made by
	// CreateCQWithTimestamps (0 otherwise, and in a completion in error).
	Timestamp uint64
}

// Err is nil for a successful completion, else a *CompletionError.
func (c Completion) Err() error {
	if c.Status == WCSuccess {
		return nil
	}
	return &CompletionError{Status: c.Status, VendorErr: c.Vendor, WRID: c.WRID, QPN: c.QPN}
}

// Poll returns up to max completions without waiting.
func (q *CQ) Poll(max int) ([]Completion, error) {
	if q.res.isClosed() {
		return nil, ErrClosed
	}
	if max > 16 {
		max = 16
	}
	if q.ex != nil {
		return q.pollEx(max)
	}
	var wcs [16]C.struct_rb_wc
	n := C.rb_poll(q.cq, C.int(max), &wcs[0])
	if n < 0 {
		return nil, rcErr("ibv_poll_cq", "", n)
	}
	out := make([]Completion, int(n))
	for i := range out {
		out[i] = completionOf(&wcs[i])
	}
	return out, nil
}

func completionOf(w *C.struct_rb_wc) Completion {
	return Completion{
		WRID:    uint64(w.wr_id),
		Status:  WCStatus(w.status),
		Opcode:  WCOpcode(w.opcode),
		ByteLen: uint32(w.byte_len),
		Imm:     NetworkOrder(uint32(w.imm_data)),
		HasImm:  w.wc_flags&C.IBV_WC_WITH_IMM != 0,
		QPN:     uint32(w.qp_num),
		SrcQP:   uint32(w.src_qp),
		Vendor:  uint32(w.vendor_err),
		SLID:    uint16(w.slid),
		HasGRH:  w.wc_flags&C.IBV_WC_GRH != 0,
	}
}

// WaitOne polls until one completion arrives or ctx ends. It is for tests and
// set-up, not measurement: it yields between polls.
func (q *CQ) WaitOne(ctx context.Context) (Completion, error) {
	for {
		wcs, err := q.Poll(1)
		if err != nil {
			return Completion{}, err
		}
		if len(wcs) == 1 {
			return wcs[0], wcs[0].Err()
		}
		select {
		case <-ctx.Done():
			return Completion{}, fmt.Errorf("wait for completion: %w", ctx.Err())
		default:
		}
		runtime.Gosched()
		time.Sleep(10 * time.Microsecond)
	}
}
