#include "loops.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#define RB_POLL_BATCH 16
#define RB_PEAK_SPAN 8   // peak bandwidth: over this many completion batches
#define RB_CLOCK_EVERY 64 // empty polls between clock reads

uint64_t rb_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rb_set_flag(volatile int *flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }

int rb_get_flag(volatile int *flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }

static inline void set_ready(const struct rb_params *p) {
	if (p->ready)
		__atomic_store_n(p->ready, 1, __ATOMIC_RELEASE);
}

static inline int stopped(const struct rb_params *p) {
	return p->stop && __atomic_load_n(p->stop, __ATOMIC_ACQUIRE);
}

// check_abort sets r->status when the loop must end; returns non-zero then.
static inline int check_abort(const struct rb_params *p, struct rb_result *r, uint64_t now) {
	if (stopped(p)) {
		r->status = RB_STOPPED;
		return 1;
	}
	if (now >= p->deadline_ns) {
		r->status = RB_TIMEOUT;
		return 1;
	}
	return 0;
}

static inline int wc_failed(const struct ibv_wc *wc, struct rb_result *r) {
	if (wc->status == IBV_WC_SUCCESS)
		return 0;
	r->status = RB_WC_ERROR;
	r->wc_status = wc->status;
	r->vendor_err = wc->vendor_err;
	r->wr_id = wc->wr_id;
	r->wc_opcode = wc->opcode;
	return 1;
}

static inline int post_one(const struct rb_params *p, uint64_t wr_id, int signaled, struct rb_result *r) {
	struct ibv_sge sge = {.addr = p->laddr, .length = p->size, .lkey = p->lkey};
	struct ibv_send_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = (enum ibv_wr_opcode)p->opcode;
	wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (p->use_inline ? IBV_SEND_INLINE : 0);
	wr.wr.rdma.remote_addr = p->raddr;
	wr.wr.rdma.rkey = p->rkey;
	int rc = ibv_post_send(p->qp, &wr, &bad);
	if (rc) {
		r->status = RB_POST_ERROR;
		r->post_errno = rc;
	}
	return rc;
}

static inline int post_recv(const struct rb_params *p, uint64_t wr_id, struct rb_result *r) {
	struct ibv_sge sge = {.addr = p->recv_addr, .length = p->recv_len, .lkey = p->recv_lkey};
	struct ibv_recv_wr wr, *bad;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	int rc = ibv_post_recv(p->qp, &wr, &bad);
	if (rc) {
		r->status = RB_POST_ERROR;
		r->post_errno = rc;
	}
	return rc;
}

// window tracks the measured interval in duration mode and the peak rate.
struct window {
	uint64_t t[RB_PEAK_SPAN];
	uint64_t n[RB_PEAK_SPAN];
	int len, head;
	int started, ended;
	uint64_t start_count, end_count;
};

static void window_note(const struct rb_params *p, struct rb_result *r, struct window *w, uint64_t now, uint64_t completed) {
	if (p->iters == 0) { // duration mode: margins excluded
		if (!w->started && now >= p->measure_from_ns) {
			w->started = 1;
			w->start_count = completed;
			r->t_start_ns = now;
		}
		if (w->started && !w->ended && now >= p->measure_to_ns) {
			w->ended = 1;
			w->end_count = completed;
			r->t_end_ns = now;
		}
		if (!w->started || w->ended)
			return;
	}
	w->t[w->head] = now;
	w->n[w->head] = completed;
	w->head = (w->head + 1) % RB_PEAK_SPAN;
	if (w->len < RB_PEAK_SPAN) {
		w->len++;
		return;
	}
	// The oldest entry is now at head.
	uint64_t dt = now - w->t[w->head];
	uint64_t dn = completed - w->n[w->head];
	if (dt > 0) {
		double rate = (double)dn * p->size / (double)dt;
		if (rate > r->peak_bytes_per_ns)
			r->peak_bytes_per_ns = rate;
	}
}

