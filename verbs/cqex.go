package verbs

/*
#include "shim.h"

// rb_create_cq_ts makes an extended CQ whose completions carry the RNIC's
// timestamp, with what a UD receive needs besides. NULL and errno where
// the device has no completion timestamps (rxe: EOPNOTSUPP).
static inline struct ibv_cq_ex *rb_create_cq_ts(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *ch) {
	struct ibv_cq_init_attr_ex a;
	memset(&a, 0, sizeof(a));
	a.cqe = cqe;
	a.channel = ch;
	a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID |
		IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	return ibv_create_cq_ex(ctx, &a);
}

static inline struct ibv_cq *rb_cq_ex_to_cq(struct ibv_cq_ex *cq) { return ibv_cq_ex_to_cq(cq); }

// rb_poll_ex is rb_poll over an extended CQ, with each completion's
// timestamp. Only wr_id and status are read from a completion in error.
static inline int rb_poll_ex(struct ibv_cq_ex *cq, int n, struct rb_wc *out, uint64_t *ts) {
	struct ibv_poll_cq_attr pa;
	memset(&pa, 0, sizeof(pa));
	int rc = ibv_start_poll(cq, &pa);
	if (rc == ENOENT)
		return 0;
	if (rc)
		return -rc;
	int got = 0;
	for (;;) {
		struct rb_wc *w = &out[got];
		memset(w, 0, sizeof(*w));
		w->wr_id = cq->wr_id;
		w->status = cq->status;
		ts[got] = 0;
		if (cq->status == IBV_WC_SUCCESS) {
			w->opcode = ibv_wc_read_opcode(cq);
			w->byte_len = ibv_wc_read_byte_len(cq);
			w->qp_num = ibv_wc_read_qp_num(cq);
			w->src_qp = ibv_wc_read_src_qp(cq);
			w->wc_flags = ibv_wc_read_wc_flags(cq);
			w->slid = ibv_wc_read_slid(cq);
			ts[got] = ibv_wc_read_completion_ts(cq);
		} else {
			w->vendor_err = ibv_wc_read_vendor_err(cq);
		}
		got++;
		if (got == n)
			break;
		rc = ibv_next_poll(cq);
		if (rc == ENOENT)
			break;
		if (rc) {
			ibv_end_poll(cq);
			return -rc;
		}
	}
	ibv_end_poll(cq);
	return got;
}

// rb_core_clock is the RNIC's clock rate in kHz, 0 when it gives none.
static inline int rb_core_clock(struct ibv_context *ctx, uint64_t *khz) {
	struct ibv_device_attr_ex a;
	memset(&a, 0, sizeof(a));
	int rc = ibv_query_device_ex(ctx, NULL, &a);
	*khz = rc ? 0 : a.hca_core_clock;
	return rc;
}

// rb_read_clock is the RNIC's clock now, in its ticks (mlx5 gives them in
// tv_nsec with tv_sec 0; others as seconds and ticks).
static inline int rb_read_clock(struct ibv_context *ctx, uint64_t *ticks) {
	struct ibv_values_ex v;
	memset(&v, 0, sizeof(v));
	v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	int rc = ibv_query_rt_values_ex(ctx, &v);
	if (rc)
		return rc;
	if (!(v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK))
		return EOPNOTSUPP;
	*ticks = (uint64_t)v.raw_clock.tv_sec * 1000000000ull + (uint64_t)v.raw_clock.tv_nsec;
	return 0;
}
*/
import "C"

import (
	"fmt"
)

// CreateCQWithTimestamps makes a CQ, armed through ch like
// CreateCQWithChannel's, whose completions carry the RNIC's timestamp
// (Completion.Timestamp, in the RNIC's ticks). A device without completion
// timestamps fails with its errno (rxe: EOPNOTSUPP): the caller falls back
// to a plain CQ and the CPU's clock.
func (c *Context) CreateCQWithTimestamps(entries int, ch *CompChannel) (*CQ, error) {
	if c.res.isClosed() || ch.res.isClosed() {
		return nil, ErrClosed
	}
	if entries <= 0 {
		return nil, fmt.Errorf("create CQ: %d entries must be positive", entries)
	}
	ex, err := C.rb_create_cq_ts(c.ctx, C.int(entries), ch.ch)
	if ex == nil {
		return nil, verbErr("ibv_create_cq_ex", fmt.Sprintf("%d entries, with completion timestamps", entries), err)
	}
	cq := C.rb_cq_ex_to_cq(ex)
	q := &CQ{cq: cq, ex: ex, ctx: c}
	q.res.init("cq", func() error {
		return rcErr("ibv_destroy_cq", "", C.ibv_destroy_cq(cq))
	}, &c.res, &ch.res)
	return q, nil
}

// HasTimestamps says whether the CQ's completions carry the RNIC's time.
func (q *CQ) HasTimestamps() bool { return q.ex != nil }

func (q *CQ) pollEx(max int) ([]Completion, error) {
	var wcs [16]C.struct_rb_wc
	var ts [16]C.uint64_t
	n := C.rb_poll_ex(q.ex, C.int(max), &wcs[0], &ts[0])
	if n < 0 {
		return nil, rcErr("ibv_start_poll", "", n)
	}
	out := make([]Completion, int(n))
	for i := range out {
		out[i] = completionOf(&wcs[i])
		out[i].Timestamp = uint64(ts[i])
	}
	return out, nil
}

// CoreClockKHz is the RNIC's clock rate, by which its timestamps count;
// 0 when it gives none.
func (c *Context) CoreClockKHz() (uint64, error) {
	if c.res.isClosed() {
		return 0, ErrClosed
	}
	var khz C.uint64_t
	if rc := C.rb_core_clock(c.ctx, &khz); rc != 0 {
		return 0, rcErr("ibv_query_device_ex", c.name, rc)
	}
	return uint64(khz), nil
}

// ReadClock is the RNIC's clock now, in the ticks its timestamps count.
func (c *Context) ReadClock() (uint64, error) {
	if c.res.isClosed() {
		return 0, ErrClosed
	}
	var t C.uint64_t
	if rc := C.rb_read_clock(c.ctx, &t); rc != 0 {
		return 0, rcErr("ibv_query_rt_values_ex", c.name, rc)
	}
	return uint64(t), nil
}
