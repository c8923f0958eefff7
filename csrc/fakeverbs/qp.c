// qp.c: queue pairs and the data path. ibv_post_send carries each request
// out at once, in the posting thread: the peer's memory is mapped here (its
// MRs' pages are shared objects), so an RDMA WRITE is a copy into it, a
// SEND a copy into the receive buffer at the head of the peer's receive
// ring, and each completion an entry in a CQ's ring. A request that cannot
// go yet (a SEND with no receive posted at the peer: an RNR NAK on a real
// NIC; a peer QP not ready) waits in the QP, with everything behind it, and
// goes when this process next posts or polls (RC keeps order); its retry
// budget (rnr_retry, retry_cnt and timeout) ends the wait as a NIC's would.
#include "fv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

extern int (*fv_poll_cq_op)(struct ibv_cq *, int, struct ibv_wc *);
extern int (*fv_req_notify_op)(struct ibv_cq *, int);

static int32_t self_pid;
static uint32_t nslots_hw; // slots in use are below this (atomic)

enum { EX_DONE, EX_BLOCK_RNR, EX_BLOCK_PEER, EX_ERR };

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);

static int post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
	(void)srq;
	*bad = wr;
	return EOPNOTSUPP;
}

void fv_qp_ops(struct ibv_context_ops *o) {
	o->post_send = post_send;
	o->post_recv = post_recv;
	o->poll_cq = fv_poll_cq_op;
	o->req_notify_cq = fv_req_notify_op;
	o->post_srq_recv = post_srq_recv;
}

// Memory keys. A QP remembers the MRs it used last (lkeys, rkeys); a miss
// looks the key up in this process's handles (fv_mref_get), which maps a
// peer's MR on first use. The data path then reads one word of the MR's
// header (its state: a deregistered MR fails) and checks the rest against
// the QP's copy.

static struct fv_key_cache *key_miss(struct fv_key_cache *cache, uint32_t key, int dev) {
	for (int j = 0; j < FV_KEY_CACHE; j++)
		if (cache[j].ref && cache[j].key == key)
			return &cache[j];
	struct fv_mref *r = fv_mref_get(dev, key);
	if (!r)
		return NULL;
	struct fv_key_cache *c = &cache[key & (FV_KEY_CACHE - 1)];
	fv_mref_put(c->ref);
	const struct fv_mr_hdr *h = r->hdr;
	*c = (struct fv_key_cache){.key = key, .access = h->access, .pid = h->pid, .pd = h->pd, .lo = h->addr, .len = h->len,
	                           .delta = (intptr_t)r->base - (intptr_t)h->pbase, .state = &h->state, .ref = r, .reachable = r->base != NULL};
	return c;
}

static void keys_flush(struct fv_key_cache *cache) {
	for (int j = 0; j < FV_KEY_CACHE; j++) {
		fv_mref_put(cache[j].ref);
		cache[j].ref = NULL;
	}
}

// xlate turns (key, addr, len) into a pointer in this process: the MR must
// be valid, belong to pid's PD pd, allow need, and hold the whole range.
static inline uint8_t *xlate(struct fv_key_cache *cache, int dev, uint32_t key, uint64_t addr, uint64_t len, uint32_t need, int32_t pid, uint32_t pd) {
	struct fv_key_cache *c = &cache[key & (FV_KEY_CACHE - 1)];
	if (FV_UNLIKELY(!c->ref || c->key != key) && !(c = key_miss(cache, key, dev)))
		return NULL;
	if (FV_UNLIKELY(__atomic_load_n(c->state, __ATOMIC_RELAXED) != FV_MR_VALID))
		return NULL;
	if (FV_UNLIKELY(c->pid != pid || c->pd != pd || (c->access & need) != need))
		return NULL;
	if (FV_UNLIKELY(addr < c->lo || len > c->len || addr - c->lo > c->len - len))
		return NULL;
	if (FV_UNLIKELY(!c->reachable)) { // a peer's MR whose pages are not shared
		static int told;
		if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
			fv_warn("MR key 0x%x (pid %d) is not in shared memory (memory of a kind registration cannot move, or partly inside another MR's pages): another process cannot reach it", key, pid);
		return NULL;
	}
	return (uint8_t *)(uintptr_t)((intptr_t)addr + c->delta);
}

// A scatter or gather list, translated.
struct iov {
	uint8_t *p;
	uint32_t n;
};

// copy_msg copies a message of total bytes (at least 1) from s to d, its
// last byte last, with release order: a peer spinning on it (write-lat's
// polling of the last byte, as on a NIC that writes in order) sees the
// whole message once it sees that byte.
static inline void copy_msg(uint8_t *d, const uint8_t *s, uint64_t total) {
	if (total > 1)
		memcpy(d, s, total - 1);
	__atomic_store_n(d + total - 1, s[total - 1], __ATOMIC_RELEASE);
}

// copy_iov is copy_msg over lists: total bytes from src to dst, the last
// byte last.
static inline void copy_iov(const struct iov *dst, int nd, const struct iov *src, int ns, uint64_t total) {
	if (!total)
		return;
	if (FV_LIKELY(nd == 1 && ns == 1)) {
		copy_msg(dst[0].p, src[0].p, total);
		return;
	}
	int di = 0, si = 0;
	uint32_t doff = 0, soff = 0;
	uint64_t left = total;
	while (left > 1) {
		while (doff == dst[di].n) di++, doff = 0;
		while (soff == src[si].n) si++, soff = 0;
		uint64_t k = dst[di].n - doff;
		if (src[si].n - soff < k)
			k = src[si].n - soff;
		if (k > left - 1)
			k = left - 1;
		memcpy(dst[di].p + doff, src[si].p + soff, k);
		doff += (uint32_t)k, soff += (uint32_t)k, left -= k;
	}
	while (doff == dst[di].n) di++, doff = 0;
	while (soff == src[si].n) si++, soff = 0;
	__atomic_store_n(dst[di].p + doff, src[si].p[soff], __ATOMIC_RELEASE);
}

// gather translates a request's local list (inline data needs no key).
static inline int gather(struct fv_qp *q, const struct ibv_send_wr *wr, struct iov *out, uint32_t need) {
	int n = 0;
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];
		if (!s->length)
			continue;
		uint8_t *p;
		if (wr->send_flags & IBV_SEND_INLINE)
			p = (uint8_t *)(uintptr_t)s->addr;
		else if (!(p = xlate(q->lkeys, q->dev, s->lkey, s->addr, s->length, need, self_pid, q->pd)))
			return -1;
		out[n].p = p;
		out[n++].n = s->length;
	}
	return n;
}

static inline uint32_t wc_opcode(enum ibv_wr_opcode op) {
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM: return IBV_WC_SEND;
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	default: return IBV_WC_SEND;
	}
}

static void to_error(struct fv_qp *q);