void rb_bw_post(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc[RB_POLL_BATCH];
	struct window w;
	memset(&w, 0, sizeof(w));
	uint64_t posted = 0, completed = 0;
	uint32_t cq_mod = p->cq_mod ? p->cq_mod : 1;
	if (cq_mod > p->tx_depth)
		cq_mod = p->tx_depth;
	int posting = 1, empty = 0;
	uint64_t stop_at = 0; // duration mode: the last request to post
	uint64_t now = rb_now_ns();
	r->t_start_ns = now;
	window_note(p, r, &w, now, 0);
	for (;;) {
		// Fill the window. In duration mode stop only on a moderation
		// boundary, so the last request posted is signaled.
		while (posting && posted - completed + 1 <= p->tx_depth) {
			if ((p->iters && posted == p->iters) || (stop_at && posted >= stop_at)) {
				posting = 0;
				break;
			}
			uint64_t next = posted + 1;
			int sig = (next % cq_mod == 0) || (p->iters && next == p->iters);
			if (post_one(p, next, sig, r))
				return;
			posted = next;
		}
		int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			return;
		}
		for (int i = 0; i < n; i++) {
			if (wc_failed(&wc[i], r))
				return;
			completed = wc[i].wr_id; // signaled wr_id = messages posted so far
		}
		if (n > 0 || ++empty >= RB_CLOCK_EVERY) {
			empty = 0;
			now = rb_now_ns();
			if (n > 0)
				window_note(p, r, &w, now, completed);
			if (check_abort(p, r, now))
				break;
			// Time is up: post on to the next moderation boundary so the
			// last request is signaled, then stop.
			if (p->iters == 0 && !stop_at && now >= p->end_ns) {
				stop_at = (posted + cq_mod - 1) / cq_mod * cq_mod;
				if (stop_at == posted)
					posting = 0;
			}
		}
		if (!posting && completed == posted)
			break;
		if (p->iters && completed == p->iters)
			break;
	}
	if (p->iters) {
		r->completed = completed;
		r->t_end_ns = rb_now_ns();
	} else if (w.started) {
		if (!w.ended) { // stopped early: measure up to now
			r->t_end_ns = now;
			w.end_count = completed;
		}
		r->completed = w.end_count - w.start_count;
	}
}

void rb_bw_recv(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc[RB_POLL_BATCH];
	uint64_t received = 0;
	uint32_t depth = p->rx_depth ? p->rx_depth : 1;
	for (uint32_t i = 0; i < depth; i++)
		if (post_recv(p, i, r))
			return;
	set_ready(p);
	uint64_t now = rb_now_ns();
	r->t_start_ns = now;
	int empty = 0;
	while (!p->iters || received < p->iters) {
		int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (wc_failed(&wc[i], r))
				goto out;
			received++;
			if (post_recv(p, wc[i].wr_id, r))
				goto out;
		}
		if (n == 0 && ++empty >= RB_CLOCK_EVERY) {
			empty = 0;
			if (check_abort(p, r, rb_now_ns()))
				break;
		}
	}
out:
	r->completed = received;
	r->t_end_ns = rb_now_ns();
}

// wait_recv polls until a receive completes; send completions on the way
// are reaped. Returns 0 on a receive, non-zero when the loop must end.
static int wait_recv(const struct rb_params *p, struct rb_result *r) {
	struct ibv_wc wc[RB_POLL_BATCH];
	int empty = 0;
	for (;;) {
		int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			return 1;
		}
		int got = 0;
		for (int i = 0; i < n; i++) {
			if (wc_failed(&wc[i], r))
				return 1;
			if (wc[i].opcode & IBV_WC_RECV)
				got++;
		}
		if (got)
			return 0;
		if (++empty >= RB_CLOCK_EVERY) {
			empty = 0;
			if (check_abort(p, r, rb_now_ns()))
				return 1;
		}
	}
}

// Latency loops: the measured interval and duration mode are handled by the
// caller in chunks (iters per call), so sample buffers stay bounded.
static inline void lat_record(const struct rb_params *p, struct rb_result *r, uint64_t dt) {
	if (r->samples < p->sample_cap)
		p->samples[r->samples++] = dt;
}

