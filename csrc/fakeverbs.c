// fakeverbs.c: an in-memory verbs device for the loops' unit tests. It is as
// hostile as a real provider where the loops can go wrong: completions arrive
// some polls after the request (asynchronously), a send queue refuses a post
// when its unsignaled requests fill it (its slots are freed only by a polled
// signaled completion, as mlx5 frees them), the CQ takes several pollers at
// once (it has a lock, as real ones do) and counts overruns, a QP can flood
// its receive queue with messages that never stop, a completion can fail, and
// a CQ can stall once or be paced (a path slower than the loop).
#include "fakeverbs.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mono_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct fake_entry {
	struct ibv_wc wc;
	struct fake_qp *qp; // send completions: frees the QP's slots up to pos
	uint64_t pos;
	uint64_t due; // the CQ's poll count from which it may be returned
};

struct fake_cq {
	struct ibv_cq cq; // first: the loops see this
	pthread_mutex_t mu;
	struct fake_entry *ring;
	uint32_t cap, head, count;
	uint64_t polls, rng, overruns;
	struct fake_qp *flooders[FAKE_MAX_QPS]; // QPs whose receives fill by themselves
	int nflood;
	// A stall (fake_cq_stall): after stall_after completions returned, none
	// for stall_ns, once, as a peer that stops answering for a while.
	uint64_t returned, stall_after, stall_ns, stall_until;
	// A pace (fake_cq_pace): one completion every pace_ns at most, the
	// next from next_at on.
	uint64_t pace_ns, next_at;
	uint64_t last_wc_ns; // when the last completion was returned (0: none yet)
};

struct fake_qp {
	struct ibv_qp qp; // first
	struct fake_cq *scq, *rcq;
	pthread_mutex_t mu;
	uint32_t sq_cap;
	uint64_t posted, freed, refused, signaled;
	uint64_t first_post_ns; // when the first request was taken (0: none yet)
	uint64_t fail_at; // the send completion at this position fails
	uint64_t rq[FAKE_RQ_CAP];
	uint32_t rq_head, rq_count;
	uint32_t msg_len;
};

static struct ibv_context fake_ctx;
static struct ibv_context_ops *ops_of(struct ibv_context *c) { return &c->ops; }

static uint64_t xorshift(uint64_t *s) {
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

// push adds a completion, due a few polls from now. Called with cq->mu held.
static void push(struct fake_cq *cq, struct ibv_wc wc, struct fake_qp *qp, uint64_t pos) {
	if (cq->count == cq->cap) {
		cq->overruns++;
		return;
	}
	struct fake_entry *e = &cq->ring[(cq->head + cq->count) % cq->cap];
	e->wc = wc;
	e->qp = qp;
	e->pos = pos;
	e->due = cq->polls + xorshift(&cq->rng) % 4;
	cq->count++;
}

static int fake_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
	struct fake_qp *q = (struct fake_qp *)ibqp;
	pthread_mutex_lock(&q->mu);
	for (; wr; wr = wr->next) {
		if (q->posted - q->freed >= q->sq_cap) {
			q->refused++;
			pthread_mutex_unlock(&q->mu);
			*bad = wr;
			return ENOMEM;
		}
		if (!q->posted++)
			q->first_post_ns = mono_ns();
		if (!(wr->send_flags & IBV_SEND_SIGNALED))
			continue;
		q->signaled++;
		struct ibv_wc wc;
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wr->wr_id;
		wc.status = q->posted == q->fail_at ? IBV_WC_RETRY_EXC_ERR : IBV_WC_SUCCESS;
		wc.opcode = IBV_WC_RDMA_WRITE;
		wc.qp_num = ibqp->qp_num;
		pthread_mutex_lock(&q->scq->mu);
		push(q->scq, wc, q, q->posted);
		pthread_mutex_unlock(&q->scq->mu);
	}
	pthread_mutex_unlock(&q->mu);
	return 0;
}

static int fake_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
	struct fake_qp *q = (struct fake_qp *)ibqp;
	pthread_mutex_lock(&q->mu);
	for (; wr; wr = wr->next) {
		if (q->rq_count == FAKE_RQ_CAP) {
			pthread_mutex_unlock(&q->mu);
			*bad = wr;
			return ENOMEM;
		}
		q->rq[(q->rq_head + q->rq_count++) % FAKE_RQ_CAP] = wr->wr_id;
	}
	pthread_mutex_unlock(&q->mu);
	return 0;
}

// flood delivers a message to every posted receive of the flooding QPs.
// Called with cq->mu held.
static void flood(struct fake_cq *cq) {
	for (int i = 0; i < cq->nflood; i++) {
		struct fake_qp *q = cq->flooders[i];
		pthread_mutex_lock(&q->mu);
		while (q->rq_count > 0 && cq->count < cq->cap) {
			struct ibv_wc wc;
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = q->rq[q->rq_head];
			q->rq_head = (q->rq_head + 1) % FAKE_RQ_CAP;
			q->rq_count--;
			wc.status = IBV_WC_SUCCESS;
			wc.opcode = IBV_WC_RECV;
			wc.byte_len = q->msg_len;
			wc.qp_num = q->qp.qp_num;
			push(cq, wc, NULL, 0);
		}
		pthread_mutex_unlock(&q->mu);
	}
}