// complete adds a send completion. A full CQ loses it and puts the QP in
// the error state, as a CQ overrun does on a NIC.
static inline void complete(struct fv_qp *q, const struct ibv_send_wr *wr, uint64_t pos, uint32_t status, uint32_t len) {
	struct fv_cqe e;
	e.wr_id = wr->wr_id;
	e.status = status;
	e.opcode = wc_opcode(wr->opcode);
	e.byte_len = len;
	e.imm = 0;
	e.qp_num = q->qpn;
	e.src_qp = 0;
	e.wc_flags = 0;
	e.slot = (uint16_t)q->slot_ix;
	e.is_recv = 0;
	e.due = q->due;
	e.pos = pos;
	if (FV_UNLIKELY(fv_cq_push(q->scq->shm, &e) != 0) && q->state != IBV_QPS_ERR)
		to_error(q);
}

// recv_complete adds a completion of the peer's receive to its CQ.
static inline void recv_complete(struct fv_qp *q, uint64_t wr_id, uint64_t pos, uint32_t status, uint32_t opcode, uint32_t len, uint32_t imm, uint32_t flags) {
	struct fv_qp_shm *p = q->peer;
	struct fv_cqe e;
	e.wr_id = wr_id;
	e.status = status;
	e.opcode = opcode;
	e.byte_len = len;
	e.imm = imm;
	e.qp_num = p->qpn;
	e.src_qp = q->qpn;
	e.wc_flags = flags;
	e.slot = (uint16_t)p->slot;
	e.is_recv = 1;
	e.due = q->due;
	e.pos = pos;
	fv_cq_push(q->peer_rcq, &e); // an overrun there is the peer's to report
}

static void disconnect(struct fv_qp *q) {
	keys_flush(q->rkeys); // the next peer's keys are others
	if (q->peer)
		munmap(q->peer, q->peer_len);
	if (q->peer_rcq)
		munmap(q->peer_rcq, q->peer_rcq_len);
	q->peer = NULL;
	q->peer_rcq = NULL;
}

// connect maps the peer QP's object and its receive CQ's. Called when the
// peer is first needed; until its QP exists requests wait (a NIC would
// retry), so a peer may be created after this QP reaches RTR.
static int connect(struct fv_qp *q) {
	size_t len, clen;
	struct fv_qp_shm *p = fv_obj_map(q->dest_dev, FV_QP, q->dest_qpn, &len);
	if (!p)
		return 0;
	if (p->magic != FV_MAGIC_QP || p->qpn != q->dest_qpn) {
		munmap(p, len);
		return 0;
	}
	struct fv_cq_shm *c = fv_obj_map(q->dest_dev, FV_CQ, p->rcq_id, &clen);
	if (!c || c->magic != FV_MAGIC_CQ) {
		if (c)
			munmap(c, clen);
		munmap(p, len);
		return 0;
	}
	q->peer = p;
	q->peer_len = len;
	q->peer_rcq = c;
	q->peer_rcq_len = clen;
	q->peer_pid = p->pid;
	return 1;
}

// scatter translates a receive's list, in the MRs of its owner (pid, PD
// pd) on device dev, into rem: IBV_WC_SUCCESS with *nr entries of *room
// bytes in all, or the receive's error.
static inline uint32_t scatter(struct fv_key_cache *keys, int dev, const struct fv_rwqe *rw, int32_t pid, uint32_t pd,
                               struct iov *rem, int *nr, uint64_t *room) {
	*nr = 0;
	*room = 0;
	for (uint32_t i = 0; i < rw->num_sge && i < FV_MAX_SGE; i++) {
		const struct ibv_sge *s = &rw->sge[i];
		if (!s->length)
			continue;
		uint8_t *d = xlate(keys, dev, s->lkey, s->addr, s->length, IBV_ACCESS_LOCAL_WRITE, pid, pd);
		if (!d)
			return IBV_WC_LOC_PROT_ERR;
		rem[*nr].p = d;
		rem[(*nr)++].n = s->length;
		*room += s->length;
	}
	return IBV_WC_SUCCESS;
}

static int exec_ud(struct fv_qp *q, const struct ibv_send_wr *wr, uint64_t total, uint32_t *st);

