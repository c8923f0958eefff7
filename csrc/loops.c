#include "loops.h"

#include <errno.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#define RB_POLL_BATCH 16
#define RB_PEAK_SPAN 8    // peak bandwidth: over this many completion batches
#define RB_CLOCK_EVERY 64 // empty polls between clock reads

uint64_t rb_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rb_set_flag(volatile int *flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }

int rb_get_flag(volatile int *flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }

// The cycle counter; rb_ns_per_cycle converts it. Until calibrated (or on a
// machine without a counter) "cycles" are CLOCK_MONOTONIC nanoseconds.
static int rb_use_counter;
static double rb_ns_per_cycle = 1.0;

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

uint64_t rb_cycles_now(void) { return rb_cycles(); }

double rb_calibrate(uint64_t duration_ns) {
	uint64_t n0 = rb_now_ns(), c0 = raw_counter(), n1, c1;
	do {
		n1 = rb_now_ns();
		c1 = raw_counter();
	} while (n1 - n0 < duration_ns);
	double npc = c1 > c0 ? (double)(n1 - n0) / (double)(c1 - c0) : 0;
	// Reject a counter that does not move, or runs implausibly (slower than
	// 10 MHz or faster than 100 GHz): keep the clock then.
	if (npc > 0.01 && npc < 100) {
		rb_ns_per_cycle = npc;
		rb_use_counter = 1;
	} else {
		rb_ns_per_cycle = 1.0;
		rb_use_counter = 0;
	}
	return rb_ns_per_cycle;
}

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

static void limits_init(struct limits *l, const struct rb_params *p) {
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
	uint64_t start_c, end_c;
	double peak_per_cycle;
};

static void window_note(const struct rb_params *p, const struct limits *l, struct window *w, uint64_t now, uint64_t completed) {
	if (p->iters == 0) { // duration mode: margins excluded
		if (!w->started && now >= l->from) {
			w->started = 1;
			w->start_count = completed;
			w->start_c = now;
		}
		if (w->started && !w->ended && now >= l->to) {
			w->ended = 1;
			w->end_count = completed;
			w->end_c = now;
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
		if (rate > w->peak_per_cycle)
			w->peak_per_cycle = rate;
	}
}

void rb_bw_post(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc[RB_POLL_BATCH];
	struct window w;
	struct limits l;
	memset(&w, 0, sizeof(w));
	uint64_t posted = 0, completed = 0;
	uint32_t cq_mod = p->cq_mod ? p->cq_mod : 1;
	if (cq_mod > p->tx_depth)
		cq_mod = p->tx_depth;
	int posting = 1, empty = 0;
	uint64_t stop_at = 0; // duration mode: the last request to post
	limits_init(&l, p);
	uint64_t start = l.k.c0, now = start;
	window_note(p, &l, &w, now, 0);
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
			now = rb_cycles();
			if (n > 0)
				window_note(p, &l, &w, now, completed);
			if (check_abort(p, &l, r, now))
				break;
			// Time is up: post on to the next moderation boundary so the
			// last request is signaled, then stop.
			if (p->iters == 0 && !stop_at && now >= l.end) {
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
	uint64_t end = rb_cycles();
	if (p->iters) {
		r->completed = completed;
		r->t_start_ns = abs_ns(&l, start);
		r->t_end_ns = abs_ns(&l, end);
	} else if (w.started) {
		if (!w.ended) { // stopped early: measure up to now
			w.end_c = now;
			w.end_count = completed;
		}
		r->completed = w.end_count - w.start_count;
		r->t_start_ns = abs_ns(&l, w.start_c);
		r->t_end_ns = abs_ns(&l, w.end_c);
	}
	r->peak_bytes_per_ns = w.peak_per_cycle / l.k.npc;
}

void rb_bw_recv(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc[RB_POLL_BATCH];
	struct limits l;
	uint64_t received = 0;
	uint32_t depth = p->rx_depth ? p->rx_depth : 1;
	for (uint32_t i = 0; i < depth; i++)
		if (post_recv(p, i, r))
			return;
	set_ready(p);
	limits_init(&l, p);
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
			if (check_abort(p, &l, r, rb_cycles()))
				break;
		}
	}
out:
	r->completed = received;
	r->t_start_ns = l.k.ns0;
	r->t_end_ns = rb_now_ns();
}

