// absent.c: what the fake NIC does not have, and libibverbs's provider
// interface. Every entry point of libibverbs.so.1 exists here so that any
// verbs program, and the libraries it links (librdmacm, libmlx5, libefa:
// perftest links all three, bound at load time), loads unchanged.
//
// The features below fail as a device without them fails: NULL or an
// error number, errno EOPNOTSUPP. The IBVERBS_PRIVATE_34 symbols are how
// libibverbs drives a provider's kernel device; this library drives no
// provider (its devices are its own), so a provider library that registers
// itself at load (verbs_register_driver_34) is ignored and its device
// commands, never reached, would fail.
#include "fv.h"

#include <errno.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <infiniband/sa.h>
#include <string.h>

#define NULL_OP(ret, name, ...)                  \
	FV_EXPORT ret name(__VA_ARGS__) {        \
		errno = EOPNOTSUPP;              \
		return NULL;                     \
	}
#define ERR_OP(name, ...)                        \
	FV_EXPORT int name(__VA_ARGS__) {        \
		errno = EOPNOTSUPP;              \
		return EOPNOTSUPP;               \
	}

// Address handles from a completion, multicast, SRQs, imported objects:
// not on this NIC (ud.c makes address handles from attributes).
NULL_OP(struct ibv_ah *, ibv_create_ah_from_wc, struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *grh, uint8_t port)
ERR_OP(ibv_init_ah_from_wc, struct ibv_context *c, uint8_t port, struct ibv_wc *wc, struct ibv_grh *grh, struct ibv_ah_attr *ah)
ERR_OP(ibv_attach_mcast, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
ERR_OP(ibv_detach_mcast, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
NULL_OP(struct ibv_srq *, ibv_create_srq, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
ERR_OP(ibv_modify_srq, struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
ERR_OP(ibv_query_srq, struct ibv_srq *srq, struct ibv_srq_attr *attr)
ERR_OP(ibv_destroy_srq, struct ibv_srq *srq)
ERR_OP(ibv_resolve_eth_l2_from_gid, struct ibv_context *c, struct ibv_ah_attr *attr, uint8_t eth_mac[6], uint16_t *vid)
ERR_OP(ibv_query_ece, struct ibv_qp *qp, struct ibv_ece *ece)
ERR_OP(ibv_set_ece, struct ibv_qp *qp, struct ibv_ece *ece)
NULL_OP(struct ibv_context *, ibv_import_device, int cmd_fd)
NULL_OP(struct ibv_pd *, ibv_import_pd, struct ibv_context *c, uint32_t handle)
NULL_OP(struct ibv_mr *, ibv_import_mr, struct ibv_pd *pd, uint32_t handle)
NULL_OP(struct ibv_dm *, ibv_import_dm, struct ibv_context *c, uint32_t handle)
FV_EXPORT void ibv_unimport_pd(struct ibv_pd *pd) { (void)pd; }
FV_EXPORT void ibv_unimport_mr(struct ibv_mr *mr) { (void)mr; }
FV_EXPORT void ibv_unimport_dm(struct ibv_dm *dm) { (void)dm; }

// Data is written in order here (each message's last byte last); flags
// are reserved (0).
FV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags) {
	(void)qp, (void)op;
	return flags ? 0 : 1;
}

// The 1.1 way a provider registered itself.
FV_EXPORT void ibv_register_driver(const char *name, void *init) { (void)name, (void)init; }

// Kernel ABI structures to verbs ones (librdmacm's): plain conversions.
FV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src) {
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

FV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src) {
	dst->cur_qp_state = (enum ibv_qp_state)src->cur_qp_state;
	dst->path_mtu = (enum ibv_mtu)src->path_mtu;
	dst->path_mig_state = (enum ibv_mig_state)src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = (int)src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

// PATH_REC_COPY copies the fields a verbs path record (ibv_sa_path_rec) and
// a kernel one (ib_user_path_rec) share by name, either way, each converted
// to the destination's type (raw_traffic and reversible are int on one
// side, __u32 on the other). The GIDs, arrays on one side, are copied apart.
#define PATH_REC_FIELD(dst, src, f) ((dst)->f = (__typeof__((dst)->f))(src)->f)
#define PATH_REC_COPY(dst, src)                                       \
	do {                                                          \
		PATH_REC_FIELD(dst, src, dlid);                       \
		PATH_REC_FIELD(dst, src, slid);                       \
		PATH_REC_FIELD(dst, src, raw_traffic);                \
		PATH_REC_FIELD(dst, src, flow_label);                 \
		PATH_REC_FIELD(dst, src, reversible);                 \
		PATH_REC_FIELD(dst, src, mtu);                        \
		PATH_REC_FIELD(dst, src, pkey);                       \
		PATH_REC_FIELD(dst, src, hop_limit);                  \
		PATH_REC_FIELD(dst, src, traffic_class);              \
		PATH_REC_FIELD(dst, src, numb_path);                  \
		PATH_REC_FIELD(dst, src, sl);                         \
		PATH_REC_FIELD(dst, src, mtu_selector);               \
		PATH_REC_FIELD(dst, src, rate_selector);              \
		PATH_REC_FIELD(dst, src, rate);                       \
		PATH_REC_FIELD(dst, src, packet_life_time_selector);  \
		PATH_REC_FIELD(dst, src, packet_life_time);           \
		PATH_REC_FIELD(dst, src, preference);                 \
	} while (0)

FV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src) {
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid));
	PATH_REC_COPY(dst, src);
}