// exec carries out one request. EX_ERR sets *st (the requester's status).
static int exec(struct fv_qp *q, const struct ibv_send_wr *wr, uint64_t total, uint32_t *st) {
	if (FV_UNLIKELY(q->qp_type == IBV_QPT_UD))
		return exec_ud(q, wr, total, st);
	struct fv_qp_shm *p = q->peer;
	if (FV_UNLIKELY(!p)) {
		if (!connect(q))
			return EX_BLOCK_PEER;
		p = q->peer;
	}
	uint32_t ps = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
	if (FV_UNLIKELY((ps != IBV_QPS_RTR && ps != IBV_QPS_RTS) || p->dest_qpn != q->qpn))
		return EX_BLOCK_PEER; // not ready, or connected elsewhere: nothing answers
	struct iov loc[FV_MAX_SGE], rem[FV_MAX_SGE];
	int nl;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM: {
		int imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		uint64_t c = 0;
		struct fv_rwqe *rw = NULL;
		if (imm) { // consumes a receive: check for one before writing
			c = __atomic_load_n(&p->rq_cons, __ATOMIC_ACQUIRE);
			if (c == __atomic_load_n(&p->rq_prod, __ATOMIC_ACQUIRE)) {
				if (q->qp_type == IBV_QPT_UC)
					return EX_DONE; // UC drops a message nobody receives
				return EX_BLOCK_RNR;
			}
			rw = &p->rq[c & p->rq_mask];
		}
		if (total) {
			uint8_t *d;
			if (!(p->access & IBV_ACCESS_REMOTE_WRITE) ||
			    !(d = xlate(q->rkeys, q->dest_dev, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, total, IBV_ACCESS_REMOTE_WRITE, q->peer_pid, p->pd))) {
				*st = IBV_WC_REM_ACCESS_ERR;
				return EX_ERR;
			}
			if (FV_LIKELY(wr->num_sge == 1)) { // the common case, without building lists
				const struct ibv_sge *s = wr->sg_list;
				const uint8_t *src = (wr->send_flags & IBV_SEND_INLINE) ? (const uint8_t *)(uintptr_t)s->addr
				                                                        : xlate(q->lkeys, q->dev, s->lkey, s->addr, total, 0, self_pid, q->pd);
				if (!src) {
					*st = IBV_WC_LOC_PROT_ERR;
					return EX_ERR;
				}
				copy_msg(d, src, total);
			} else {
				if ((nl = gather(q, wr, loc, 0)) < 0) {
					*st = IBV_WC_LOC_PROT_ERR;
					return EX_ERR;
				}
				rem[0].p = d;
				rem[0].n = (uint32_t)total;
				copy_iov(rem, 1, loc, nl, total);
			}
		}
		if (imm) {
			uint64_t wr_id = rw->wr_id;
			if (!__atomic_compare_exchange_n(&p->rq_cons, &c, c + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				return EX_BLOCK_PEER; // the peer flushed its queue meanwhile
			recv_complete(q, wr_id, c + 1, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, (uint32_t)total, wr->imm_data, IBV_WC_WITH_IMM);
		}
		return EX_DONE;
	}
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM: {
		uint64_t c = __atomic_load_n(&p->rq_cons, __ATOMIC_ACQUIRE);
		if (c == __atomic_load_n(&p->rq_prod, __ATOMIC_ACQUIRE)) {
			if (q->qp_type == IBV_QPT_UC)
				return EX_DONE;
			return EX_BLOCK_RNR;
		}
		// Claim the receive before writing into it: the owner may be
		// flushing its queue (to the error state) at this moment.
		struct fv_rwqe rw = p->rq[c & p->rq_mask];
		if (!__atomic_compare_exchange_n(&p->rq_cons, &c, c + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
			return EX_BLOCK_PEER;
		int nr;
		uint64_t room;
		uint32_t rst = scatter(q->rkeys, q->dest_dev, &rw, q->peer_pid, p->pd, rem, &nr, &room);
		if (rst == IBV_WC_SUCCESS && total > room)
			rst = IBV_WC_LOC_LEN_ERR;
		if (rst != IBV_WC_SUCCESS) {
			// The responder's error: its receive fails, and the
			// requester sees the NAK it would send.
			recv_complete(q, rw.wr_id, c + 1, rst, IBV_WC_RECV, 0, 0, 0);
			*st = rst == IBV_WC_LOC_LEN_ERR ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR;
			return EX_ERR;
		}
		if ((nl = gather(q, wr, loc, 0)) < 0) {
			recv_complete(q, rw.wr_id, c + 1, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, 0, 0, 0);
			*st = IBV_WC_LOC_PROT_ERR;
			return EX_ERR;
		}
		copy_iov(rem, nr, loc, nl, total);
		int imm = wr->opcode == IBV_WR_SEND_WITH_IMM;
		recv_complete(q, rw.wr_id, c + 1, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)total, imm ? wr->imm_data : 0, imm ? IBV_WC_WITH_IMM : 0);
		return EX_DONE;
	}
	case IBV_WR_RDMA_READ: {
		uint8_t *s;
		if (!total)
			return EX_DONE;
		if (!(p->access & IBV_ACCESS_REMOTE_READ) ||
		    !(s = xlate(q->rkeys, q->dest_dev, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, total, IBV_ACCESS_REMOTE_READ, q->peer_pid, p->pd))) {
			*st = IBV_WC_REM_ACCESS_ERR;
			return EX_ERR;
		}
		if ((nl = gather(q, wr, loc, IBV_ACCESS_LOCAL_WRITE)) < 0) {
			*st = IBV_WC_LOC_PROT_ERR;
			return EX_ERR;
		}
		rem[0].p = s;
		rem[0].n = (uint32_t)total;
		copy_iov(loc, nl, rem, 1, total);
		return EX_DONE;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		uint64_t ra = wr->wr.atomic.remote_addr;
		if (total != 8 || (ra & 7)) {
			*st = IBV_WC_REM_INV_REQ_ERR;
			return EX_ERR;
		}
		uint8_t *d;
		if (!(p->access & IBV_ACCESS_REMOTE_ATOMIC) ||
		    !(d = xlate(q->rkeys, q->dest_dev, wr->wr.atomic.rkey, ra, 8, IBV_ACCESS_REMOTE_ATOMIC, q->peer_pid, p->pd))) {
			*st = IBV_WC_REM_ACCESS_ERR;
			return EX_ERR;
		}
		if ((nl = gather(q, wr, loc, IBV_ACCESS_LOCAL_WRITE)) != 1) {
			*st = nl < 0 ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR;
			return EX_ERR;
		}
		// The peer's memory is shared: the operation is as atomic as
		// the CPU makes it, between processes too.
		uint64_t *at = (uint64_t *)(void *)d, old;
		if (wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			old = __atomic_fetch_add(at, wr->wr.atomic.compare_add, __ATOMIC_SEQ_CST);
		} else {
			old = wr->wr.atomic.compare_add;
			__atomic_compare_exchange_n(at, &old, wr->wr.atomic.swap, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		}
		memcpy(loc[0].p, &old, 8);
		return EX_DONE;
	}
	default:
		*st = IBV_WC_LOC_QP_OP_ERR;
		return EX_ERR;
	}
}

// ud_deliver puts a datagram into UD QP p's next receive, its GRH first,
// and completes that receive in CQ c: the datagram is dropped when p takes
// none (no receive posted), and a receive too short for it fails. keys is
// a key cache for p's MRs, dev p's device.
static void ud_deliver(struct fv_qp *q, struct fv_qp_shm *p, struct fv_cq_shm *c, int dev, struct fv_key_cache *keys,
                       const struct iov *loc, int nl, uint64_t total, const struct ibv_send_wr *wr) {
	uint64_t cons = __atomic_load_n(&p->rq_cons, __ATOMIC_ACQUIRE);
	if (cons == __atomic_load_n(&p->rq_prod, __ATOMIC_ACQUIRE))
		return; // no receive: UD drops it
	struct fv_rwqe rw = p->rq[cons & p->rq_mask];
	if (!__atomic_compare_exchange_n(&p->rq_cons, &cons, cons + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return; // taken meanwhile (flushed, or another sender's): dropped as a NIC would on a race it loses
	struct iov rem[FV_MAX_SGE], src[FV_MAX_SGE + 1];
	int nr;
	uint64_t room;
	uint32_t rst = scatter(keys, dev, &rw, p->pid, p->pd, rem, &nr, &room);
	if (rst == IBV_WC_SUCCESS && total + FV_GRH > room)
		rst = IBV_WC_LOC_LEN_ERR;
	uint8_t grh[FV_GRH];
	if (rst == IBV_WC_SUCCESS) {
		fv_ud_grh(grh, fv_dev_gid(q->dev), fv_dev_gid(dev), (uint32_t)total);
		src[0].p = grh;
		src[0].n = FV_GRH;
		memcpy(src + 1, loc, (size_t)nl * sizeof(*loc));
		copy_iov(rem, nr, src, nl + 1, total + FV_GRH);
	}
	int imm = wr->opcode == IBV_WR_SEND_WITH_IMM;
	struct fv_cqe e = {.wr_id = rw.wr_id, .status = rst, .opcode = IBV_WC_RECV,
	                   .byte_len = rst == IBV_WC_SUCCESS ? (uint32_t)total + FV_GRH : 0,
	                   .imm = imm ? wr->imm_data : 0, .qp_num = p->qpn, .src_qp = q->qpn,
	                   .wc_flags = IBV_WC_GRH | (imm ? IBV_WC_WITH_IMM : 0), .slot = (uint16_t)p->slot,
	                   .is_recv = 1, .due = q->due, .pos = cons + 1};
	fv_cq_push(c, &e); // an overrun there is the receiver's to report
}

// exec_ud sends one datagram: to the QP of the address handle's device and
// the request's QPN, if it is there, a UD QP ready to receive, and its
// Q_Key matches; else it goes nowhere, and the send still succeeds. Each
// datagram maps the receiver's objects and unmaps them after: probes are
// tens a second, not a benchmark's rate.
static int exec_ud(struct fv_qp *q, const struct ibv_send_wr *wr, uint64_t total, uint32_t *st) {
	struct fv_ah *ah = (struct fv_ah *)wr->wr.ud.ah;
	if (!ah || ah->magic != FV_MAGIC_AH || ah->ah.pd != q->u.qp.pd) {
		*st = IBV_WC_LOC_QP_OP_ERR; // a destroyed address handle, or another PD's
		return EX_ERR;
	}
	if (total > FV_UD_MTU) {
		*st = IBV_WC_LOC_LEN_ERR;
		return EX_ERR;
	}
	struct iov loc[FV_MAX_SGE];
	int nl = gather(q, wr, loc, 0);
	if (nl < 0) {
		*st = IBV_WC_LOC_PROT_ERR;
		return EX_ERR;
	}
	if (ah->dev < 0)
		ah->dev = fv_device_by_gid(&ah->dgid);
	if (ah->dev < 0)
		return EX_DONE; // nobody has that GID: the datagram is lost
	size_t len, clen;
	struct fv_qp_shm *p = fv_obj_map(ah->dev, FV_QP, wr->wr.ud.remote_qpn, &len);
	if (!p)
		return EX_DONE;
	uint32_t ps = __atomic_load_n(&p->state, __ATOMIC_ACQUIRE);
	uint32_t qkey = wr->wr.ud.remote_qkey & 0x80000000u ? __atomic_load_n(&q->shm->qkey, __ATOMIC_ACQUIRE) : wr->wr.ud.remote_qkey;
	struct fv_cq_shm *c = NULL;
	if (p->magic == FV_MAGIC_QP && p->qpn == wr->wr.ud.remote_qpn && p->qp_type == IBV_QPT_UD &&
	    (ps == IBV_QPS_RTR || ps == IBV_QPS_RTS) && __atomic_load_n(&p->qkey, __ATOMIC_ACQUIRE) == qkey &&
	    (c = fv_obj_map(ah->dev, FV_CQ, p->rcq_id, &clen)) && c->magic == FV_MAGIC_CQ) {
		struct fv_key_cache keys[FV_KEY_CACHE];
		memset(keys, 0, sizeof(keys));
		ud_deliver(q, p, c, ah->dev, keys, loc, nl, total, wr);
		keys_flush(keys);
	}
	if (c)
		munmap(c, clen);
	munmap(p, len);
	return EX_DONE;
}

// The retry budgets. min_rnr_timer's codes (IBTA 9.7.5.2.8) in units of
// 10 µs; timeout is 4.096 µs · 2^timeout (0: for ever).
static const uint32_t rnr_10us[32] = {65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
                                      256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};

static int budget_spent(struct fv_qp *q, int rnr) {
	if ((rnr && q->rnr_retry == 7) || (!rnr && q->timeout == 0))
		return 0; // retries for ever: no clock to read
	uint64_t now = fv_now_ns();
	if (!q->blocked_since || q->blocked_rnr != rnr) {
		q->blocked_since = now;
		q->blocked_rnr = rnr;
	}
	// The responder's timer, read now: it sets it at its RTR, which may
	// come after this QP mapped it.
	uint32_t timer = q->peer ? __atomic_load_n(&q->peer->min_rnr_timer, __ATOMIC_RELAXED) & 31 : 0;
	uint64_t limit = rnr ? (uint64_t)(q->rnr_retry + 1) * rnr_10us[timer] * 10000ull
	                     : (uint64_t)(q->retry_cnt + 1) * (4096ull << (q->timeout < 31 ? q->timeout : 31));
	return now - q->blocked_since > limit;
}

static inline uint64_t wr_total(const struct ibv_send_wr *wr) {
	uint64_t t = 0;
	for (int i = 0; i < wr->num_sge; i++)
		t += wr->sg_list[i].length;
	return t;
}

// pend_change tells the QP's CQs when it starts or stops having requests
// waiting: their polls then move it along (fv_progress).
static void pend_change(struct fv_qp *q, int delta) {
	if ((delta > 0 && q->pend_count == 1) || (delta < 0 && q->pend_count == 0)) {
		__atomic_fetch_add(&q->scq->npending, (uint32_t)delta, __ATOMIC_RELAXED);
		if (q->rcq != q->scq)
			__atomic_fetch_add(&q->rcq->npending, (uint32_t)delta, __ATOMIC_RELAXED);
	}
}

// enqueue keeps a request that cannot go yet. Inline data is copied now:
// the program may reuse its buffer as soon as the post returns.
static void enqueue(struct fv_qp *q, const struct ibv_send_wr *wr, uint64_t pos, uint64_t total) {
	uint32_t i = (q->pend_head + q->pend_count) % q->max_send_wr;
	struct fv_pending *e = &q->pend[i];
	e->wr = *wr;
	e->wr.next = NULL;
	e->pos = pos;
	e->due = q->due;
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint64_t off = 0;
		for (int k = 0; k < wr->num_sge; k++) {
			memcpy(e->inl + off, (void *)(uintptr_t)wr->sg_list[k].addr, wr->sg_list[k].length);
			off += wr->sg_list[k].length;
		}
		e->sge[0] = (struct ibv_sge){.addr = (uintptr_t)e->inl, .length = (uint32_t)total, .lkey = 0};
		e->wr.num_sge = 1;
	} else {
		memcpy(e->sge, wr->sg_list, sizeof(struct ibv_sge) * (size_t)wr->num_sge);
	}
	e->wr.sg_list = e->sge;
	q->pend_count++;
	pend_change(q, 1);
}

static inline int signaled(const struct fv_qp *q, const struct ibv_send_wr *wr) {
	return q->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
}

// flush_pending completes every waiting request with a flush error.
static void flush_pending(struct fv_qp *q) {
	while (q->pend_count) {
		struct fv_pending *e = &q->pend[q->pend_head];
		complete(q, &e->wr, e->pos, IBV_WC_WR_FLUSH_ERR, 0);
		q->pend_head = (q->pend_head + 1) % q->max_send_wr;
		q->pend_count--;
		pend_change(q, -1);
	}
	q->blocked_since = 0;
}

// flush_rq completes the receives no peer has taken with a flush error
// (the QP is going to the error state): they are claimed from the ring
// first, so a peer's SEND cannot take one meanwhile.
static void flush_rq(struct fv_qp *q) {
	struct fv_qp_shm *s = q->shm;
	uint64_t c = __atomic_load_n(&s->rq_cons, __ATOMIC_ACQUIRE), end;
	do {
		end = __atomic_load_n(&s->rq_prod, __ATOMIC_ACQUIRE);
	} while (!__atomic_compare_exchange_n(&s->rq_cons, &c, end, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
	for (uint64_t i = c; i < end; i++) {
		struct fv_cqe e = {0};
		e.wr_id = s->rq[i & s->rq_mask].wr_id;
		e.status = IBV_WC_WR_FLUSH_ERR;
		e.opcode = IBV_WC_RECV;
		e.qp_num = q->qpn;
		e.slot = (uint16_t)q->slot_ix;
		e.is_recv = 1;
		e.pos = i + 1;
		fv_cq_push(q->rcq->shm, &e);
	}
}

static void set_state(struct fv_qp *q, uint32_t st) {
	q->state = st;
	q->u.qp.state = (enum ibv_qp_state)st;
	__atomic_store_n(&q->shm->state, st, __ATOMIC_RELEASE);
}

static void to_error(struct fv_qp *q) {
	set_state(q, IBV_QPS_ERR);
	flush_pending(q);
	fv_lock(&q->rlock);
	flush_rq(q);
	fv_unlock(&q->rlock);
}

// drain sends the waiting requests that can go now. Called with q->lock.
static void drain(struct fv_qp *q) {
	while (q->pend_count) {
		struct fv_pending *e = &q->pend[q->pend_head];
		uint32_t st = IBV_WC_SUCCESS;
		uint64_t total = wr_total(&e->wr);
		q->due = e->due;
		int r = exec(q, &e->wr, total, &st);
		if (r == EX_BLOCK_RNR || r == EX_BLOCK_PEER) {
			if (!budget_spent(q, r == EX_BLOCK_RNR))
				return;
			st = r == EX_BLOCK_RNR ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR;
			r = EX_ERR;
		}
		q->blocked_since = 0;
		q->pend_head = (q->pend_head + 1) % q->max_send_wr;
		q->pend_count--;
		pend_change(q, -1);
		if (r == EX_ERR) {
			complete(q, &e->wr, e->pos, st, 0);
			to_error(q);
			return;
		}
		if (signaled(q, &e->wr))
			complete(q, &e->wr, e->pos, IBV_WC_SUCCESS, (uint32_t)total);
	}
}

// fv_progress moves along the waiting requests of the QPs that use CQ c,
// as a NIC retries on its own: a poll of either of a QP's CQs calls it
// while any has some (c->npending). Only those QPs: a thread polling its
// own CQ must not take other threads' QP locks (a holder preempted on a
// busy host would leave their owners spinning).
void fv_progress(struct fv_cq *c) {
	uint32_t hw = __atomic_load_n(&nslots_hw, __ATOMIC_ACQUIRE);
	if (pthread_mutex_trylock(&fv_qps_mu) != 0)
		return; // another thread is at it, or QPs are being made
	for (uint32_t i = 0; i < hw; i++) {
		struct fv_qp *q = fv_qps[i];
		if (q && (q->scq == c || q->rcq == c) && q->pend_count && fv_trylock(&q->lock)) {
			drain(q);
			fv_unlock(&q->lock);
		}
	}
	pthread_mutex_unlock(&fv_qps_mu);
}

static inline int opcode_ok(const struct fv_qp *q, enum ibv_wr_opcode op) {
	if (q->qp_type == IBV_QPT_UD)
		return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM: return 1;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return q->qp_type == IBV_QPT_RC;
	default: return 0;
	}
}

// pace gives a request on a paced path (FAKEVERBS_FABRIC) its deadline:
// the path is busy for total·8/bw after the later of now and the end of
// its last request (of any of this process's QPs on the path), and the
// completions come lat after that (a READ's data comes back over the
// reverse path, after both latencies). Nothing waits here: the deadline
// goes into the completions, and polls hold them till then.
static __attribute__((noinline)) void pace(struct fv_qp *q, const struct ibv_send_wr *wr, uint64_t total) {
	int d = wr->opcode == IBV_WR_RDMA_READ;
	struct fv_path *p = q->path[d];
	uint64_t now = fv_now_ns(), dur = (uint64_t)((double)total * q->ns_per_byte[d]);
	uint64_t cur = __atomic_load_n(&p->vclock, __ATOMIC_RELAXED), end;
	do
		end = (cur > now ? cur : now) + dur;
	while (!__atomic_compare_exchange_n(&p->vclock, &cur, end, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	q->due = end + q->lat_ns[0] + (d ? q->lat_ns[1] : 0);
	if (!q->due)
		q->due = 1;
}

// The paths this process's QPs use, one clock each.
#define FV_MAX_PATHS 1024
static struct fv_path paths[FV_MAX_PATHS];
static int npaths;
static pthread_mutex_t paths_mu = PTHREAD_MUTEX_INITIALIZER;

static struct fv_path *path_get(int src, int dst) {
	struct fv_path *p = NULL;
	pthread_mutex_lock(&paths_mu);
	for (int i = 0; i < npaths && !p; i++)
		if (paths[i].src == src && paths[i].dst == dst)
			p = &paths[i];
	if (!p && npaths < FV_MAX_PATHS) {
		p = &paths[npaths++];
		p->src = src;
		p->dst = dst;
	}
	pthread_mutex_unlock(&paths_mu);
	return p;
}

// path_setup reads the fabric's figures for the QP's path (at RTR, when
// its peer is known).
static void path_setup(struct fv_qp *q) {
	q->pace = 0;
	q->due = 0;
	for (int d = 0; d < 2; d++) {
		double bw, lat;
		int src = d ? q->dest_dev : q->dev, dst = d ? q->dev : q->dest_dev;
		fv_fabric_path(src, dst, &bw, &lat);
		q->ns_per_byte[d] = bw > 0 ? 8.0 / bw : 0;
		q->lat_ns[d] = lat > 0 ? (uint64_t)(lat * 1000.0 + 0.5) : 0;
		if (bw > 0 || lat > 0)
			q->pace = 1;
		q->path[d] = path_get(src, dst);
		if (!q->path[d]) { // the table is full: a clock of the QP's own
			if (!q->own)
				q->own = fv_zalloc_lines(2 * sizeof(*q->own));
			q->path[d] = q->own ? &q->own[d] : NULL;
		}
		if (!q->path[d])
			q->pace = 0;
	}
}

// post_locked takes a list of requests. Called with q->lock held.
static int post_locked(struct fv_qp *q, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
	if (FV_UNLIKELY(q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR)) {
		*bad = wr;
		return EINVAL;
	}
	if (FV_UNLIKELY(q->pend_count))
		drain(q);
	uint64_t freed = __atomic_load_n(&q->slot->sq_freed, __ATOMIC_ACQUIRE);
	for (; wr; wr = wr->next) {
		if (FV_UNLIKELY(q->sq_posted - freed >= q->max_send_wr)) {
			freed = __atomic_load_n(&q->slot->sq_freed, __ATOMIC_ACQUIRE);
			if (q->sq_posted - freed >= q->max_send_wr) {
				*bad = wr;
				return ENOMEM; // the send queue is full
			}
		}
		if (FV_UNLIKELY((unsigned)wr->num_sge > q->max_send_sge || !opcode_ok(q, wr->opcode))) {
			*bad = wr;
			return EINVAL;
		}
		uint64_t total = wr->num_sge == 1 ? wr->sg_list[0].length : wr_total(wr);
		if (FV_UNLIKELY((wr->send_flags & IBV_SEND_INLINE) && total > q->max_inline)) {
			*bad = wr;
			return EINVAL;
		}
		uint64_t pos = ++q->sq_posted;
		if (FV_UNLIKELY(q->state == IBV_QPS_ERR)) {
			complete(q, wr, pos, IBV_WC_WR_FLUSH_ERR, 0);
			continue;
		}
		if (FV_UNLIKELY(q->pace))
			pace(q, wr, total);
		if (FV_LIKELY(!q->pend_count)) {
			uint32_t st = IBV_WC_SUCCESS;
			int r = exec(q, wr, total, &st);
			if (FV_LIKELY(r == EX_DONE)) {
				if (signaled(q, wr))
					complete(q, wr, pos, IBV_WC_SUCCESS, (uint32_t)total);
				continue;
			}
			if (r == EX_ERR) {
				complete(q, wr, pos, st, 0);
				if (q->qp_type != IBV_QPT_UD)
					to_error(q); // the rest of the list is flushed
				// UD: the send queue's error alone (SQE); its receives go on
				continue;
			}
			if (budget_spent(q, r == EX_BLOCK_RNR)) { // a budget of nothing (rnr_retry 0)
				complete(q, wr, pos, r == EX_BLOCK_RNR ? IBV_WC_RNR_RETRY_EXC_ERR : IBV_WC_RETRY_EXC_ERR, 0);
				q->blocked_since = 0;
				to_error(q);
				continue;
			}
		}
		enqueue(q, wr, pos, total);
	}
	return 0;
}

static int post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
	struct fv_qp *q = (struct fv_qp *)ibqp;
	fv_lock(&q->lock);
	uint64_t before = q->sq_posted;
	int rc = post_locked(q, wr, bad);
	fv_meter_add(&q->meter, q->sq_posted - before);
	fv_unlock(&q->lock);
	return rc;
}

static int post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
	struct fv_qp *q = (struct fv_qp *)ibqp;
	struct fv_qp_shm *s = q->shm;
	int rc = 0;
	fv_lock(&q->rlock);
	uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
	if (FV_UNLIKELY(st == IBV_QPS_RESET)) {
		*bad = wr;
		rc = EINVAL;
		goto out;
	}
	uint64_t freed = __atomic_load_n(&q->slot->rq_freed, __ATOMIC_ACQUIRE);
	uint64_t prod = q->rq_prod;
	for (; wr; wr = wr->next) {
		if (FV_UNLIKELY((unsigned)wr->num_sge > s->max_recv_sge)) {
			*bad = wr;
			rc = EINVAL;
			break;
		}
		if (FV_UNLIKELY(prod - freed >= s->rq_size)) {
			freed = __atomic_load_n(&q->slot->rq_freed, __ATOMIC_ACQUIRE);
			if (prod - freed >= s->rq_size) {
				*bad = wr;
				rc = ENOMEM; // the receive queue is full
				break;
			}
		}
		struct fv_rwqe *e = &s->rq[prod & s->rq_mask];
		e->wr_id = wr->wr_id;
		e->num_sge = (uint32_t)wr->num_sge;
		for (int i = 0; i < wr->num_sge; i++)
			e->sge[i] = wr->sg_list[i];
		prod++;
	}
	q->rq_prod = prod;
	__atomic_store_n(&s->rq_prod, prod, __ATOMIC_RELEASE);
	if (FV_UNLIKELY(st == IBV_QPS_ERR))
		flush_rq(q); // a receive posted to a QP in error completes flushed
out:
	fv_unlock(&q->rlock);
	return rc;
}

// ibv_qp_ex: requests are built between wr_start and wr_complete (which
// posts them all, as a doorbell would); the QP's lock is held meanwhile.

static inline struct fv_qp *qx(struct ibv_qp_ex *x) { return (struct fv_qp *)x; }

static struct ibv_send_wr *bnew(struct ibv_qp_ex *x, enum ibv_wr_opcode op) {
	struct fv_qp *q = qx(x);
	if (q->bcount >= (q->max_send_wr ? q->max_send_wr : 1)) {
		q->berr = ENOMEM;
		return NULL;
	}
	struct ibv_send_wr *w = &q->bwr[q->bcount];
	memset(w, 0, sizeof(*w));
	w->wr_id = x->wr_id;
	w->send_flags = x->wr_flags;
	w->opcode = op;
	w->sg_list = &q->bsge[q->bcount * FV_MAX_SGE];
	q->bcount++;
	return w;
}

static inline struct ibv_send_wr *bcur(struct ibv_qp_ex *x) {
	struct fv_qp *q = qx(x);
	return q->bcount && !q->berr ? &q->bwr[q->bcount - 1] : NULL;
}

static void wx_start(struct ibv_qp_ex *x) {
	struct fv_qp *q = qx(x);
	fv_lock(&q->lock);
	q->bcount = 0;
	q->berr = 0;
}

static int wx_complete(struct ibv_qp_ex *x) {
	struct fv_qp *q = qx(x);
	int rc = q->berr;
	if (!rc && q->bcount) {
		for (uint32_t i = 0; i + 1 < q->bcount; i++)
			q->bwr[i].next = &q->bwr[i + 1];
		q->bwr[q->bcount - 1].next = NULL;
		struct ibv_send_wr *bad;
		uint64_t before = q->sq_posted;
		rc = post_locked(q, q->bwr, &bad);
		fv_meter_add(&q->meter, q->sq_posted - before);
	}
	q->bcount = 0;
	fv_unlock(&q->lock);
	return rc;
}

static void wx_abort(struct ibv_qp_ex *x) {
	struct fv_qp *q = qx(x);
	q->bcount = 0;
	fv_unlock(&q->lock);
}

static void wx_rdma_write(struct ibv_qp_ex *x, uint32_t rkey, uint64_t ra) {
	struct ibv_send_wr *w = bnew(x, IBV_WR_RDMA_WRITE);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = ra;
}

static void wx_rdma_write_imm(struct ibv_qp_ex *x, uint32_t rkey, uint64_t ra, __be32 imm) {
	struct ibv_send_wr *w = bnew(x, IBV_WR_RDMA_WRITE_WITH_IMM);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = ra, w->imm_data = imm;
}

static void wx_rdma_read(struct ibv_qp_ex *x, uint32_t rkey, uint64_t ra) {
	struct ibv_send_wr *w = bnew(x, IBV_WR_RDMA_READ);
	if (w)
		w->wr.rdma.rkey = rkey, w->wr.rdma.remote_addr = ra;
}

static void wx_send(struct ibv_qp_ex *x) { bnew(x, IBV_WR_SEND); }

static void wx_send_imm(struct ibv_qp_ex *x, __be32 imm) {
	struct ibv_send_wr *w = bnew(x, IBV_WR_SEND_WITH_IMM);
	if (w)
		w->imm_data = imm;
}

static void wx_cmp_swp(struct ibv_qp_ex *x, uint32_t rkey, uint64_t ra, uint64_t compare, uint64_t swap) {
	struct ibv_send_wr *w = bnew(x, IBV_WR_ATOMIC_CMP_AND_SWP);
	if (w)
		w->wr.atomic.rkey = rkey, w->wr.atomic.remote_addr = ra, w->wr.atomic.compare_add = compare, w->wr.atomic.swap = swap;
}

static void wx_fetch_add(struct ibv_qp_ex *x, uint32_t rkey, uint64_t ra, uint64_t add) {
	struct ibv_send_wr *w = bnew(x, IBV_WR_ATOMIC_FETCH_AND_ADD);
	if (w)
		w->wr.atomic.rkey = rkey, w->wr.atomic.remote_addr = ra, w->wr.atomic.compare_add = add;
}

static void wx_set_sge(struct ibv_qp_ex *x, uint32_t lkey, uint64_t addr, uint32_t len) {
	struct ibv_send_wr *w = bcur(x);
	if (w) {
		w->sg_list[0] = (struct ibv_sge){.addr = addr, .length = len, .lkey = lkey};
		w->num_sge = 1;
	}
}

static void wx_set_sge_list(struct ibv_qp_ex *x, size_t n, const struct ibv_sge *l) {
	struct ibv_send_wr *w = bcur(x);
	if (!w)
		return;
	if (n > qx(x)->max_send_sge) {
		qx(x)->berr = EINVAL;
		return;
	}
	memcpy(w->sg_list, l, n * sizeof(*l));
	w->num_sge = (int)n;
}

// Inline data is copied now, into the request's own buffer.
static void wx_set_inline_data_list(struct ibv_qp_ex *x, size_t n, const struct ibv_data_buf *bufs) {
	struct fv_qp *q = qx(x);
	struct ibv_send_wr *w = bcur(x);
	if (!w)
		return;
	uint8_t *dst = q->binl + (size_t)(q->bcount - 1) * q->max_inline;
	size_t off = 0;
	for (size_t i = 0; i < n; i++) {
		if (bufs[i].length > q->max_inline - off) {
			q->berr = EINVAL;
			return;
		}
		memcpy(dst + off, bufs[i].addr, bufs[i].length);
		off += bufs[i].length;
	}
	w->sg_list[0] = (struct ibv_sge){.addr = (uintptr_t)dst, .length = (uint32_t)off, .lkey = 0};
	w->num_sge = 1;
	w->send_flags |= IBV_SEND_INLINE;
}

static void wx_set_inline_data(struct ibv_qp_ex *x, void *addr, size_t len) {
	struct ibv_data_buf b = {.addr = addr, .length = len};
	wx_set_inline_data_list(x, 1, &b);
}

// QPs.

static uint32_t qpn_seed(void) {
	static uint32_t n;
	return (uint32_t)getpid() * 16u + __atomic_fetch_add(&n, 1, __ATOMIC_RELAXED) * 0x10001u;
}

// qp_free keeps errno: it undoes a create that failed.
static void qp_free(struct fv_qp *q) {
	int e = errno;
	if (q->shm)
		munmap(q->shm, q->map_len);
	free(q->pend);
	free(q->pend_inl);
	free(q->bwr);
	free(q->bsge);
	free(q->binl);
	free(q->own);
	free(q);
	errno = e;
}

struct ibv_qp *fv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a) {
	fv_init();
	self_pid = getpid();
	const uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	const uint64_t ops = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
	                     IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
	                     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	int wr_api = (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) != 0;
	if ((a->comp_mask & ~known) || !(a->comp_mask & IBV_QP_INIT_ATTR_PD) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) || (wr_api && (a->send_ops_flags & ~ops))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD) {
		fv_warn("QP type %d is not supported: RC, UC and UD are", a->qp_type);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (a->srq) {
		fv_warn("shared receive queues are not supported");
		errno = EOPNOTSUPP;
		return NULL;
	}
	struct ibv_qp_cap *cap = &a->cap;
	if (!a->send_cq || !a->recv_cq || !a->pd || cap->max_send_wr > FV_MAX_QP_WR || cap->max_recv_wr > FV_MAX_QP_WR ||
	    cap->max_send_sge > FV_MAX_SGE || cap->max_recv_sge > FV_MAX_SGE || cap->max_inline_data > FV_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	struct fv_qp *q = fv_zalloc_lines(sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->dev = ((struct fv_context *)verbs_get_ctx(ctx))->dev->index;
	q->pd = ((struct fv_pd *)a->pd)->num;
	q->scq = (struct fv_cq *)a->send_cq;
	q->rcq = (struct fv_cq *)a->recv_cq;
	q->qp_type = a->qp_type;
	q->max_send_wr = cap->max_send_wr;
	q->max_send_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	q->max_inline = cap->max_inline_data;
	q->sig_all = a->sq_sig_all != 0;
	q->timeout = 14;
	q->retry_cnt = 7;
	q->rnr_retry = 7;
	uint32_t nsend = q->max_send_wr ? q->max_send_wr : 1;
	q->pend = calloc(nsend, sizeof(*q->pend));
	q->pend_inl = calloc(nsend, (size_t)q->max_inline + 1);
	if (wr_api) {
		q->bwr = calloc(nsend, sizeof(*q->bwr));
		q->bsge = calloc((size_t)nsend * FV_MAX_SGE, sizeof(*q->bsge));
		q->binl = calloc(nsend, (size_t)q->max_inline + 1);
	}
	if (!q->pend || !q->pend_inl || (wr_api && (!q->bwr || !q->bsge || !q->binl))) {
		qp_free(q);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < nsend; i++)
		q->pend[i].inl = q->pend_inl + (size_t)i * (q->max_inline + 1);
	uint32_t rq_cap = 1;
	while (rq_cap < cap->max_recv_wr)
		rq_cap <<= 1;
	size_t len = sizeof(struct fv_qp_shm) + (size_t)rq_cap * sizeof(struct fv_rwqe);
	if (!(q->shm = fv_obj_new(q->dev, FV_QP, qpn_seed(), len, &q->qpn))) {
		qp_free(q);
		return NULL;
	}
	q->map_len = len;
	pthread_mutex_lock(&fv_qps_mu);
	uint32_t ix = 0;
	while (ix < FV_MAX_LOCAL_QPS && fv_qps[ix])
		ix++;
	if (ix == FV_MAX_LOCAL_QPS) {
		pthread_mutex_unlock(&fv_qps_mu);
		fv_obj_unlink(q->dev, FV_QP, q->qpn);
		qp_free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->slot_ix = ix;
	q->slot = &fv_slots[ix];
	q->slot->sq_freed = q->slot->rq_freed = 0;
	__atomic_store_n(&q->slot->qpn, q->qpn, __ATOMIC_RELEASE);
	struct fv_qp_shm *s = q->shm;
	s->magic = FV_MAGIC_QP;
	s->qpn = q->qpn;
	s->qp_type = q->qp_type;
	s->pd = q->pd;
	s->rq_size = cap->max_recv_wr;
	s->rq_mask = rq_cap - 1;
	s->max_recv_sge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	s->rcq_id = q->rcq->id;
	s->slot = ix;
	__atomic_store_n(&s->state, IBV_QPS_RESET, __ATOMIC_RELEASE);
	struct ibv_qp *qp = &q->u.qp;
	qp->context = ctx;
	qp->qp_context = a->qp_context;
	qp->pd = a->pd;
	qp->send_cq = a->send_cq;
	qp->recv_cq = a->recv_cq;
	qp->handle = q->qpn;
	qp->qp_num = q->qpn;
	qp->state = IBV_QPS_RESET;
	qp->qp_type = a->qp_type;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	if (wr_api) {
		struct ibv_qp_ex *x = &q->u.qpx;
		x->wr_start = wx_start;
		x->wr_complete = wx_complete;
		x->wr_abort = wx_abort;
		x->wr_rdma_write = wx_rdma_write;
		x->wr_rdma_write_imm = wx_rdma_write_imm;
		x->wr_rdma_read = wx_rdma_read;
		x->wr_send = wx_send;
		x->wr_send_imm = wx_send_imm;
		x->wr_atomic_cmp_swp = wx_cmp_swp;
		x->wr_atomic_fetch_add = wx_fetch_add;
		x->wr_set_sge = wx_set_sge;
		x->wr_set_sge_list = wx_set_sge_list;
		x->wr_set_inline_data = wx_set_inline_data;
		x->wr_set_inline_data_list = wx_set_inline_data_list;
		x->comp_mask = 1; // marks a QP made for ibv_qp_to_qp_ex
	}
	fv_qps[ix] = q;
	if (ix + 1 > nslots_hw)
		__atomic_store_n(&nslots_hw, ix + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fv_qps_mu);
	cap->max_send_sge = q->max_send_sge;
	cap->max_recv_sge = s->max_recv_sge;
	return qp;
}

FV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
	struct ibv_qp_init_attr_ex x;
	memset(&x, 0, sizeof(x));
	memcpy(&x, attr, sizeof(*attr));
	x.comp_mask = IBV_QP_INIT_ATTR_PD;
	x.pd = pd;
	struct ibv_qp *qp = fv_create_qp_ex(pd->context, &x);
	if (qp)
		attr->cap = x.cap;
	return qp;
}

FV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) {
	struct fv_qp *q = (struct fv_qp *)qp;
	return q->bwr ? &q->u.qpx : NULL;
}

// Legal moves (IBTA 10.3.1), for the states a benchmark uses.
static int move_ok(uint32_t from, uint32_t to) {
	if (to == IBV_QPS_RESET || to == IBV_QPS_ERR)
		return 1;
	switch (from) {
	case IBV_QPS_RESET: return to == IBV_QPS_INIT;
	case IBV_QPS_INIT: return to == IBV_QPS_INIT || to == IBV_QPS_RTR;
	case IBV_QPS_RTR: return to == IBV_QPS_RTS;
	case IBV_QPS_RTS: return to == IBV_QPS_RTS;
	default: return 0;
	}
}

FV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) {
	struct fv_qp *q = (struct fv_qp *)qp;
	fv_lock(&q->lock);
	uint32_t to = (mask & IBV_QP_STATE) ? attr->qp_state : q->state;
	int rc = 0;
	if (!move_ok(q->state, to)) {
		rc = EINVAL;
		goto out;
	}
	if (q->state == IBV_QPS_INIT && to == IBV_QPS_RTR && q->qp_type != IBV_QPT_UD &&
	    (mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) != (IBV_QP_AV | IBV_QP_DEST_QPN)) {
		rc = EINVAL; // RC and UC need their peer
		goto out;
	}
	int dest_dev = q->dev;
	if ((mask & IBV_QP_AV) && attr->ah_attr.is_global) {
		dest_dev = fv_device_by_gid(&attr->ah_attr.grh.dgid);
		if (dest_dev < 0) {
			const uint8_t *g = attr->ah_attr.grh.dgid.raw;
			fv_warn("QP %u: destination GID ...:%u.%u.%u.%u is not a fake device's (fake0's is ::ffff:127.0.0.1; a named device's, FAKEVERBS_NAME or FAKEVERBS_HOST, while its process has it open)", q->qpn, g[12], g[13], g[14], g[15]);
			rc = EINVAL;
			goto out;
		}
	}
	if (mask & IBV_QP_ACCESS_FLAGS) {
		q->access = attr->qp_access_flags;
		q->shm->access = attr->qp_access_flags;
	}
	if (mask & IBV_QP_TIMEOUT)
		q->timeout = attr->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->retry_cnt = attr->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = attr->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->shm->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IBV_QP_QKEY)
		__atomic_store_n(&q->shm->qkey, attr->qkey, __ATOMIC_RELEASE);
	if (mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) {
		disconnect(q);
		if (mask & IBV_QP_DEST_QPN)
			q->dest_qpn = attr->dest_qp_num;
		q->dest_dev = dest_dev;
		q->shm->dest_qpn = q->dest_qpn;
		if (fv_paced)
			path_setup(q);
	}
	if (to == IBV_QPS_RTR && q->state != IBV_QPS_RTR && !q->peer && q->qp_type != IBV_QPT_UD)
		connect(q); // the peer may not exist yet: exec connects later
	if (to == IBV_QPS_RESET) {
		// Everything posted is gone, without completions.
		disconnect(q);
		while (q->pend_count) {
			q->pend_count--;
			pend_change(q, -1);
		}
		q->pend_head = 0;
		q->blocked_since = 0;
		fv_lock(&q->rlock);
		q->sq_posted = q->rq_prod = 0;
		__atomic_store_n(&q->shm->rq_prod, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&q->shm->rq_cons, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&q->slot->sq_freed, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&q->slot->rq_freed, 0, __ATOMIC_RELEASE);
		set_state(q, to);
		fv_unlock(&q->rlock);
	} else if (to == IBV_QPS_ERR && q->state != IBV_QPS_ERR) {
		to_error(q);
	} else {
		set_state(q, to);
	}
out:
	fv_unlock(&q->lock);
	return rc;
}

FV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init) {
	(void)mask;
	struct fv_qp *q = (struct fv_qp *)qp;
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	fv_lock(&q->lock);
	attr->qp_state = (enum ibv_qp_state)q->state;
	attr->cur_qp_state = attr->qp_state;
	attr->path_mtu = IBV_MTU_4096;
	attr->qp_access_flags = (int)q->access;
	attr->port_num = 1;
	attr->dest_qp_num = q->dest_qpn;
	attr->ah_attr.is_global = 1;
	attr->ah_attr.port_num = 1;
	attr->ah_attr.grh.dgid = *fv_dev_gid(q->dest_dev);
	attr->timeout = q->timeout;
	attr->retry_cnt = q->retry_cnt;
	attr->rnr_retry = q->rnr_retry;
	attr->min_rnr_timer = (uint8_t)q->shm->min_rnr_timer;
	attr->max_rd_atomic = 16;
	attr->max_dest_rd_atomic = 16;
	attr->cap.max_send_wr = q->max_send_wr;
	attr->cap.max_recv_wr = q->shm->rq_size;
	attr->cap.max_send_sge = q->max_send_sge;
	attr->cap.max_recv_sge = q->shm->max_recv_sge;
	attr->cap.max_inline_data = q->max_inline;
	fv_unlock(&q->lock);
	init->qp_context = qp->qp_context;
	init->send_cq = qp->send_cq;
	init->recv_cq = qp->recv_cq;
	init->cap = attr->cap;
	init->qp_type = qp->qp_type;
	init->sq_sig_all = (int)q->sig_all;
	return 0;
}

FV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp) {
	struct fv_qp *q = (struct fv_qp *)qp;
	pthread_mutex_lock(&fv_qps_mu);
	fv_qps[q->slot_ix] = NULL;
	__atomic_store_n(&q->slot->qpn, 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fv_qps_mu);
	fv_lock(&q->lock);
	fv_meter_report(&q->meter, "qp", q->qpn);
	// A peer still connected sees a QP that answers nothing.
	__atomic_store_n(&q->shm->state, IBV_QPS_RESET, __ATOMIC_RELEASE);
	if (q->pend_count) {
		q->pend_count = 0;
		pend_change(q, -1);
	}
	disconnect(q);
	keys_flush(q->lkeys);
	fv_unlock(&q->lock);
	fv_obj_unlink(q->dev, FV_QP, q->qpn);
	pthread_mutex_destroy(&qp->mutex);
	pthread_cond_destroy(&qp->cond);
	qp_free(q);
	return 0;
}
