package csrc

/*
#include <stdlib.h>
#include "fakeverbs.h"
*/
import "C"

import (
	"time"
	"unsafe"
)

// The fake device (fakeverbs.c) drives the loops in unit tests without RDMA
// hardware: asynchronous completions, send queues that fill, shared CQs,
// receive floods, failed completions.

type fakeCQ struct{ p *C.struct_ibv_cq }

func newFakeCQ(capacity int, seed uint64) *fakeCQ {
	return &fakeCQ{p: C.fake_cq_new(C.uint32_t(capacity), C.uint64_t(seed))}
}

func (c *fakeCQ) overruns() uint64 { return uint64(C.fake_cq_overruns(c.p)) }

// stall makes the CQ return nothing for d once it has returned after
// completions.
func (c *fakeCQ) stall(after uint64, d time.Duration) {
	C.fake_cq_stall(c.p, C.uint64_t(after), C.uint64_t(d))
}

// pace makes the CQ return at most one completion every d, for ever: a path
// that carries less than the loop asks of it.
func (c *fakeCQ) pace(d time.Duration) { C.fake_cq_pace(c.p, C.uint64_t(d)) }

// lastCompletion is when the CQ last returned a completion (the loops'
// clock, Now; 0: never).
func (c *fakeCQ) lastCompletion() time.Duration { return time.Duration(C.fake_cq_last_wc_ns(c.p)) }

func (c *fakeCQ) free() { C.fake_cq_free(c.p) }

type fakeQP struct {
	p   *C.struct_ibv_qp
	buf unsafe.Pointer // local, remote and receive memory of the QP's messages
	len int
}

func newFakeQP(scq, rcq *fakeCQ, sqCap int, qpn uint32, bufLen int) *fakeQP {
	return &fakeQP{p: C.fake_qp_new(scq.p, rcq.p, C.uint32_t(sqCap), C.uint32_t(qpn)), buf: C.calloc(C.size_t(bufLen), 1), len: bufLen}
}

// target describes the QP to the loops: sends from the buffer's first half,
// receives (and remote writes) into its second.
func (q *fakeQP) target() Target {
	half := uint64(q.len / 2)
	base := uint64(uintptr(q.buf))
	return Target{raw: unsafe.Pointer(q.p), LocalAddr: base, RemoteAddr: base + half, RecvAddr: base + half, RecvLen: uint32(half)}
}

func (q *fakeQP) failAt(pos uint64)     { C.fake_qp_fail_at(q.p, C.uint64_t(pos)) }
func (q *fakeQP) flood(msgLen int) bool { return C.fake_qp_flood(q.p, C.uint32_t(msgLen)) == 0 }

// stats are what the QP saw: requests accepted, posts refused for a full
// send queue, signaled requests.
// firstPost is when the QP took its first request (the loops' clock; 0:
// never).
func (q *fakeQP) firstPost() time.Duration { return time.Duration(C.fake_qp_first_post_ns(q.p)) }

func (q *fakeQP) stats() (posted, refused, signaled uint64) {
	var p, r, s C.uint64_t
	C.fake_qp_stats(q.p, &p, &r, &s)
	return uint64(p), uint64(r), uint64(s)
}

func (q *fakeQP) free() {
	C.fake_qp_free(q.p)
	C.free(q.buf)
}

// onFakeCQ points a loop's parameters at a fake CQ.
func (p *Params) onFakeCQ(cq *fakeCQ) { p.cqRaw = unsafe.Pointer(cq.p) }
