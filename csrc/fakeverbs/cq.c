// cq.c: completion queues. A CQ is a bounded lock-free ring in a shared
// object (Vyukov's multi-producer multi-consumer queue: each entry carries
// the turn it belongs to), so this process's posts and a peer's SENDs can
// add to it at once while any of the owner's threads poll it, and no
// process can leave a lock held.
#include "fv.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint32_t next_cq_seed(void) {
	static uint32_t n;
	return (uint32_t)getpid() * 40503u + __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED);
}

static struct fv_cq *cq_new(struct ibv_context *ctx, int cqe, struct ibv_comp_channel *ch, void *cq_context) {
	fv_init();
	if (cqe < 1 || cqe > FV_MAX_CQE) {
		errno = EINVAL;
		return NULL;
	}
	uint32_t cap = 1;
	while (cap < (uint32_t)cqe)
		cap <<= 1;
	struct fv_cq *c = fv_zalloc_lines(sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	int dev = ((struct fv_context *)verbs_get_ctx(ctx))->dev->index;
	size_t len = sizeof(struct fv_cq_shm) + (size_t)cap * sizeof(struct fv_cqe);
	struct fv_cq_shm *s = fv_obj_new(dev, FV_CQ, next_cq_seed(), len, &c->id);
	if (!s)
		return fv_undo_free(c);
	s->magic = FV_MAGIC_CQ;
	s->id = c->id;
	s->mask = cap - 1;
	for (uint32_t i = 0; i < cap; i++)
		s->slot[i].seq = i; // turn i may fill entry i
	c->shm = s;
	c->map_len = len;
	struct ibv_cq *cq = &c->u.cq;
	cq->context = ctx;
	cq->channel = ch;
	cq->cq_context = cq_context;
	cq->handle = c->id;
	cq->cqe = (int)cap;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
	return c;
}

FV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context, struct ibv_comp_channel *ch, int vector) {
	(void)vector;
	struct fv_cq *c = cq_new(ctx, cqe, ch, cq_context);
	return c ? &c->u.cq : NULL;
}

FV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq) {
	struct fv_cq *c = (struct fv_cq *)cq;
	int dev = ((struct fv_context *)verbs_get_ctx(cq->context))->dev->index;
	// A QP still using the CQ keeps it: as libibverbs, refuse.
	pthread_mutex_lock(&fv_qps_mu);
	for (int i = 0; i < FV_MAX_LOCAL_QPS; i++)
		if (fv_qps[i] && (fv_qps[i]->scq == c || fv_qps[i]->rcq == c)) {
			pthread_mutex_unlock(&fv_qps_mu);
			return EBUSY;
		}
	pthread_mutex_unlock(&fv_qps_mu);
	fv_meter_report(&c->meter, "cq", c->id);
	fv_obj_unlink(dev, FV_CQ, c->id);
	munmap(c->shm, c->map_len);
	pthread_mutex_destroy(&cq->mutex);
	pthread_cond_destroy(&cq->cond);
	free(c);
	return 0;
}

