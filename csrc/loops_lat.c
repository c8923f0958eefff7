// loops_lat.c: the latency loops: ping-pong by SEND (rb_lat_send) or by
// WRITE (rb_lat_write), one request at a time (rb_lat_one), and requests on
// a fixed schedule (rb_lat_rate).
#include "loops_int.h"

// reap2 polls completions without waiting; a receive counts in *recvs, a
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

static inline int reap(const struct rb_params *p, struct rb_result *r) { return reap2(p, r, NULL, NULL); }

// wait_recv polls until a receive completes; send completions on the way
// are reaped. Receives beyond the first go to *extra: with --rate several
// requests are in flight, and one poll can reap more than one (dropping
// them left the peer waiting for answers that never came). Returns 0 on a
// receive, non-zero when the loop must end.
static int wait_recv(const struct rb_params *p, const struct limits *l, struct rb_result *r, uint32_t *sends, int *extra) {
	int empty = 0, got = 0;
	for (;;) {
		if (reap2(p, r, &got, sends) < 0)
			return 1;
		if (got) {
			*extra += got - 1;
			return 0;
		}
		if (++empty >= RB_CLOCK_EVERY) {
			empty = 0;
			if (check_abort(p, l, r, rb_cycles()))
				return 1;
		}
	}
}

// Latency loops run on qps[lo]. The measured interval and duration mode are
// handled by the caller in chunks (iters per call), so sample buffers stay
// bounded. Samples are kept in counter cycles and converted at the end.
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

// stall is the responder's test hook (stall_at): a pause of stall_ns, as a
// peer descheduled or paging would make, that still ends on the stop flag
// and the deadline.
static int stall(const struct rb_params *p, const struct limits *l, struct rb_result *r) {
	uint64_t until = rb_now_ns() + p->stall_ns;
	while (rb_now_ns() < until)
		if (check_abort(p, l, r, rb_cycles()))
			return 1;
	return 0;
}

// prepost_recvs posts the receives a latency loop's QP still lacks
// (q->prepost); the next call on the QP finds them posted.
static int prepost_recvs(const struct rb_params *p, struct rb_qp *q, struct rb_result *r) {
	for (uint32_t i = 0; i < q->prepost; i++)
		if (post_recv(p, q, i, r))
			return 1;
	q->prepost = 0;
	return 0;
}

// lat_begin starts a latency loop that receives: r cleared, the receives
// its QP lacks posted, ready said, the clock started. Non-zero when a
// post failed.
static int lat_begin(const struct rb_params *p, struct limits *l, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	if (prepost_recvs(p, &p->qps[p->lo], r))
		return 1;
	set_ready(p);
	limits_init(l, p);
	return 0;
}

