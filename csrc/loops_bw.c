// loops_bw.c: the bandwidth loops. rb_bw_post keeps each QP's window of
// requests full and reaps their completions; rb_bw_recv keeps receives
// posted for a peer's SENDs.
#include "loops_int.h"

// burst tracks the highest rate of all lanes together (the shared progress
// counter, or this loop's own QPs without one) over RB_BURST_SAMPLES samples
// taken at least RB_BURST_PERIOD_NS apart: a window of 2 ms or more, so that
// one completion batch cannot pass for a rate.
#define RB_BURST_SAMPLES 8
#define RB_BURST_PERIOD_NS 250000
struct burst {
	uint64_t t[RB_BURST_SAMPLES + 1];
	uint64_t n[RB_BURST_SAMPLES + 1];
	int len, head;
	uint64_t period; // cycles
	double per_cycle;
};

static void burst_note(struct burst *b, uint32_t size, uint64_t now, uint64_t completed) {
	const int slots = RB_BURST_SAMPLES + 1;
	if (b->len > 0) {
		int newest = (b->head + slots - 1) % slots;
		if (now - b->t[newest] < b->period)
			return;
	}
	b->t[b->head] = now;
	b->n[b->head] = completed;
	b->head = (b->head + 1) % slots;
	if (b->len < slots) {
		b->len++;
		if (b->len < slots)
			return;
	}
	// The oldest sample is now at head.
	uint64_t dt = now - b->t[b->head];
	uint64_t dn = completed - b->n[b->head];
	if (dt > 0) {
		double rate = (double)dn * size / (double)dt;
		if (rate > b->per_cycle)
			b->per_cycle = rate;
	}
}

static uint64_t own_completed(const struct rb_params *p) {
	uint64_t sum = 0;
	for (uint32_t i = p->lo; i < p->hi; i++)
		sum += qp_completed(&p->qps[i]);
	return sum;
}

static inline uint64_t all_completed(const struct rb_params *p) {
	return p->progress ? __atomic_load_n(p->progress, __ATOMIC_ACQUIRE) : own_completed(p);
}

