// fakeverbs.h: an in-memory verbs device for the loops' unit tests (see
// fakeverbs.c). Not used outside tests.
#ifndef RDMABENCH_FAKEVERBS_H
#define RDMABENCH_FAKEVERBS_H

#include <stdint.h>
#include <infiniband/verbs.h>

#define FAKE_MAX_QPS 64
#define FAKE_RQ_CAP 1024

struct ibv_cq *fake_cq_new(uint32_t cap, uint64_t seed);
uint64_t fake_cq_overruns(struct ibv_cq *cq);
// When the CQ last returned a completion and the QP took its first request
// (CLOCK_MONOTONIC ns, 0: not yet): the edges of a run as the device saw it.
uint64_t fake_cq_last_wc_ns(struct ibv_cq *cq);
uint64_t fake_qp_first_post_ns(struct ibv_qp *qp);
// fake_cq_stall: once the CQ has returned after completions, it returns none
// for ns nanoseconds (once).
void fake_cq_stall(struct ibv_cq *cq, uint64_t after, uint64_t ns);
// fake_cq_pace: the CQ returns at most one completion every ns nanoseconds,
// for ever: a path slower than the loop (0: as fast as polled).
void fake_cq_pace(struct ibv_cq *cq, uint64_t ns);
void fake_cq_free(struct ibv_cq *cq);
struct ibv_qp *fake_qp_new(struct ibv_cq *scq, struct ibv_cq *rcq, uint32_t sq_cap, uint32_t qp_num);
// fake_qp_fail_at makes the signaled completion of the request at position
// pos (from 1) fail with IBV_WC_RETRY_EXC_ERR.
void fake_qp_fail_at(struct ibv_qp *qp, uint64_t pos);
// fake_qp_flood makes every receive posted on qp complete at the next poll
// of its receive CQ, for ever: traffic that never pauses.
int fake_qp_flood(struct ibv_qp *qp, uint32_t msg_len);
void fake_qp_stats(struct ibv_qp *qp, uint64_t *posted, uint64_t *refused, uint64_t *signaled);
void fake_qp_free(struct ibv_qp *qp);

#endif