void rb_lat_send(const struct rb_params *p, struct rb_result *r, int initiator) {
	struct rb_qp *q = &p->qps[p->lo];
	struct limits l;
	// The peer sends only after it has received, so two posted receives
	// are enough: one for the message in flight, one spare.
	if (lat_begin(p, &l, r))
		return;
	uint32_t sig_every = signal_every(p), unsignaled = 0, pending_sig = 0;
	int early_recvs = 0; // receives reaped while waiting for a send completion
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		uint64_t t0 = rb_cycles();
		if (!initiator) {
			if (early_recvs)
				early_recvs--;
			else if (wait_recv(p, &l, r, &pending_sig, &early_recvs))
				break;
			if (p->stall_at == i + 1 && stall(p, &l, r))
				break;
			if (post_recv(p, q, i + 2, r))
				break;
		}
		int sig = ++unsignaled >= sig_every;
		// The previous signaled send must be reaped before the next one
		// is posted, or unsignaled sends could fill the send queue.
		while (sig && pending_sig) {
			if (reap2(p, r, &early_recvs, &pending_sig) < 0 || check_abort(p, &l, r, rb_cycles()))
				goto out;
		}
		if (post_one(p, q, i, sig, r))
			break;
		if (sig) {
			unsignaled = 0;
			pending_sig++;
		}
		if (initiator) {
			if (early_recvs)
				early_recvs--;
			else if (wait_recv(p, &l, r, &pending_sig, &early_recvs))
				break;
			uint64_t t1 = rb_cycles();
			lat_record(p, r, t1 - t0);
			if (post_recv(p, q, i + 2, r))
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
		int n = reap(p, r);
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
	const struct rb_qp *q = &p->qps[p->lo];
	struct limits l;
	volatile uint8_t *mine = (volatile uint8_t *)(uintptr_t)(q->recv_addr + p->size - 1);
	uint8_t *out = (uint8_t *)(uintptr_t)(q->laddr + p->size - 1);
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
		if (post_one(p, q, i, sig, r))
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
			int n = reap(p, r);
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

void rb_lat_one(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	const struct rb_qp *q = &p->qps[p->lo];
	struct limits l;
	struct ibv_wc wc;
	limits_init(&l, p);
	uint64_t i;
	for (i = 0; !p->iters || i < p->iters; i++) {
		uint64_t t0 = rb_cycles();
		if (post_one(p, q, i, 1, r))
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

// RB_RATE_MAX_WINDOW bounds the requests rb_lat_rate keeps in flight (its
// post times live on the stack); the plan's validator keeps -t below it.
#define RB_RATE_MAX_WINDOW 1024

// rate_loop is rb_lat_rate's schedule (request k due at t0 + k·interval),
// and what it posted and had answered.
struct rate_loop {
	struct rb_qp *q;
	uint64_t t0, interval, n, posted, answered, first, last;
	uint32_t w, sig_every, unsignaled, pending_sig;
	int by_recv;
	uint64_t posted_at[RB_RATE_MAX_WINDOW];
};

// rate_post posts every request that is due, while the window has room.
// Non-zero when a post failed.
static int rate_post(const struct rb_params *p, struct rate_loop *s, uint64_t now, struct rb_result *r) {
	while (s->posted < s->n && s->posted - s->answered < s->w && now >= s->t0 + s->posted * s->interval) {
		int sig = !s->by_recv || s->unsignaled + 1 >= s->sig_every;
		if (s->by_recv && sig && s->pending_sig)
			break; // polled (rate_reap) until the previous signaled one completes
		if (post_one(p, s->q, s->posted, sig, r))
			return 1;
		if (sig) {
			s->unsignaled = 0;
			s->pending_sig++;
		} else {
			s->unsignaled++;
		}
		s->posted_at[s->posted % s->w] = now;
		if (!s->posted)
			s->first = now;
		s->last = now;
		s->posted++;
	}
	return 0;
}

// rate_reap polls the CQ once: each answer is a sample, from its due time
// (and, in samples_raw, from its post). Non-zero when the loop must end.
static int rate_reap(const struct rb_params *p, struct rate_loop *s, struct rb_result *r) {
	struct ibv_wc wc[RB_POLL_BATCH];
	int got = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
	if (got < 0) {
		r->status = RB_POLL_ERROR;
		return 1;
	}
	uint64_t t = got ? rb_cycles() : 0;
	for (int i = 0; i < got; i++) {
		if (wc_failed(&wc[i], r))
			return 1;
		int is_recv = (wc[i].opcode & IBV_WC_RECV) != 0;
		if (!is_recv && s->pending_sig)
			s->pending_sig--;
		if (is_recv != (s->by_recv != 0))
			continue;
		if (is_recv && post_recv(p, s->q, wc[i].wr_id, r))
			return 1;
		if (s->answered >= s->posted) { // an answer to nothing we sent
			r->status = RB_FOREIGN_WC;
			r->wr_id = wc[i].wr_id;
			return 1;
		}
		if (r->samples < p->sample_cap && p->samples_raw)
			p->samples_raw[r->samples] = t - s->posted_at[s->answered % s->w];
		lat_record(p, r, t - (s->t0 + s->answered * s->interval));
		s->answered++;
	}
	return 0;
}

// rb_lat_rate sends on a fixed schedule: request n is due at t0 + n·interval
// whatever became of the earlier ones (open loop), with up to tx_depth in
// flight. A request that cannot go when due (window full: the peer is
// slow) goes as soon as it can, and its sample still runs from its due time,
// so a stall counts for every request that should have been sent during it
// (coordinated omission corrected, as wrk2). samples_raw keeps the
// uncorrected figure, from the actual post. RC answers in order, so the
// oldest request in flight is the one each answer belongs to.
void rb_lat_rate(const struct rb_params *p, struct rb_result *r, int by_recv) {
	struct limits l;
	struct rate_loop s = {.q = &p->qps[p->lo], .by_recv = by_recv};
	if (lat_begin(p, &l, r))
		return;
	s.w = p->tx_depth ? p->tx_depth : 1;
	if (s.w > RB_RATE_MAX_WINDOW)
		s.w = RB_RATE_MAX_WINDOW;
	s.interval = (uint64_t)((double)p->rate_interval_ns / l.k.npc);
	s.n = p->iters;
	// Answered by the peer's SEND, a request is signaled as in the
	// ping-pong, once every half send queue, and the next signaled one
	// waits until the previous has completed, so unsignaled requests never
	// fill the queue. A READ's or atomic's completion is its answer: every
	// one is signaled, and the window (at most tx_depth, below the queue's
	// size) bounds them.
	s.sig_every = by_recv ? signal_every(p) : 1;
	uint32_t polls = 0;
	s.t0 = rb_cycles();
	// The cut (see loops.h). The engine's n (MaxLatencySamples at most)
	// and interval (a second at most) keep 2·n·interval far from
	// overflowing; a caller beyond that gets no cut, only the deadline.
	uint64_t grace = (uint64_t)((double)RB_RATE_CUT_GRACE_NS / l.k.npc), cut_at = UINT64_MAX;
	if (!s.interval || s.n <= (UINT64_MAX - s.t0 - grace) / 2 / s.interval)
		cut_at = s.t0 + 2 * s.n * s.interval + grace;
	while (s.answered < s.n) {
		uint64_t now = rb_cycles();
		if (s.posted < s.n && now > cut_at) {
			// What was posted is drained (below, still bounded by the
			// deadline and the stop flag): its answers are samples, and
			// the peer is left with nothing in flight for the next pass.
			r->rate_cut = 1;
			s.n = s.posted;
			continue;
		}
		if (rate_post(p, &s, now, r) || rate_reap(p, &s, r))
			break;
		if (++polls >= RB_CLOCK_EVERY) {
			polls = 0;
			if (check_abort(p, &l, r, rb_cycles()))
				break;
		}
	}
	if (p->samples_raw)
		for (uint64_t i = 0; i < r->samples; i++)
			p->samples_raw[i] = clk_ns(&l.k, p->samples_raw[i]);
	lat_finish(p, &l, r, s.answered, 1);
	r->posted = s.posted;
	r->post_span_ns = clk_ns(&l.k, s.last - s.first);
}