// note_completion credits a completion to its QP, which may be another
// thread's when the CQ is shared: the count only grows, as an atomic maximum,
// however the threads interleave. The thread that brings the count to the
// QP's limit stamps the QP's last-completion time. Returns the messages
// newly completed.
static inline uint64_t note_completion(const struct rb_params *p, uint64_t wr_id, uint64_t now) {
	struct rb_qp *q = &p->qps[wr_id >> RB_QP_SHIFT];
	uint64_t n = wr_id & RB_COUNT_MASK, old = qp_completed(q);
	do {
		if (n <= old)
			return 0;
	} while (!__atomic_compare_exchange_n(&q->completed, &old, n, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	if (n == __atomic_load_n(&q->limit, __ATOMIC_ACQUIRE))
		__atomic_store_n(&q->t_last_c, now, __ATOMIC_RELEASE);
	return n - old;
}

// window is how many requests a QP may have in flight.
static inline uint32_t qp_window(const struct rb_params *p, const struct rb_qp *q) {
	return q->max_in_flight && q->max_in_flight < p->tx_depth ? q->max_in_flight : p->tx_depth;
}

// chain holds rb_bw_post's requests for the whole loop: zeroed once, then
// rewritten in place for each post (fill_fields). Zeroing 128 bytes per
// request (a memset the compiler made a rep stos) was a sixth of the loop's
// time on a zero-cost device. A request last filled for the same QP, when
// every message of a QP uses the same memory (no --verify slots), differs
// from its previous post only in wr_id and the signaled flag: only those
// are written (filled_for says for which QP each request was filled).
struct chain {
	struct ibv_send_wr wr[RB_MAX_POST_LIST];
	struct ibv_sge sge[RB_MAX_POST_LIST];
	uint32_t filled_for[RB_MAX_POST_LIST];
};

static void chain_init(struct chain *ch) {
	memset(ch, 0, sizeof(*ch));
	for (uint32_t k = 0; k < RB_MAX_POST_LIST; k++)
		ch->filled_for[k] = UINT32_MAX;
}

static inline void refill(const struct rb_params *p, struct chain *ch, uint32_t k, uint32_t qi, uint64_t wr_id, int signaled) {
	struct ibv_send_wr *wr = &ch->wr[k];
	if (ch->filled_for[k] == qi && p->slots <= 1) {
		wr->wr_id = wr_id;
		wr->send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (p->use_inline ? IBV_SEND_INLINE : 0);
		return;
	}
	fill_fields(p, &p->qps[qi], wr, &ch->sge[k], wr_id, signaled);
	ch->filled_for[k] = qi;
}

// post_chain posts count requests on one QP in one call. The chain is
// signaled (on its last request) when it ends at least mod requests after the
// QP's last signaled request, or at the QP's limit.
static inline int post_chain(const struct rb_params *p, struct chain *ch, uint32_t qi, uint32_t count, uint32_t mod, struct rb_result *r) {
	struct rb_qp *q = &p->qps[qi];
	struct ibv_send_wr *wr = ch->wr, *bad;
	uint64_t end = q->posted + count;
	int sig_last = end - q->last_sig >= mod || end == q->limit;
	for (uint32_t k = 0; k < count; k++) {
		uint64_t next = q->posted + k + 1;
		if (p->verify && p->opcode != IBV_WR_RDMA_READ) {
			uint8_t *msg = (uint8_t *)(uintptr_t)(q->laddr + slot_offset(p, next));
			rb_pattern(msg, p->size, p->pattern_seed, p->fixed_pattern ? 1 : p->pattern_base + next);
			if (p->pattern_base + next == p->corrupt_msg)
				msg[p->size / 2] ^= 0x5a;
		}
		refill(p, ch, k, qi, wr_id_of(qi, next), sig_last && k + 1 == count);
		wr[k].next = k + 1 < count ? &wr[k + 1] : NULL;
	}
	int rc = ibv_post_send(q->qp, &wr[0], &bad);
	if (rc)
		return post_failed(q, rc, r);
	q->posted = end;
	if (sig_last)
		q->last_sig = end;
	return 0;
}

// post_singles is post_chain's work for the common case, one request a
// call (-l 1), every message of the QP in the same memory (no --verify
// slots or patterns), no slowed QP: it posts until the window is full,
// keeping the request filled (only wr_id and the signaled flag change) and
// the counts in registers. On the zero-cost NIC (csrc/fakeverbs) it took
// write-bw 2 B from 1.38 to 1.06 times the bare post/poll loop's cost.
static inline int post_singles(const struct rb_params *p, struct chain *ch, uint32_t qi, uint64_t *posted_io, uint64_t limit, uint64_t done, uint32_t w,
                               uint32_t mod, struct rb_result *r) {
	struct rb_qp *q = &p->qps[qi];
	struct ibv_send_wr *wr = &ch->wr[0], *bad;
	if (ch->filled_for[0] != qi) {
		fill_fields(p, q, wr, &ch->sge[0], 0, 0);
		ch->filled_for[0] = qi;
	}
	wr->next = NULL;
	const unsigned inl = p->use_inline ? IBV_SEND_INLINE : 0;
	uint64_t posted = *posted_io, last_sig = q->last_sig;
	int rc = 0;
	while (posted < limit && posted - done < w) {
		uint64_t next = posted + 1;
		int sig = next - last_sig >= mod || next == limit;
		wr->wr_id = wr_id_of(qi, next);
		wr->send_flags = (sig ? IBV_SEND_SIGNALED : 0) | inl;
		if ((rc = ibv_post_send(q->qp, wr, &bad))) {
			post_failed(q, rc, r);
			break;
		}
		posted = next;
		if (sig)
			last_sig = next;
	}
	q->posted = *posted_io = posted;
	q->last_sig = last_sig;
	return rc;
}

// wait_start: after ready, wait for the shared start flag so that every lane
// of a measurement begins at once.
static int wait_start(const struct rb_params *p, const struct limits *l, struct rb_result *r) {
	uint32_t spins = 0;
	while (p->start && !__atomic_load_n(p->start, __ATOMIC_ACQUIRE)) {
		if (++spins % 256 == 0 && check_abort(p, l, r, rb_cycles()))
			return 1;
	}
	return 0;
}

// moderation is the CQ moderation a QP of window w may use with chains of
// plist: every w - plist + 1 consecutive requests must hold a signaled one,
// or a full window could wait for a completion that never comes.
static inline uint32_t moderation(uint32_t cq_mod, uint32_t w, uint32_t plist) {
	uint32_t cap = w >= plist ? w - plist + 1 : 1;
	return cq_mod < cap ? cq_mod : cap;
}

// bw_reset readies the loop's QPs for a new measurement.
static void bw_reset(const struct rb_params *p) {
	for (uint32_t i = p->lo; i < p->hi; i++) {
		struct rb_qp *q = &p->qps[i];
		q->posted = q->last_sig = 0;
		q->completed = 0;
		q->limit = p->iters ? p->iters : UINT64_MAX;
		q->win_start = q->win_end = 0;
		q->t_first_c = q->t_last_c = q->last_post_c = 0;
		q->t_first_ns = q->t_last_ns = 0;
	}
}

// post_chains posts QP qi's requests plist (or fewer, at the limit) a call
// while its window has room for them; gap (cycles) spaces the posts of the
// test hook's slowed QP.
static inline int post_chains(const struct rb_params *p, struct chain *ch, uint32_t qi, uint64_t *posted_io, uint64_t done, uint32_t w, uint32_t pl,
                              uint32_t mod, uint64_t gap, struct rb_result *r) {
	struct rb_qp *q = &p->qps[qi];
	uint64_t posted = *posted_io, limit = q->limit;
	while (posted < limit) {
		uint64_t t = 0;
		if (gap) {
			t = rb_cycles();
			if (t - q->last_post_c < gap)
				break;
		}
		uint64_t room = w - (posted - done);
		uint64_t left = limit - posted;
		uint32_t n = (uint32_t)(left < pl ? left : pl);
		if (room < n)
			break;
		if (posted == 0)
			q->t_first_c = rb_cycles();
		if (post_chain(p, ch, qi, n, mod, r))
			return -1;
		posted += n;
		if (t)
			q->last_post_c = t;
	}
	*posted_io = posted;
	return 0;
}

// fill_qp fills QP qi's window. Returns 1 while the QP has requests to post
// or to complete, 0 when it is done, -1 when a post failed.
static inline int fill_qp(const struct rb_params *p, struct chain *ch, uint32_t qi, uint32_t plist, uint32_t mod_cap, uint64_t gap, struct rb_result *r) {
	struct rb_qp *q = &p->qps[qi];
	uint64_t done = qp_completed(q);
	uint32_t w = qp_window(p, q), pl = plist < w ? plist : w;
	uint32_t mod = moderation(mod_cap, w, pl);
	// posted and limit in locals (only this thread posts on q and sets
	// its limit): nothing is read back from q after each post.
	uint64_t posted = q->posted, limit = q->limit;
	if (pl == 1 && !gap && !p->verify && p->slots <= 1) {
		if (posted == 0 && limit > 0)
			q->t_first_c = rb_cycles();
		if (post_singles(p, ch, qi, &posted, limit, done, w, mod, r))
			return -1;
	}
	if (post_chains(p, ch, qi, &posted, done, w, pl, mod, gap, r))
		return -1;
	return posted != limit || done != posted;
}

// reap_bw credits n polled send completions. Non-zero on a failed one.
static inline int reap_bw(const struct rb_params *p, const struct ibv_wc *wc, int n, uint64_t now, struct rb_result *r) {
	uint64_t got = 0;
	for (int i = 0; i < n; i++) {
		if (wc_failed(&wc[i], r))
			return 1;
		got += note_completion(p, wc[i].wr_id, now);
	}
	if (got && p->progress)
		__atomic_fetch_add(p->progress, got, __ATOMIC_RELAXED);
	return 0;
}

// mwin is duration mode's measured window: it starts when warm-up is over
// and ends when cool-down begins, each QP's count taken at both edges.
struct mwin {
	uint64_t start_c, end_c;
	int started, ended;
};

static void mwin_start(const struct rb_params *p, struct mwin *m, uint64_t now) {
	m->started = 1;
	m->start_c = now;
	for (uint32_t i = p->lo; i < p->hi; i++)
		p->qps[i].win_start = qp_completed(&p->qps[i]);
}

static void mwin_end(const struct rb_params *p, struct mwin *m, uint64_t now) {
	m->ended = 1;
	m->end_c = now;
	for (uint32_t i = p->lo; i < p->hi; i++)
		p->qps[i].win_end = qp_completed(&p->qps[i]);
}

// modrate is --interval's moderation: each QP should signal ~50 completions
// an interval, so cap follows the measured rate, sampled 10 times an
// interval (every cycles; 0: no --interval, cap stays cq_mod).
struct modrate {
	uint64_t every, t, n;
	uint32_t cq_mod, cap;
};

static void modrate_init(struct modrate *m, const struct rb_params *p, const struct limits *l, uint32_t cq_mod, uint64_t now) {
	m->every = p->interval_ns ? (uint64_t)(p->interval_ns / 10 / l->k.npc) : 0;
	m->t = now;
	m->n = 0;
	m->cq_mod = m->cap = cq_mod;
}

static void modrate_sample(struct modrate *m, const struct rb_params *p, const struct limits *l, uint64_t now, struct rb_result *r) {
	uint64_t c = own_completed(p);
	double per_qp = (double)(c - m->n) / (double)(p->hi - p->lo);
	double want = per_qp * (double)p->interval_ns / ((double)(now - m->t) * l->k.npc) / 50;
	m->cap = want < 1 ? 1 : want < m->cq_mod ? (uint32_t)want : m->cq_mod;
	if (m->cap < r->min_cq_mod)
		r->min_cq_mod = m->cap;
	m->t = now;
	m->n = c;
}

// time_up: each QP posts on until its last request is a signaled one,
// then stops.
static void time_up(const struct rb_params *p) {
	for (uint32_t i = p->lo; i < p->hi; i++) {
		struct rb_qp *q = &p->qps[i];
		__atomic_store_n(&q->limit, q->posted == q->last_sig ? q->posted : q->posted + 1, __ATOMIC_RELEASE);
	}
}

// bw_result_iters: with an iteration count every QP is timed from its first
// post to its last completion, and the loop from start to end.
static void bw_result_iters(const struct rb_params *p, const struct limits *l, uint64_t start, uint64_t end, struct rb_result *r) {
	r->completed = own_completed(p);
	r->t_start_ns = abs_ns(l, start);
	r->t_end_ns = abs_ns(l, end);
	for (uint32_t i = p->lo; i < p->hi; i++) {
		struct rb_qp *q = &p->qps[i];
		q->win_start = 0;
		q->win_end = qp_completed(q);
		uint64_t last = __atomic_load_n(&q->t_last_c, __ATOMIC_ACQUIRE);
		if (q->posted == 0 || last == 0) // stopped before its first post or last completion
			last = end;
		q->t_first_ns = abs_ns(l, q->posted ? q->t_first_c : end);
		q->t_last_ns = abs_ns(l, last);
	}
}

// bw_result_window: in duration mode everything is timed by the measured
// window, cut at now when the loop stopped before cool-down.
static void bw_result_window(const struct rb_params *p, const struct limits *l, struct mwin *m, uint64_t now, struct rb_result *r) {
	if (!m->ended) // stopped early: measure up to now
		mwin_end(p, m, now);
	for (uint32_t i = p->lo; i < p->hi; i++) {
		struct rb_qp *q = &p->qps[i];
		r->completed += q->win_end - q->win_start;
		q->t_first_ns = abs_ns(l, m->start_c);
		q->t_last_ns = abs_ns(l, m->end_c);
	}
	r->t_start_ns = abs_ns(l, m->start_c);
	r->t_end_ns = abs_ns(l, m->end_c);
}

void rb_bw_post(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc[RB_POLL_BATCH];
	struct limits l;
	struct burst bu = {0};
	struct chain ch;
	struct modrate mr;
	struct mwin mw = {.started = p->iters != 0};
	uint32_t plist = p->post_list ? p->post_list : 1;
	if (plist > RB_MAX_POST_LIST)
		plist = RB_MAX_POST_LIST;
	chain_init(&ch);
	bw_reset(p);
	limits_init(&l, p);
	set_ready(p);
	if (wait_start(p, &l, r))
		return;
	bu.period = (uint64_t)(RB_BURST_PERIOD_NS / l.k.npc);
	uint64_t gap[p->hi - p->lo];
	for (uint32_t i = p->lo; i < p->hi; i++)
		gap[i - p->lo] = (uint64_t)(p->qps[i].post_gap_ns / l.k.npc);
	uint64_t start = rb_cycles(), now = start;
	modrate_init(&mr, p, &l, p->cq_mod ? p->cq_mod : 1, start);
	r->min_cq_mod = mr.cq_mod;
	int empty = 0, timed_out = 0;
	if (!mw.started && now >= l.from)
		mwin_start(p, &mw, now);
	for (;;) {
		int active = 0; // fill each QP's window, round robin
		for (uint32_t i = p->lo; i < p->hi; i++) {
			int a = fill_qp(p, &ch, i, plist, mr.cap, gap[i - p->lo], r);
			if (a < 0)
				return;
			active |= a;
		}
		if (!active)
			break;
		int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			return;
		}
		if (n > 0 || ++empty >= RB_CLOCK_EVERY) {
			empty = 0;
			now = rb_cycles();
		}
		if (reap_bw(p, wc, n, now, r))
			return;
		if (n == 0 && empty != 0)
			continue;
		if (!mw.started && now >= l.from) // duration mode: warm-up over
			mwin_start(p, &mw, now);
		if (mw.started && !mw.ended && p->iters == 0 && now >= l.to) // cool-down begins
			mwin_end(p, &mw, now);
		if (n > 0 && mw.started && !mw.ended)
			burst_note(&bu, p->size, now, all_completed(p));
		if (mr.every && now - mr.t >= mr.every)
			modrate_sample(&mr, p, &l, now, r);
		if (check_abort(p, &l, r, now))
			break;
		if (p->iters == 0 && !timed_out && now >= l.end) {
			timed_out = 1;
			time_up(p);
		}
	}
	if (p->iters)
		bw_result_iters(p, &l, start, rb_cycles(), r);
	else if (mw.started)
		bw_result_window(p, &l, &mw, now, r);
	r->burst_bytes_per_ns = bu.per_cycle / l.k.npc;
}

// recv_chain gathers the receives a poll batch reaped, to post them again
// in one call per QP (consecutive ones of the same QP: one, when a loop
// has one QP). Posted one a call, a receiver whose sender is as fast as
// it runs its ring empty: on the zero-cost NIC 95% of send_bw's SENDs
// then found no receive and waited (the stand-in's RNR path), against 4%
// for the bare loop, and the pair cost 1.3 times the bare loop's. One
// call a batch is one producer-index store (one doorbell on a NIC).
struct recv_chain {
	struct ibv_recv_wr wr[RB_POLL_BATCH];
	struct ibv_sge sge[RB_POLL_BATCH];
	const struct rb_qp *q;
	int n;
};

// repost posts the gathered receives. Non-zero when the post failed.
static inline int repost(struct recv_chain *c, struct rb_result *r) {
	if (!c->n)
		return 0;
	struct ibv_recv_wr *bad;
	int rc = ibv_post_recv(c->q->qp, c->wr, &bad);
	c->n = 0;
	return rc ? post_failed(c->q, rc, r) : 0;
}

// recv_again gathers receive wr_id of QP q to post again, into the slot
// it used. Non-zero when posting another QP's gathered ones failed.
static inline int recv_again(const struct rb_params *p, struct recv_chain *c, const struct rb_qp *q, uint64_t wr_id, struct rb_result *r) {
	if (c->n && (c->q != q || c->n == RB_POLL_BATCH) && repost(c, r))
		return 1;
	int k = c->n++;
	c->q = q;
	c->sge[k] = (struct ibv_sge){.addr = recv_slot_addr(p, q, wr_id), .length = q->recv_len, .lkey = q->recv_lkey};
	c->wr[k].wr_id = wr_id;
	c->wr[k].sg_list = &c->sge[k];
	c->wr[k].num_sge = 1;
	c->wr[k].next = NULL;
	if (k)
		c->wr[k - 1].next = &c->wr[k];
	return 0;
}

void rb_bw_recv(const struct rb_params *p, struct rb_result *r) {
	memset(r, 0, sizeof(*r));
	struct ibv_wc wc[RB_POLL_BATCH];
	struct limits l;
	struct recv_chain rc;
	memset(&rc, 0, sizeof(rc));
	// Receives earlier loops left posted stay valid (every completion is
	// reposted with its wr_id, so their slots are distinct); post the rest.
	uint32_t depth = p->rx_depth ? p->rx_depth : 1;
	for (uint32_t i = p->lo; i < p->hi; i++) {
		struct rb_qp *q = &p->qps[i];
		q->completed = 0;
		q->bad_bytes = 0;
		for (uint32_t k = depth - q->prepost; k < depth; k++)
			if (post_recv(p, q, wr_id_of(q->index, k), r))
				return;
	}
	set_ready(p);
	limits_init(&l, p);
	uint64_t want = p->iters * (p->hi - p->lo), received = 0;
	uint32_t polls = 0;
	while (!p->iters || received < want) {
		int n = ibv_poll_cq(p->cq, RB_POLL_BATCH, wc);
		if (n < 0) {
			r->status = RB_POLL_ERROR;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (wc_failed(&wc[i], r))
				goto out;
			// Receives carry the QP's index, not its place in this set:
			// those an earlier loop left posted complete here.
			uint32_t idx = (uint32_t)(wc[i].wr_id >> RB_QP_SHIFT);
			uint32_t qi = idx < p->n_index ? p->pos_of[idx] : UINT32_MAX;
			if (qi < p->lo || qi >= p->hi) { // another loop's QP: the CQ must not be shared
				r->status = RB_FOREIGN_WC;
				r->qp_num = wc[i].qp_num;
				goto out;
			}
			struct rb_qp *q = &p->qps[qi];
			q->completed++;
			received++;
			if (p->verify && wc[i].opcode == IBV_WC_RECV) { // not WRITE_WITH_IMM: its data is elsewhere
				// Messages on one RC QP arrive in order: the n-th
				// carries pattern n. UD payload follows the GRH.
				const uint8_t *msg = (const uint8_t *)(uintptr_t)recv_slot_addr(p, q, wc[i].wr_id) + (p->ud_grh ? 40 : 0);
				q->bad_bytes += rb_pattern_check(msg, p->size, p->pattern_seed, p->fixed_pattern ? 1 : q->completed);
			}
			if (recv_again(p, &rc, q, wc[i].wr_id, r))
				goto out;
		}
		if (repost(&rc, r))
			goto out;
		if (n > 0 && p->progress)
			__atomic_fetch_add(p->progress, (uint64_t)n, __ATOMIC_RELAXED);
		// Check the stop flag and the deadline every RB_CLOCK_EVERY polls,
		// empty or not: traffic that never pauses must not keep the loop
		// from stopping.
		if (++polls >= RB_CLOCK_EVERY) {
			polls = 0;
			if (check_abort(p, &l, r, rb_cycles()))
				break;
		}
	}
out:
	if (rc.n) { // a batch cut short by a failed completion: its receives go back, its failure stays
		struct rb_result failed = *r;
		if (repost(&rc, r))
			*r = failed;
	}
	r->completed = received;
	r->t_start_ns = l.k.ns0;
	r->t_end_ns = rb_now_ns();
}
