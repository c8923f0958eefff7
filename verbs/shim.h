// shim.h: small C wrappers over libibverbs for the Go bindings. ibv_query_port
// is a macro and the post/poll verbs are inline, and building work requests in
// C keeps Go pointers out of C memory. Nothing here runs per message in a
// measurement: the hot loops live in csrc/.
#ifndef RDMABENCH_VERBS_SHIM_H
#define RDMABENCH_VERBS_SHIM_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <infiniband/verbs.h>

// rb_reg_mr_addr registers memory Go does not own (GPU memory), given as an
// integer so that no Go pointer rule applies.
static inline struct ibv_mr *rb_reg_mr_addr(struct ibv_pd *pd, uintptr_t addr, size_t len, int access) {
	return ibv_reg_mr(pd, (void *)addr, len, access);
}

static inline int rb_query_port(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr) {
	memset(attr, 0, sizeof(*attr));
	return ibv_query_port(ctx, port, attr);
}

static inline int rb_modify_init(struct ibv_qp *qp, uint8_t port, int access, uint32_t qkey, int is_ud) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = port;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (is_ud) {
		a.qkey = qkey;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	return ibv_modify_qp(qp, &a, mask);
}

// rb_modify_rtr moves a QP to RTR. For UD only the state changes; RC and UC
// take the remote endpoint; RC also its responder resources.
static inline int rb_modify_rtr(struct ibv_qp *qp, int qp_type, int mtu, uint32_t dest_qpn,
                                uint32_t rq_psn, const uint8_t *gid, uint16_t dlid, uint8_t port,
                                int gid_index, uint8_t max_dest_rd_atomic, uint8_t min_rnr_timer,
                                uint8_t sl, uint8_t traffic_class) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (qp_type == IBV_QPT_UD)
		return ibv_modify_qp(qp, &a, IBV_QP_STATE);
	a.path_mtu = (enum ibv_mtu)mtu;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = rq_psn;
	a.ah_attr.dlid = dlid;
	a.ah_attr.sl = sl;
	a.ah_attr.port_num = port;
	if (gid_index >= 0) {
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, gid, 16);
		a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.grh.traffic_class = traffic_class;
	}
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	if (qp_type == IBV_QPT_RC) {
		a.max_dest_rd_atomic = max_dest_rd_atomic;
		a.min_rnr_timer = min_rnr_timer;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static inline int rb_modify_rts(struct ibv_qp *qp, int qp_type, uint32_t sq_psn, uint8_t timeout,
                                uint8_t retry_cnt, uint8_t rnr_retry, uint8_t max_rd_atomic) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = sq_psn;
	int mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp_type == IBV_QPT_RC) {
		a.timeout = timeout;
		a.retry_cnt = retry_cnt;
		a.rnr_retry = rnr_retry;
		a.max_rd_atomic = max_rd_atomic;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(qp, &a, mask);
}

static inline int rb_modify_error(struct ibv_qp *qp) {
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static inline int rb_query_qp_state(struct ibv_qp *qp, int *state) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	int rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	if (rc == 0)
		*state = a.qp_state;
	return rc;
}

// rb_send_args carries one work request's plain fields from Go.
struct rb_send_args {
	uint64_t wr_id;
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
	int opcode;
	int flags;
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm;
	uint64_t compare_add;
	uint64_t swap;
	struct ibv_ah *ah;
	uint32_t remote_qpn;
	uint32_t remote_qkey;
};

static inline int rb_post_send(struct ibv_qp *qp, const struct rb_send_args *s) {
	struct ibv_sge sge = {.addr = s->addr, .length = s->length, .lkey = s->lkey};
	struct ibv_send_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = s->wr_id;
	wr.sg_list = &sge;
	wr.num_sge = s->length > 0 ? 1 : 0;
	wr.opcode = (enum ibv_wr_opcode)s->opcode;
	wr.send_flags = s->flags;
	wr.imm_data = s->imm; // already in network order from Go
	switch (wr.opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		wr.wr.rdma.remote_addr = s->remote_addr;
		wr.wr.rdma.rkey = s->rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wr.wr.atomic.remote_addr = s->remote_addr;
		wr.wr.atomic.rkey = s->rkey;
		wr.wr.atomic.compare_add = s->compare_add;
		wr.wr.atomic.swap = s->swap;
		break;
	default:
		break;
	}
	if (s->ah) {
		wr.wr.ud.ah = s->ah;
		wr.wr.ud.remote_qpn = s->remote_qpn;
		wr.wr.ud.remote_qkey = s->remote_qkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static inline int rb_post_recv(struct ibv_qp *qp, uint64_t wr_id, uint64_t addr, uint32_t length, uint32_t lkey) {
	struct ibv_sge sge = {.addr = addr, .length = length, .lkey = lkey};
	struct ibv_recv_wr wr, *bad = NULL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

// rb_wc is the part of a work completion Go needs, laid out without unions.
struct rb_wc {
	uint64_t wr_id;
	int status;
	int opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	uint32_t imm_data;
	uint32_t qp_num;
	uint32_t src_qp;
	int wc_flags;
	uint32_t slid;
};

static inline int rb_poll(struct ibv_cq *cq, int n, struct rb_wc *out) {
	struct ibv_wc wc[16];
	if (n > 16)
		n = 16;
	int got = ibv_poll_cq(cq, n, wc);
	for (int i = 0; i < got; i++) {
		out[i].wr_id = wc[i].wr_id;
		out[i].status = wc[i].status;
		out[i].opcode = wc[i].opcode;
		out[i].vendor_err = wc[i].vendor_err;
		out[i].byte_len = wc[i].byte_len;
		out[i].imm_data = wc[i].imm_data;
		out[i].qp_num = wc[i].qp_num;
		out[i].src_qp = wc[i].src_qp;
		out[i].wc_flags = wc[i].wc_flags;
		out[i].slid = wc[i].slid;
	}
	return got;
}

static inline struct ibv_ah *rb_create_ah(struct ibv_pd *pd, const uint8_t *gid, uint16_t dlid, uint8_t port, int gid_index) {
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof(a));
	a.dlid = dlid;
	a.port_num = port;
	if (gid_index >= 0) {
		a.is_global = 1;
		memcpy(a.grh.dgid.raw, gid, 16);
		a.grh.sgid_index = (uint8_t)gid_index;
		a.grh.hop_limit = 64;
	}
	return ibv_create_ah(pd, &a);
}

#endif