// reap polls completions without waiting; a receive counts in *recvs, a
// send completion in *sends.
static inline int reap2(const struct rb_params *p, struct rb_result *r, int *recvs, uint32_t *sends) {
	struct ibv_wc wc[RB_POLL_BATCH];
	int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
	if (n < 0) {
		r->status = RB_POLL_ERROR;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (wc_failed(&wc[i], r))
			return -1;
		if (wc[i].opcode & IBV_WC_RECV) {
			if (recvs)
				(*recvs)++;
		} else if (sends && *sends) {
			(*sends)--;
		}
	}
	return n;
}

static inline int reap(const struct rb_params *p, struct rb_result *r, int *recvs) { return reap2(p, r, recvs, NULL); }

// wait_recv polls until a receive completes; send completions on the way
// are reaped. Returns 0 on a receive, non-zero when the loop must end.
static int wait_recv(const struct rb_params *p, const struct limits *l, struct rb_result *r, uint32_t *sends) {
	int empty = 0, got = 0;
	for (;;) {
		if (reap2(p, r, &got, sends) < 0)
			return 1;
		if (got)
			return 0;
		if (++empty >= RB_CLOCK_EVERY) {
			empty = 0;
			if (check_abort(p, l, r, rb_cycles()))
				return 1;
		}
	}
}

// Latency loops: the measured interval and duration mode are handled by the
// caller in chunks (iters per call), so sample buffers stay bounded. Samples
// are kept in counter cycles and converted once the loop is done.
static inline void lat_record(const struct rb_params *p, struct rb_result *r, uint64_t dt) {
	if (r->samples < p->sample_cap)
		p->samples[r->samples++] = dt;
}

static void lat_finish(const struct rb_params *p, const struct limits *l, struct rb_result *r, uint64_t iters, int initiator) {
	for (uint64_t i = 0; i < r->samples; i++)
		p->samples[i] = clk_ns(&l->k, p->samples[i]);
	r->completed = iters;
	r->t_start_ns = l->k.ns0;
	r->t_end_ns = rb_now_ns();
	if (r->status == RB_STOPPED && !initiator)
		r->status = RB_OK; // a responder runs until told to stop
}

// signal_every: how often a latency loop asks for a send completion. Each
// completion costs the device (and rxe's kernel path) work, so ask for one
// every half send queue, reaped off the timed path.
static inline uint32_t signal_every(const struct rb_params *p) {
	uint32_t sq = p->sq_size ? p->sq_size : p->tx_depth;
	return sq > 1 ? sq / 2 : 1;
}

void rb_lat_send(const struct rb_params *p, struct rb_result *r, int initiator) {
	memset(r, 0, sizeof(*r));
	struct limits l;
	// The peer sends only after it has received, so two posted receives
	// are enough: one for the message in flight, one spare.
	for (int i = 0; p->prepost && i < 2; i++)
		if (post_recv(p, i, r))
			return;
	set_ready(p);
	limits_init(&l, p);
	uint32_t sig_every = signal_every(p), unsignaled = 0, pending_sig = 0;
	int early_recvs = 0; // receives reaped while waiting for a send completion
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		uint64_t t0 = rb_cycles();
		if (!initiator) {
			if (early_recvs)
				early_recvs--;
			else if (wait_recv(p, &l, r, &pending_sig))
				break;
		}
		if (!initiator && post_recv(p, i + 2, r))
			break;
		int sig = ++unsignaled >= sig_every;
		// The previous signaled send must be reaped before the next one
		// is posted, or unsignaled sends could fill the send queue.
		while (sig && pending_sig) {
			if (reap2(p, r, &early_recvs, &pending_sig) < 0 || check_abort(p, &l, r, rb_cycles()))
				goto out;
		}
		if (post_one(p, i, sig, r))
			break;
		if (sig) {
			unsignaled = 0;
			pending_sig++;
		}
		if (initiator) {
			if (early_recvs)
				early_recvs--;
			else if (wait_recv(p, &l, r, &pending_sig))
				break;
			uint64_t t1 = rb_cycles();
			lat_record(p, r, t1 - t0);
			if (post_recv(p, i + 2, r))
				break;
			if (check_abort(p, &l, r, t1))
				break;
		} else if (check_abort(p, &l, r, t0)) {
			break;
		}
	}