static int fake_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc) {
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	pthread_mutex_lock(&cq->mu);
	cq->polls++;
	if (cq->stall_ns && cq->returned >= cq->stall_after) {
		uint64_t now = mono_ns();
		if (!cq->stall_until)
			cq->stall_until = now + cq->stall_ns;
		if (now < cq->stall_until) {
			pthread_mutex_unlock(&cq->mu);
			return 0;
		}
		cq->stall_ns = 0;
	}
	flood(cq);
	// A random share of what is due, in order.
	int limit = (int)(xorshift(&cq->rng) % (uint64_t)(n + 1));
	uint64_t paced_at = 0;
	if (cq->pace_ns && limit > 0) {
		paced_at = mono_ns();
		limit = paced_at >= cq->next_at ? 1 : 0;
	}
	int got = 0;
	struct fake_qp *freeing[n > 0 ? n : 1];
	uint64_t upto[n > 0 ? n : 1];
	while (got < limit && cq->count > 0) {
		struct fake_entry *e = &cq->ring[cq->head];
		if (e->due > cq->polls)
			break;
		freeing[got] = e->qp;
		upto[got] = e->pos;
		wc[got++] = e->wc;
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	cq->returned += (uint64_t)got;
	if (paced_at && got)
		cq->next_at = paced_at + cq->pace_ns;
	if (got)
		cq->last_wc_ns = mono_ns();
	pthread_mutex_unlock(&cq->mu);
	// Free the send queue slots outside the CQ's lock: posting takes the
	// QP's lock, then the CQ's.
	for (int i = 0; i < got; i++) {
		struct fake_qp *q = freeing[i];
		if (!q)
			continue;
		pthread_mutex_lock(&q->mu);
		if (upto[i] > q->freed)
			q->freed = upto[i];
		pthread_mutex_unlock(&q->mu);
	}
	return got;
}

static void fake_ops_init(void) {
	struct ibv_context_ops *o = ops_of(&fake_ctx);
	o->post_send = fake_post_send;
	o->post_recv = fake_post_recv;
	o->poll_cq = fake_poll_cq;
}

static void fake_init(void) {
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, fake_ops_init);
}

struct ibv_cq *fake_cq_new(uint32_t cap, uint64_t seed) {
	fake_init();
	struct fake_cq *cq = calloc(1, sizeof(*cq));
	cq->cq.context = &fake_ctx;
	cq->cq.cqe = (int)cap;
	pthread_mutex_init(&cq->mu, NULL);
	cq->ring = calloc(cap, sizeof(*cq->ring));
	cq->cap = cap;
	cq->rng = seed | 1;
	return &cq->cq;
}

void fake_cq_stall(struct ibv_cq *ibcq, uint64_t after, uint64_t ns) {
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	pthread_mutex_lock(&cq->mu);
	cq->stall_after = after;
	cq->stall_ns = ns;
	cq->stall_until = 0;
	pthread_mutex_unlock(&cq->mu);
}

void fake_cq_pace(struct ibv_cq *ibcq, uint64_t ns) {
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	pthread_mutex_lock(&cq->mu);
	cq->pace_ns = ns;
	cq->next_at = 0;
	pthread_mutex_unlock(&cq->mu);
}

uint64_t fake_cq_last_wc_ns(struct ibv_cq *ibcq) {
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	pthread_mutex_lock(&cq->mu);
	uint64_t t = cq->last_wc_ns;
	pthread_mutex_unlock(&cq->mu);
	return t;
}

uint64_t fake_qp_first_post_ns(struct ibv_qp *ibqp) {
	struct fake_qp *q = (struct fake_qp *)ibqp;
	pthread_mutex_lock(&q->mu);
	uint64_t t = q->first_post_ns;
	pthread_mutex_unlock(&q->mu);
	return t;
}

uint64_t fake_cq_overruns(struct ibv_cq *ibcq) {
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	pthread_mutex_lock(&cq->mu);
	uint64_t n = cq->overruns;
	pthread_mutex_unlock(&cq->mu);
	return n;
}

void fake_cq_free(struct ibv_cq *ibcq) {
	struct fake_cq *cq = (struct fake_cq *)ibcq;
	pthread_mutex_destroy(&cq->mu);
	free(cq->ring);
	free(cq);
}

struct ibv_qp *fake_qp_new(struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t sq_cap, uint32_t qp_num) {
	fake_init();
	struct fake_qp *q = calloc(1, sizeof(*q));
	q->qp.context = &fake_ctx;
	q->qp.qp_num = qp_num;
	q->qp.send_cq = scq;
	q->qp.recv_cq = rcq;
	q->qp.qp_type = IBV_QPT_RC;
	q->scq = (struct fake_cq *)scq;
	q->rcq = (struct fake_cq *)rcq;
	q->sq_cap = sq_cap;
	pthread_mutex_init(&q->mu, NULL);
	return &q->qp;
}

void fake_qp_fail_at(struct ibv_qp *ibqp, uint64_t pos) { ((struct fake_qp *)ibqp)->fail_at = pos; }

int fake_qp_flood(struct ibv_qp *ibqp, uint32_t msg_len) {
	struct fake_qp *q = (struct fake_qp *)ibqp;
	struct fake_cq *cq = q->rcq;
	pthread_mutex_lock(&cq->mu);
	int ok = cq->nflood < FAKE_MAX_QPS;
	if (ok) {
		cq->flooders[cq->nflood++] = q;
		q->msg_len = msg_len;
	}
	pthread_mutex_unlock(&cq->mu);
	return ok ? 0 : -1;
}

void fake_qp_stats(struct ibv_qp *ibqp, uint64_t *posted, uint64_t *refused, uint64_t *signaled) {
	struct fake_qp *q = (struct fake_qp *)ibqp;
	pthread_mutex_lock(&q->mu);
	*posted = q->posted;
	*refused = q->refused;
	*signaled = q->signaled;
	pthread_mutex_unlock(&q->mu);
}

void fake_qp_free(struct ibv_qp *ibqp) {
	struct fake_qp *q = (struct fake_qp *)ibqp;
	pthread_mutex_destroy(&q->mu);
	free(q);
}