void rb_lat_send(const struct rb_params *p, struct rb_result *r, int initiator) {
	memset(r, 0, sizeof(*r));
	// Pre-post one receive per iteration in flight: the peer sends only
	// after it has received, so one at a time is enough, plus slack.
	for (int i = 0; p->prepost && i < 2; i++)
		if (post_recv(p, i, r))
			return;
	set_ready(p);
	r->t_start_ns = rb_now_ns();
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		uint64_t t0 = rb_now_ns();
		if (!initiator && wait_recv(p, r))
			break;
		if (!initiator && post_recv(p, i + 2, r))
			break;
		// Every send is signaled; its completion is reaped while we wait
		// for the next receive, off the critical path.
		if (post_one(p, i, 1, r))
			break;
		if (initiator) {
			if (wait_recv(p, r))
				break;
			uint64_t t1 = rb_now_ns();
			if (post_recv(p, i + 2, r))
				break;
			lat_record(p, r, t1 - t0);
		}
		if (check_abort(p, r, t0))
			break;
	}
	r->completed = i;
	r->t_end_ns = rb_now_ns();
	if (r->status == RB_STOPPED && !initiator)
		r->status = RB_OK; // a responder runs until told to stop
}

// spin_tag waits until the byte at addr equals tag. Completions are polled
// meanwhile so that a failed WRITE (dead peer) ends the wait.
static int spin_tag(const struct rb_params *p, struct rb_result *r, volatile uint8_t *addr, uint8_t tag) {
	struct ibv_wc wc[RB_POLL_BATCH];
	uint32_t spins = 0;
	while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != tag) {
		if (++spins % 256)
			continue;
		int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
		for (int i = 0; i < n; i++)
			if (wc_failed(&wc[i], r))
				return 1;
		if (check_abort(p, r, rb_now_ns()))
			return 1;
	}
	return 0;
}

void rb_lat_write(const struct rb_params *p, struct rb_result *r, int initiator) {
	memset(r, 0, sizeof(*r));
	volatile uint8_t *mine = (volatile uint8_t *)(uintptr_t)(p->recv_addr + p->size - 1);
	uint8_t *out = (uint8_t *)(uintptr_t)(p->laddr + p->size - 1);
	struct ibv_wc wc[RB_POLL_BATCH];
	uint32_t unreaped = 0;
	uint32_t sig_every = p->tx_depth > 1 ? p->tx_depth / 2 : 1;
	set_ready(p);
	r->t_start_ns = rb_now_ns();
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		// Tags run 1..255 and never 0, so neither zeroed memory nor the
		// previous iteration's byte can satisfy the wait.
		uint8_t tag = (uint8_t)((p->tag_base + i) % 255 + 1);
		uint64_t t0 = rb_now_ns();
		if (!initiator && spin_tag(p, r, mine, tag))
			break;
		*out = tag;
		int sig = (++unreaped >= sig_every);
		if (post_one(p, i, sig, r))
			break;
		if (sig) {
			// Reap the signaled completion (and with it all unsignaled
			// ones before it) before the send queue can fill.
			int got = 0;
			while (!got) {
				int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
				for (int k = 0; k < n; k++) {
					if (wc_failed(&wc[k], r))
						goto out;
					got = 1;
				}
				if (n < 0 || (!got && check_abort(p, r, rb_now_ns())))
					goto out;
			}
			unreaped = 0;
		}
		if (initiator) {
			if (spin_tag(p, r, mine, tag))
				break;
			lat_record(p, r, rb_now_ns() - t0);
		}
		if (check_abort(p, r, t0))
			break;
	}
out:
	r->completed = i;
	r->t_end_ns = rb_now_ns();
	if (r->status == RB_STOPPED && !initiator)
		r->status = RB_OK;
}

void rb_lat_read(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc;
	r->t_start_ns = rb_now_ns();
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		uint64_t t0 = rb_now_ns();
		if (post_one(p, i, 1, r))
			break;
		uint32_t empty = 0;
		int n;
		while ((n = ibv_poll_cq(p->cq, 1, &wc)) == 0) {
			if (++empty % RB_CLOCK_EVERY == 0 && check_abort(p, r, rb_now_ns()))
				goto out;
		}
		uint64_t t1 = rb_now_ns();
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			break;
		}
		if (wc_failed(&wc, r))
			break;
		lat_record(p, r, t1 - t0);
		if (check_abort(p, r, t1))
			break;
	}
out:
	r->completed = i;
	r->t_end_ns = rb_now_ns();
}
