// loops_int.h: what the loops (loops_bw.c, loops_lat.c) share, inline: the
// counter and the limits it times, the stop and deadline check, failed
// completions and posts, and the filling and posting of one request.
#ifndef RDMABENCH_LOOPS_INT_H
#define RDMABENCH_LOOPS_INT_H

#include "loops.h"

#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define RB_POLL_BATCH 16
#define RB_CLOCK_EVERY 64 // empty polls between clock reads

// The cycle counter; rb_ns_per_cycle converts it (loops.c). Until
// calibrated (or on a machine without a counter) "cycles" are
// CLOCK_MONOTONIC nanoseconds.
extern int rb_use_counter __attribute__((visibility("hidden")));
extern double rb_ns_per_cycle __attribute__((visibility("hidden")));

static inline uint64_t raw_counter(void) {
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return rb_now_ns();
#endif
}

static inline uint64_t rb_cycles(void) { return rb_use_counter ? raw_counter() : rb_now_ns(); }

// clk maps the loop's absolute CLOCK_MONOTONIC times onto the counter once,
// at the start, so the loop itself only reads the counter.
struct clk {
	uint64_t ns0, c0;
	double npc;
};

static inline void clk_start(struct clk *k) {
	k->ns0 = rb_now_ns();
	k->c0 = rb_cycles();
	k->npc = rb_ns_per_cycle;
}

static inline uint64_t clk_cycles_at(const struct clk *k, uint64_t ns) {
	if (ns == 0)
		return 0;
	if (ns <= k->ns0)
		return k->c0;
	return k->c0 + (uint64_t)((double)(ns - k->ns0) / k->npc);
}

static inline uint64_t clk_ns(const struct clk *k, uint64_t cycles) { return (uint64_t)((double)cycles * k->npc + 0.5); }

// limits are a loop's deadline and duration-mode times, in counter cycles.
struct limits {
	struct clk k;
	uint64_t deadline, end, from, to;
};

static inline void limits_init(struct limits *l, const struct rb_params *p) {
	clk_start(&l->k);
	l->deadline = clk_cycles_at(&l->k, p->deadline_ns);
	l->end = clk_cycles_at(&l->k, p->end_ns);
	l->from = clk_cycles_at(&l->k, p->measure_from_ns);
	l->to = clk_cycles_at(&l->k, p->measure_to_ns);
}

// abs_ns turns a counter reading back into CLOCK_MONOTONIC nanoseconds.
static inline uint64_t abs_ns(const struct limits *l, uint64_t c) { return l->k.ns0 + clk_ns(&l->k, c - l->k.c0); }

static inline void set_ready(const struct rb_params *p) {
	if (p->ready)
		__atomic_store_n(p->ready, 1, __ATOMIC_RELEASE);
}

static inline int stopped(const struct rb_params *p) { return p->stop && __atomic_load_n(p->stop, __ATOMIC_ACQUIRE); }

// check_abort sets r->status when the loop must end; returns non-zero then.
static inline int check_abort(const struct rb_params *p, const struct limits *l, struct rb_result *r, uint64_t now) {
	if (stopped(p)) {
		r->status = RB_STOPPED;
		return 1;
	}
	if (now >= l->deadline) {
		r->status = RB_TIMEOUT;
		return 1;
	}
	return 0;
}

#define RB_QP_SHIFT 40
#define RB_COUNT_MASK ((1ull << RB_QP_SHIFT) - 1)
#define RB_MAX_POST_LIST 64

static inline uint64_t wr_id_of(uint32_t qi, uint64_t n) { return ((uint64_t)qi << RB_QP_SHIFT) | n; }

static inline uint64_t qp_completed(const struct rb_qp *q) { return __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE); }

static inline int wc_failed(const struct ibv_wc *wc, struct rb_result *r) {
	if (wc->status == IBV_WC_SUCCESS)
		return 0;
	r->status = RB_WC_ERROR;
	r->wc_status = wc->status;
	r->vendor_err = wc->vendor_err;
	r->wr_id = wc->wr_id & RB_COUNT_MASK;
	r->wc_opcode = wc->opcode;
	r->qp_num = wc->qp_num;
	return 1;
}

// post_failed records a failed post (rc, its errno) and returns rc.
static inline __attribute__((cold)) int post_failed(const struct rb_qp *q, int rc, struct rb_result *r) {
	r->status = RB_POST_ERROR;
	r->post_errno = rc;
	r->qp_num = q->qp->qp_num;
	return rc;
}

// slot_offset: message n (from 1) of a QP uses slot (n-1) % slots.
static inline uint64_t slot_offset(const struct rb_params *p, uint64_t n) {
	return p->slots > 1 && n > 0 ? ((n - 1) % p->slots) * p->slot_stride : 0;
}

// fill_fields writes the fields a request of the measurement sets; the
// rest of wr must be zero already. Every request of one measurement sets
// the same fields (one opcode, UD or not), so a request rewritten in place
// for the next message needs no zeroing again (post_chain).
static inline void fill_fields(const struct rb_params *p, const struct rb_qp *q, struct ibv_send_wr *wr, struct ibv_sge *sge, uint64_t wr_id, int signaled) {
	uint64_t off = slot_offset(p, wr_id & RB_COUNT_MASK);
	sge->addr = q->laddr + off;
	sge->length = p->size;
	sge->lkey = q->lkey;
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = (enum ibv_wr_opcode)p->opcode;
	wr->send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (p->use_inline ? IBV_SEND_INLINE : 0);
	wr->imm_data = p->imm;
	switch (wr->opcode) {
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		wr->wr.atomic.remote_addr = q->raddr;
		wr->wr.atomic.rkey = q->rkey;
		wr->wr.atomic.compare_add = p->compare_add;
		wr->wr.atomic.swap = p->swap;
		break;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		if (q->ah) {
			wr->wr.ud.ah = q->ah;
			wr->wr.ud.remote_qpn = q->remote_qpn;
			wr->wr.ud.remote_qkey = q->remote_qkey;
		}
		break;
	default:
		wr->wr.rdma.remote_addr = q->raddr + off;
		wr->wr.rdma.rkey = q->rkey;
	}
}

// fill_wr prepares one send request of the measurement's operation.
static inline void fill_wr(const struct rb_params *p, const struct rb_qp *q, struct ibv_send_wr *wr, struct ibv_sge *sge, uint64_t wr_id, int signaled) {
	memset(wr, 0, sizeof(*wr));
	fill_fields(p, q, wr, sge, wr_id, signaled);
}

static inline int post_one(const struct rb_params *p, const struct rb_qp *q, uint64_t wr_id, int signaled, struct rb_result *r) {
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	fill_wr(p, q, &wr, &sge, wr_id, signaled);
	int rc = ibv_post_send(q->qp, &wr, &bad);
	return rc ? post_failed(q, rc, r) : 0;
}

// recv_slot_addr: receive k of a QP (its wr_id's count bits) lands in slot
// k % slots.
static inline uint64_t recv_slot_addr(const struct rb_params *p, const struct rb_qp *q, uint64_t wr_id) {
	uint64_t k = wr_id & RB_COUNT_MASK;
	return q->recv_addr + (p->slots > 1 ? (k % p->slots) * p->slot_stride : 0);
}

static inline int post_recv(const struct rb_params *p, const struct rb_qp *q, uint64_t wr_id, struct rb_result *r) {
	struct ibv_sge sge = {.addr = recv_slot_addr(p, q, wr_id), .length = q->recv_len, .lkey = q->recv_lkey};
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	int rc = ibv_post_recv(q->qp, &wr, &bad);
	return rc ? post_failed(q, rc, r) : 0;
}

#endif