FV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src) {
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	PATH_REC_COPY(dst, src);
}

// The provider interface (IBVERBS_PRIVATE_34). Registration is accepted
// and ignored; every device command fails (no kernel device is behind it).
FV_EXPORT void verbs_register_driver_34(const void *ops) { (void)ops; }
FV_EXPORT void verbs_set_ops(void *vctx, const void *ops) { (void)vctx, (void)ops; }
FV_EXPORT void verbs_uninit_context(void *vctx) { (void)vctx; }
FV_EXPORT void verbs_init_cq(void *cq, void *ctx, void *channel, void *cq_context) { (void)cq, (void)ctx, (void)channel, (void)cq_context; }
FV_EXPORT void __verbs_log(void *ctx, int level, const char *fmt, ...) { (void)ctx, (void)level, (void)fmt; }
FV_EXPORT int verbs_allow_disassociate_destroy(void) { return 0; }
FV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num, void *def) { (void)def; return num; }
FV_EXPORT void ibv_get_fw_ver(char *value, size_t len, void *fw) {
	(void)fw;
	if (len)
		value[0] = '\0';
}
FV_EXPORT void *_verbs_init_and_alloc_context(void) {
	errno = EOPNOTSUPP;
	return NULL;
}
FV_EXPORT void *verbs_open_device(void) {
	errno = EOPNOTSUPP;
	return NULL;
}
FV_EXPORT int ibv_read_ibdev_sysfs_file(void) {
	errno = ENOENT;
	return -1;
}

#define CMD(name) \
	FV_EXPORT int name(void) { return EOPNOTSUPP; }
CMD(execute_ioctl)
CMD(ibv_cmd_advise_mr)
CMD(ibv_cmd_alloc_dm)
CMD(ibv_cmd_alloc_mw)
CMD(ibv_cmd_alloc_pd)
CMD(ibv_cmd_attach_mcast)
CMD(ibv_cmd_close_xrcd)
CMD(ibv_cmd_create_ah)
CMD(ibv_cmd_create_counters)
CMD(ibv_cmd_create_cq)
CMD(ibv_cmd_create_cq_ex)
CMD(ibv_cmd_create_flow)
CMD(ibv_cmd_create_flow_action_esp)
CMD(ibv_cmd_create_qp)
CMD(ibv_cmd_create_qp_ex)
CMD(ibv_cmd_create_qp_ex2)
CMD(ibv_cmd_create_rwq_ind_table)
CMD(ibv_cmd_create_srq)
CMD(ibv_cmd_create_srq_ex)
CMD(ibv_cmd_create_wq)
CMD(ibv_cmd_dealloc_mw)
CMD(ibv_cmd_dealloc_pd)
CMD(ibv_cmd_dereg_mr)
CMD(ibv_cmd_destroy_ah)
CMD(ibv_cmd_destroy_counters)
CMD(ibv_cmd_destroy_cq)
CMD(ibv_cmd_destroy_flow)
CMD(ibv_cmd_destroy_flow_action)
CMD(ibv_cmd_destroy_qp)
CMD(ibv_cmd_destroy_rwq_ind_table)
CMD(ibv_cmd_destroy_srq)
CMD(ibv_cmd_destroy_wq)
CMD(ibv_cmd_detach_mcast)
CMD(ibv_cmd_free_dm)
CMD(ibv_cmd_get_context)
CMD(ibv_cmd_modify_cq)
CMD(ibv_cmd_modify_flow_action_esp)
CMD(ibv_cmd_modify_qp)
CMD(ibv_cmd_modify_qp_ex)
CMD(ibv_cmd_modify_srq)
CMD(ibv_cmd_modify_wq)
CMD(ibv_cmd_open_qp)
CMD(ibv_cmd_open_xrcd)
CMD(ibv_cmd_poll_cq)
CMD(ibv_cmd_post_recv)
CMD(ibv_cmd_post_send)
CMD(ibv_cmd_post_srq_recv)
CMD(ibv_cmd_query_context)
CMD(ibv_cmd_query_device_any)
CMD(ibv_cmd_query_mr)
CMD(ibv_cmd_query_port)
CMD(ibv_cmd_query_qp)
CMD(ibv_cmd_query_srq)
CMD(ibv_cmd_read_counters)
CMD(ibv_cmd_reg_dm_mr)
CMD(ibv_cmd_reg_dmabuf_mr)
CMD(ibv_cmd_reg_mr)
CMD(ibv_cmd_req_notify_cq)
CMD(ibv_cmd_rereg_mr)
CMD(ibv_cmd_resize_cq)