int fv_cq_push(struct fv_cq_shm *q, const struct fv_cqe *e) {
	uint64_t pos = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
	struct fv_cqe *s;
	for (;;) {
		s = &q->slot[pos & q->mask];
		uint64_t seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (__atomic_compare_exchange_n(&q->tail, &pos, pos + 1, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
				break;
		} else if (dif < 0) {
			// Full: the completion is lost, as on a NIC whose CQ
			// overran; the CQ reports it on the next poll.
			__atomic_store_n(&q->overrun, 1, __ATOMIC_RELEASE);
			return -1;
		} else {
			pos = __atomic_load_n(&q->tail, __ATOMIC_RELAXED);
		}
	}
	s->wr_id = e->wr_id;
	s->status = e->status;
	s->opcode = e->opcode;
	s->byte_len = e->byte_len;
	s->imm = e->imm;
	s->qp_num = e->qp_num;
	s->src_qp = e->src_qp;
	s->wc_flags = e->wc_flags;
	s->slot = e->slot;
	s->is_recv = e->is_recv;
	s->due = e->due;
	s->pos = e->pos;
	__atomic_store_n(&s->seq, pos + 1, __ATOMIC_RELEASE);
	return 0;
}

// freed raises a queue's freed count to pos (pollers may race: a maximum).
static inline void freed(uint64_t *at, uint64_t pos) {
	uint64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
	while (pos > cur && !__atomic_compare_exchange_n(at, &cur, pos, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED))
		;
}

static inline void release_queue(const struct fv_cqe *e) {
	if (e->slot >= FV_MAX_LOCAL_QPS)
		return;
	struct fv_slot *sl = &fv_slots[e->slot];
	if (__atomic_load_n(&sl->qpn, __ATOMIC_RELAXED) != e->qp_num)
		return; // the QP is gone
	freed(e->is_recv ? &sl->rq_freed : &sl->sq_freed, e->pos);
}

static int overran(struct fv_cq *c) {
	if (!c->reported) {
		c->reported = 1;
		fv_warn("CQ %u overran its %d entries: completions were lost (make the CQ larger or poll it more often); every poll fails from now on", c->id, c->u.cq.cqe);
	}
	return -1;
}

// due_limit is how many of the got entries at pos are due (the fabric's
// pacing, FAKEVERBS_FABRIC): the first whose deadline has not passed, and
// all behind it, stay (a CQ gives its completions in order). One clock
// read a poll, and only when an entry has a deadline.
static __attribute__((noinline)) int due_limit(const struct fv_cq_shm *q, uint64_t pos, int got) {
	uint64_t now = 0;
	for (int i = 0; i < got; i++) {
		uint64_t d = q->slot[(pos + (uint64_t)i) & q->mask].due;
		if (!d)
			continue;
		if (!now)
			now = fv_now_ns();
		if (d > now)
			return i;
	}
	return got;
}

// take claims up to n ready entries from the ring: into wc (ibv_poll_cq)
// or, with wc NULL, the one entry into c->cur (ibv_cq_ex). Inlined, each
// caller gets its own copy loop.
static inline __attribute__((always_inline)) int take(struct fv_cq *c, int n, struct ibv_wc *wc) {
	struct fv_cq_shm *q = c->shm;
	uint64_t pos = __atomic_load_n(&q->head, __ATOMIC_RELAXED);
	int got;
	for (;;) {
		for (got = 0; got < n; got++)
			if (__atomic_load_n(&q->slot[(pos + (uint64_t)got) & q->mask].seq, __ATOMIC_ACQUIRE) != pos + (uint64_t)got + 1)
				break;
		if (FV_UNLIKELY(fv_paced) && got)
			got = due_limit(q, pos, got);
		if (got == 0)
			return 0;
		if (__atomic_compare_exchange_n(&q->head, &pos, pos + (uint64_t)got, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
			break;
	}
	for (int i = 0; i < got; i++) {
		struct fv_cqe *s = &q->slot[(pos + (uint64_t)i) & q->mask];
		struct fv_cqe e = *s;
		__atomic_store_n(&s->seq, pos + (uint64_t)i + q->mask + 1, __ATOMIC_RELEASE);
		release_queue(&e);
		if (!wc) {
			c->cur = e;
			continue;
		}
		struct ibv_wc *w = &wc[i];
		w->wr_id = e.wr_id;
		w->status = (enum ibv_wc_status)e.status;
		w->opcode = (enum ibv_wc_opcode)e.opcode;
		w->vendor_err = 0;
		w->byte_len = e.byte_len;
		w->imm_data = e.imm;
		w->qp_num = e.qp_num;
		w->src_qp = e.src_qp;
		w->wc_flags = e.wc_flags;
		w->pkey_index = 0;
		w->slid = 0;
		w->sl = 0;
		w->dlid_path_bits = 0;
	}
	return got;
}

static int poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) {
	struct fv_cq *c = (struct fv_cq *)cq;
	if (FV_UNLIKELY(__atomic_load_n(&c->npending, __ATOMIC_RELAXED)))
		fv_progress(c);
	if (FV_UNLIKELY(__atomic_load_n(&c->shm->overrun, __ATOMIC_RELAXED)))
		return overran(c);
	if (n <= 0)
		return 0;
	int got = take(c, n, wc);
	if (FV_UNLIKELY(fv_yield) && got == 0)
		sched_yield();
	fv_meter_add(&c->meter, (uint64_t)got);
	return got;
}

int (*fv_poll_cq_op)(struct ibv_cq *, int, struct ibv_wc *) = poll_cq;

// ibv_cq_ex polling: one completion at a time, through c->cur.

// take_one claims the next completion into c->cur, its wr_id and status
// into x: 0, or ENOENT when there is none.
static inline int take_one(struct fv_cq *c, struct ibv_cq_ex *x) {
	if (take(c, 1, NULL) == 0)
		return ENOENT;
	fv_meter_add(&c->meter, 1);
	x->wr_id = c->cur.wr_id;
	x->status = (enum ibv_wc_status)c->cur.status;
	return 0;
}

static int cq_poll_ex(struct ibv_cq_ex *x, struct ibv_poll_cq_attr *attr) {
	struct fv_cq *c = (struct fv_cq *)x;
	if (attr->comp_mask)
		return EINVAL;
	if (FV_UNLIKELY(__atomic_load_n(&c->npending, __ATOMIC_RELAXED)))
		fv_progress(c);
	if (FV_UNLIKELY(__atomic_load_n(&c->shm->overrun, __ATOMIC_RELAXED))) {
		overran(c);
		return EIO;
	}
	int err = take_one(c, x);
	if (FV_UNLIKELY(fv_yield) && err == ENOENT)
		sched_yield();
	return err;
}

static int cq_next_ex(struct ibv_cq_ex *x) { return take_one((struct fv_cq *)x, x); }

static void cq_end_ex(struct ibv_cq_ex *x) { (void)x; } // nothing held between polls
static enum ibv_wc_opcode rd_opcode(struct ibv_cq_ex *x) { return (enum ibv_wc_opcode)((struct fv_cq *)x)->cur.opcode; }
static uint32_t rd_vendor_err(struct ibv_cq_ex *x) { (void)x; return 0; }
static uint32_t rd_byte_len(struct ibv_cq_ex *x) { return ((struct fv_cq *)x)->cur.byte_len; }
static __be32 rd_imm(struct ibv_cq_ex *x) { return ((struct fv_cq *)x)->cur.imm; }
static uint32_t rd_qp_num(struct ibv_cq_ex *x) { return ((struct fv_cq *)x)->cur.qp_num; }
static uint32_t rd_src_qp(struct ibv_cq_ex *x) { return ((struct fv_cq *)x)->cur.src_qp; }
static unsigned int rd_wc_flags(struct ibv_cq_ex *x) { return ((struct fv_cq *)x)->cur.wc_flags; }
static uint32_t rd_slid(struct ibv_cq_ex *x) { (void)x; return 0; }
static uint8_t rd_sl(struct ibv_cq_ex *x) { (void)x; return 0; }
static uint8_t rd_dlid_path_bits(struct ibv_cq_ex *x) { (void)x; return 0; }

struct ibv_cq_ex *fv_create_cq_ex(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *a) {
	// What ibv_cq_ex can read here; a timestamp or a flow tag it cannot.
	const uint64_t can = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
	                     IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | IBV_WC_EX_WITH_DLID_PATH_BITS;
	if (a->wc_flags & ~can) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct fv_cq *c = cq_new(ctx, (int)a->cqe, a->channel, a->cq_context);
	if (!c)
		return NULL;
	struct ibv_cq_ex *x = &c->u.cqx;
	x->start_poll = cq_poll_ex;
	x->next_poll = cq_next_ex;
	x->end_poll = cq_end_ex;
	x->read_opcode = rd_opcode;
	x->read_vendor_err = rd_vendor_err;
	x->read_byte_len = rd_byte_len;
	x->read_imm_data = rd_imm;
	x->read_qp_num = rd_qp_num;
	x->read_src_qp = rd_src_qp;
	x->read_wc_flags = rd_wc_flags;
	x->read_slid = rd_slid;
	x->read_sl = rd_sl;
	x->read_dlid_path_bits = rd_dlid_path_bits;
	return x;
}

// Completion events: completions are polled here, never waited for (a
// wait would need the producer to wake the poller: a system call on the
// data path). ibv_req_notify_cq says so; a channel can still be made.
static int req_notify_cq(struct ibv_cq *cq, int solicited_only) {
	(void)solicited_only;
	struct fv_cq *c = (struct fv_cq *)cq;
	if (!c->told_events) {
		c->told_events = 1;
		fv_warn("completion events (ibv_req_notify_cq) are not supported: poll the CQ");
	}
	return EOPNOTSUPP;
}

int (*fv_req_notify_op)(struct ibv_cq *, int) = req_notify_cq;

FV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx) {
	struct ibv_comp_channel *ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->context = ctx;
	ch->fd = dup(ctx->async_fd); // never readable: no event is ever raised
	ch->refcnt = 0;
	return ch;
}

FV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ch) {
	close(ch->fd);
	free(ch);
	return 0;
}

FV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **cq_context) {
	(void)ch, (void)cq, (void)cq_context;
	errno = EOPNOTSUPP;
	return -1;
}

FV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents) { (void)cq, (void)nevents; }

FV_EXPORT int ibv_resize_cq(struct ibv_cq *cq, int cqe) {
	(void)cq, (void)cqe;
	return EOPNOTSUPP;
}