out:
	lat_finish(p, &l, r, i, initiator);
}

// spin_tag waits until the byte at addr equals tag. Completions are polled
// meanwhile so that a failed WRITE (dead peer) ends the wait.
static int spin_tag(const struct rb_params *p, const struct limits *l, struct rb_result *r, volatile uint8_t *addr, uint8_t tag, uint32_t *unreaped) {
	uint32_t spins = 0;
	while (__atomic_load_n(addr, __ATOMIC_ACQUIRE) != tag) {
		if (++spins % 256)
			continue;
		int n = reap(p, r, NULL);
		if (n < 0)
			return 1;
		if (n > 0)
			*unreaped = 0;
		if (check_abort(p, l, r, rb_cycles()))
			return 1;
	}
	return 0;
}

void rb_lat_write(const struct rb_params *p, struct rb_result *r, int initiator) {
	memset(r, 0, sizeof(*r));
	struct limits l;
	volatile uint8_t *mine = (volatile uint8_t *)(uintptr_t)(p->recv_addr + p->size - 1);
	uint8_t *out = (uint8_t *)(uintptr_t)(p->laddr + p->size - 1);
	uint32_t sig_every = signal_every(p), since_sig = 0, unreaped = 0;
	set_ready(p);
	limits_init(&l, p);
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		// Tags run 1..255 and never 0, so neither zeroed memory nor the
		// previous iteration's byte can satisfy the wait.
		uint8_t tag = (uint8_t)((p->tag_base + i) % 255 + 1);
		uint64_t t0 = rb_cycles();
		if (!initiator && spin_tag(p, &l, r, mine, tag, &unreaped))
			break;
		*out = tag;
		int sig = ++since_sig >= sig_every;
		if (post_one(p, i, sig, r))
			break;
		if (sig) {
			since_sig = 0;
			unreaped++;
		}
		if (initiator) {
			if (spin_tag(p, &l, r, mine, tag, &unreaped))
				break;
			uint64_t t1 = rb_cycles();
			lat_record(p, r, t1 - t0);
			if (check_abort(p, &l, r, t1))
				break;
		} else if (check_abort(p, &l, r, t0)) {
			break;
		}
		// Reap after timing. A signaled request still outstanding when the
		// next is due must be reaped first, or the send queue could fill.
		while (unreaped > 1 || (unreaped && since_sig + 1 >= sig_every)) {
			int n = reap(p, r, NULL);
			if (n < 0)
				goto out;
			if (n > 0)
				unreaped = unreaped > (uint32_t)n ? unreaped - n : 0;
			else if (check_abort(p, &l, r, rb_cycles()))
				goto out;
		}
	}
out:
	lat_finish(p, &l, r, i, initiator);
}

void rb_lat_read(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct limits l;
	struct ibv_wc wc;
	limits_init(&l, p);
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		uint64_t t0 = rb_cycles();
		if (post_one(p, i, 1, r))
			break;
		uint32_t empty = 0;
		int n;
		while ((n = ibv_poll_cq(p->cq, 1, &wc)) == 0) {
			if (++empty % RB_CLOCK_EVERY == 0 && check_abort(p, &l, r, rb_cycles()))
				goto out;
		}
		uint64_t t1 = rb_cycles();
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			break;
		}
		if (wc_failed(&wc, r))
			break;
		lat_record(p, r, t1 - t0);
		if (check_abort(p, &l, r, t1))
			break;
	}
out:
	lat_finish(p, &l, r, i, 1);
}
