// check.c: the stand-in's own test (csrc/fakeverbs/fvtest runs it under
// go test). It is a verbs program like any other: built against rdma-core's
// headers and libibverbs, run with LD_LIBRARY_PATH on the stand-in. Each
// check prints "ok NAME" or "FAIL NAME: why"; the exit status is the count
// of failures (0: all passed).
//
//	fv-check          every check, in this process and across two
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(name, cond, ...)                                \
	do {                                                  \
		if (cond) {                                   \
			printf("ok %s\n", name);              \
		} else {                                      \
			printf("FAIL %s: ", name);            \
			printf(__VA_ARGS__);                  \
			printf("\n");                         \
			failures++;                           \
		}                                             \
		fflush(stdout);                               \
	} while (0)

static void die(const char *what) {
	printf("FAIL setup: %s: %s\n", what, strerror(errno));
	exit(100);
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	union ibv_gid gid;
};

static struct dev open_dev(void) {
	struct dev d;
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	if (!l || n < 1)
		die("no device");
	d.ctx = ibv_open_device(l[0]);
	ibv_free_device_list(l);
	if (!d.ctx || !(d.pd = ibv_alloc_pd(d.ctx)) || ibv_query_gid(d.ctx, 1, 0, &d.gid))
		die("open");
	return d;
}

struct side {
	struct ibv_cq *scq, *rcq;
	struct ibv_qp *qp;
	uint8_t *buf;
	size_t len;
	struct ibv_mr *mr;
};

static uint8_t *map(size_t len) {
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

// new_side makes a QP with its own CQs and a registered buffer.
static struct side new_side(struct dev *d, uint32_t sq, uint32_t rq, int cqe, uint32_t inl, int access) {
	struct side s;
	s.len = 1 << 16;
	s.buf = map(s.len);
	s.mr = ibv_reg_mr(d->pd, s.buf, s.len, access);
	s.scq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	s.rcq = ibv_create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!s.mr || !s.scq || !s.rcq)
		die("side");
	struct ibv_qp_init_attr a = {.send_cq = s.scq, .recv_cq = s.rcq, .qp_type = IBV_QPT_RC,
	                             .cap = {.max_send_wr = sq, .max_recv_wr = rq, .max_send_sge = 2, .max_recv_sge = 2, .max_inline_data = inl}};
	if (!(s.qp = ibv_create_qp(d->pd, &a)))
		die("ibv_create_qp");
	return s;
}

static const int all_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid gid, uint8_t rnr_retry) {
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = all_access};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dest;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.port_num = 1;
	a.min_rnr_timer = 1; // 10 µs
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 10; // 4 ms
	a.retry_cnt = 2;
	a.rnr_retry = rnr_retry;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

// poll_one waits (up to a second) for one completion on cq.
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc) {
	uint64_t until = now_ns() + 1000000000ull;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n != 0 || now_ns() > until)
			return n;
	}
}

static int post(struct ibv_qp *qp, enum ibv_wr_opcode op, uint64_t wr_id, void *laddr, uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey, int flags) {
	struct ibv_sge sge = {.addr = (uintptr_t)laddr, .length = len, .lkey = lkey};
	struct ibv_send_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op, .send_flags = flags}, *bad;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey) {
	struct ibv_sge sge = {.addr = (uintptr_t)addr, .length = len, .lkey = lkey};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad;
	return ibv_post_recv(qp, &wr, &bad);
}

static void pattern(uint8_t *p, size_t n, uint32_t seed) {
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static size_t bad_bytes(const uint8_t *p, size_t n, uint32_t seed) {
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += p[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 8));
	return bad;
}

// A pair of connected QPs in this process; b's buffer is the target.
struct pair {
	struct side a, b;
};

static struct pair new_pair(struct dev *d, uint32_t sq, int cqe, uint8_t rnr_retry) {
	struct pair p = {new_side(d, sq, 16, cqe, 64, all_access), new_side(d, sq, 16, cqe, 64, all_access)};
	if (connect_qp(p.a.qp, p.b.qp->qp_num, d->gid, rnr_retry) || connect_qp(p.b.qp, p.a.qp->qp_num, d->gid, rnr_retry))
		die("connect");
	return p;
}

static void free_side(struct side *s) {
	ibv_destroy_qp(s->qp);
	ibv_destroy_cq(s->scq);
	ibv_destroy_cq(s->rcq);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	munmap(s->buf, s->len);
}

static void free_pair(struct pair *p) {
	free_side(&p->a);
	free_side(&p->b);
}

static void check_device(struct dev *d) {
	struct ibv_port_attr pa;
	CHECK("query_port", ibv_query_port(d->ctx, 1, &pa) == 0 && pa.state == IBV_PORT_ACTIVE && pa.link_layer == IBV_LINK_LAYER_ETHERNET && pa.gid_tbl_len == 1,
	      "state %d link %d", pa.state, pa.link_layer);
	struct ibv_device_attr_ex x;
	memset(&x, 0xff, sizeof(x));
	CHECK("query_device_ex", ibv_query_device_ex(d->ctx, NULL, &x) == 0 && x.orig_attr.phys_port_cnt == 1 && x.orig_attr.max_qp_wr > 0, "failed");
	struct ibv_gid_entry e;
	CHECK("query_gid_ex", ibv_query_gid_ex(d->ctx, 1, 0, &e, 0) == 0 && e.gid_type == IBV_GID_TYPE_ROCE_V2 && e.gid.raw[10] == 0xff && e.gid.raw[12] == 127,
	      "type %u", e.gid_type);
	CHECK("query_gid out of the table", ibv_query_gid_ex(d->ctx, 1, 1, &e, 0) != 0, "index 1 answered");
}

static void check_write(struct dev *d) {
	struct pair p = new_pair(d, 16, 16, 7);
	struct ibv_wc wc;
	pattern(p.a.buf, 4096, 1);
	int rc = post(p.a.qp, IBV_WR_RDMA_WRITE, 7, p.a.buf, 4096, p.a.mr->lkey, (uintptr_t)p.b.buf + 100, p.b.mr->rkey, IBV_SEND_SIGNALED);
	int n = poll_one(p.a.scq, &wc);
	CHECK("write completes", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 7 && wc.opcode == IBV_WC_RDMA_WRITE,
	      "rc %d n %d status %s", rc, n, ibv_wc_status_str(wc.status));
	CHECK("write lands", bad_bytes(p.b.buf + 100, 4096, 1) == 0 && p.b.buf[99] == 0 && p.b.buf[4196] == 0, "%zu bad bytes", bad_bytes(p.b.buf + 100, 4096, 1));

	// Two gather entries into one write.
	struct ibv_sge sg[2] = {{(uintptr_t)p.a.buf, 10, p.a.mr->lkey}, {(uintptr_t)p.a.buf + 1000, 20, p.a.mr->lkey}};
	struct ibv_send_wr wr = {.wr_id = 8, .sg_list = sg, .num_sge = 2, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)p.b.buf + 8000;
	wr.wr.rdma.rkey = p.b.mr->rkey;
	rc = ibv_post_send(p.a.qp, &wr, &bad);
	n = poll_one(p.a.scq, &wc);
	CHECK("gather", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && memcmp(p.b.buf + 8000, p.a.buf, 10) == 0 && memcmp(p.b.buf + 8010, p.a.buf + 1000, 20) == 0,
	      "rc %d n %d", rc, n);

	// Inline: the source may change as soon as the post returns.
	uint8_t tmp[32];
	memset(tmp, 0x5c, sizeof(tmp));
	struct ibv_sge is = {(uintptr_t)tmp, 32, 0};
	struct ibv_send_wr iw = {.wr_id = 9, .sg_list = &is, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE};
	iw.wr.rdma.remote_addr = (uintptr_t)p.b.buf + 9000;
	iw.wr.rdma.rkey = p.b.mr->rkey;
	rc = ibv_post_send(p.a.qp, &iw, &bad);
	memset(tmp, 0, sizeof(tmp));
	n = poll_one(p.a.scq, &wc);
	CHECK("inline", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && p.b.buf[9000] == 0x5c && p.b.buf[9031] == 0x5c, "rc %d n %d", rc, n);
	is.length = 65;
	CHECK("inline above max_inline_data", ibv_post_send(p.a.qp, &iw, &bad) == EINVAL && bad == &iw, "accepted");

	// READ and atomics.
	pattern(p.b.buf + 20000, 512, 3);
	rc = post(p.a.qp, IBV_WR_RDMA_READ, 10, p.a.buf + 20000, 512, p.a.mr->lkey, (uintptr_t)p.b.buf + 20000, p.b.mr->rkey, IBV_SEND_SIGNALED);
	n = poll_one(p.a.scq, &wc);
	CHECK("read", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_READ && bad_bytes(p.a.buf + 20000, 512, 3) == 0, "rc %d n %d", rc, n);
	uint64_t *cell = (uint64_t *)(void *)(p.b.buf + 30000);
	*cell = 40;
	struct ibv_sge as = {(uintptr_t)p.a.buf + 30000, 8, p.a.mr->lkey};
	struct ibv_send_wr aw = {.wr_id = 11, .sg_list = &as, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED};
	aw.wr.atomic.remote_addr = (uintptr_t)cell;
	aw.wr.atomic.rkey = p.b.mr->rkey;
	aw.wr.atomic.compare_add = 2;
	rc = ibv_post_send(p.a.qp, &aw, &bad);
	n = poll_one(p.a.scq, &wc);
	CHECK("fetch and add", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && *cell == 42 && *(uint64_t *)(void *)(p.a.buf + 30000) == 40, "cell %llu", (unsigned long long)*cell);
	aw.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	aw.wr.atomic.compare_add = 42;
	aw.wr.atomic.swap = 7;
	rc = ibv_post_send(p.a.qp, &aw, &bad);
	n = poll_one(p.a.scq, &wc);
	CHECK("compare and swap", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_COMP_SWAP && *cell == 7, "cell %llu", (unsigned long long)*cell);
	free_pair(&p);

	// A peer QP that does not exist: the write waits out retry_cnt and
	// timeout (3 × 4 ms here), then fails.
	struct side lone = new_side(d, 16, 16, 16, 0, all_access);
	if (connect_qp(lone.qp, 0xfffffe, d->gid, 7))
		die("connect");
	uint64_t t0 = now_ns();
	rc = post(lone.qp, IBV_WR_RDMA_WRITE, 1, lone.buf, 8, lone.mr->lkey, (uintptr_t)lone.buf, lone.mr->rkey, 0);
	n = poll_one(lone.scq, &wc);
	uint64_t waited = now_ns() - t0;
	CHECK("no peer: retries exceeded", rc == 0 && n == 1 && wc.status == IBV_WC_RETRY_EXC_ERR && waited > 10000000ull, "n %d status %d after %llu ns", n, wc.status,
	      (unsigned long long)waited);
	free_side(&lone);
}

// Remote keys and addresses are checked against the registration: a bad
// one is a completion error, never a write elsewhere, and the QP goes to
// the error state (what follows is flushed).
static void check_remote_access(struct dev *d) {
	struct {
		const char *name;
		int64_t off;
		uint32_t len;
		int bad_key;
	} cases[] = {
		{"bad rkey", 0, 8, 1},
		{"write past the region", (1 << 16) - 4, 8, 0},
		{"write before the region", -8, 8, 0},
		{"address wrapping around", INT64_MIN / 2, 8, 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pair p = new_pair(d, 16, 16, 7);
		struct ibv_wc wc;
		uint32_t rkey = cases[i].bad_key ? p.b.mr->rkey ^ 0x5a5a : p.b.mr->rkey;
		int rc = post(p.a.qp, IBV_WR_RDMA_WRITE, 1, p.a.buf, cases[i].len, p.a.mr->lkey, (uint64_t)((uintptr_t)p.b.buf + cases[i].off), rkey, 0);
		int n = poll_one(p.a.scq, &wc);
		CHECK(cases[i].name, rc == 0 && n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "rc %d n %d status %s", rc, n, n == 1 ? ibv_wc_status_str(wc.status) : "-");
		rc = post(p.a.qp, IBV_WR_RDMA_WRITE, 2, p.a.buf, 8, p.a.mr->lkey, (uintptr_t)p.b.buf, p.b.mr->rkey, 0);
		n = poll_one(p.a.scq, &wc);
		if (i == 0)
			CHECK("after an error, flushed", rc == 0 && n == 1 && wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 2, "rc %d n %d status %d", rc, n, wc.status);
		free_pair(&p);
	}
	// A deregistered MR's key is dead.
	struct pair p = new_pair(d, 16, 16, 7);
	struct ibv_wc wc;
	uint32_t rkey = p.b.mr->rkey;
	ibv_dereg_mr(p.b.mr);
	p.b.mr = NULL;
	post(p.a.qp, IBV_WR_RDMA_WRITE, 1, p.a.buf, 8, p.a.mr->lkey, (uintptr_t)p.b.buf, rkey, IBV_SEND_SIGNALED);
	int n = poll_one(p.a.scq, &wc);
	CHECK("deregistered rkey", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "n %d status %d", n, wc.status);
	free_pair(&p);
	// A read-only MR refuses writes; a bad lkey is a local error.
	p = new_pair(d, 16, 16, 7);
	struct ibv_mr *ro = ibv_reg_mr(p.b.qp->pd, p.b.buf + 4096, 4096, IBV_ACCESS_REMOTE_READ);
	post(p.a.qp, IBV_WR_RDMA_WRITE, 1, p.a.buf, 8, p.a.mr->lkey, (uintptr_t)p.b.buf + 4096, ro->rkey, 0);
	n = poll_one(p.a.scq, &wc);
	CHECK("write to a read-only MR", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "n %d status %d", n, wc.status);
	ibv_dereg_mr(ro);
	free_pair(&p);
	p = new_pair(d, 16, 16, 7);
	post(p.a.qp, IBV_WR_RDMA_WRITE, 1, p.a.buf, 8, p.a.mr->lkey + 1, (uintptr_t)p.b.buf, p.b.mr->rkey, 0);
	n = poll_one(p.a.scq, &wc);
	CHECK("bad lkey", n == 1 && wc.status == IBV_WC_LOC_PROT_ERR, "n %d status %d", n, wc.status);
	free_pair(&p);
}

// Queue depths: the send queue takes max_send_wr requests until a polled
// completion frees slots; unsignaled requests complete silently.
static void check_queues(struct dev *d) {
	struct pair p = new_pair(d, 8, 64, 7);
	struct ibv_wc wc;
	int rc = 0, k;
	for (k = 0; k < 8 && rc == 0; k++)
		rc = post(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)k, p.a.buf, 2, p.a.mr->lkey, (uintptr_t)p.b.buf, p.b.mr->rkey, k == 3 ? IBV_SEND_SIGNALED : 0);
	CHECK("send queue takes max_send_wr", rc == 0 && k == 8, "post %d: %d", k, rc);
	CHECK("beyond max_send_wr: ENOMEM", post(p.a.qp, IBV_WR_RDMA_WRITE, 8, p.a.buf, 2, p.a.mr->lkey, (uintptr_t)p.b.buf, p.b.mr->rkey, 0) == ENOMEM, "accepted");
	int n = ibv_poll_cq(p.a.scq, 4, &wc);
	CHECK("unsignaled: no completion", n == 1 && wc.wr_id == 3, "n %d wr_id %llu", n, (unsigned long long)wc.wr_id);
	for (k = 0; k < 4 && rc == 0; k++) // the signaled one freed four slots
		rc = post(p.a.qp, IBV_WR_RDMA_WRITE, 20, p.a.buf, 2, p.a.mr->lkey, (uintptr_t)p.b.buf, p.b.mr->rkey, 0);
	CHECK("a polled completion frees its slots", rc == 0 && k == 4, "post %d: %d", k, rc);
	CHECK("and no more", post(p.a.qp, IBV_WR_RDMA_WRITE, 8, p.a.buf, 2, p.a.mr->lkey, (uintptr_t)p.b.buf, p.b.mr->rkey, 0) == ENOMEM, "accepted");
	// Receive queue: max_recv_wr (16) posted, the 17th refused.
	for (k = 0, rc = 0; k < 16 && rc == 0; k++)
		rc = post_recv(p.b.qp, (uint64_t)k, p.b.buf, 64, p.b.mr->lkey);
	CHECK("receive queue depth", rc == 0 && post_recv(p.b.qp, 99, p.b.buf, 64, p.b.mr->lkey) == ENOMEM, "post %d: %d", k, rc);
	free_pair(&p);

	// A CQ that overflows: its completions are lost and polls fail.
	p = new_pair(d, 16, 4, 7);
	for (k = 0, rc = 0; k < 6 && rc == 0; k++)
		rc = post(p.a.qp, IBV_WR_RDMA_WRITE, (uint64_t)k, p.a.buf, 2, p.a.mr->lkey, (uintptr_t)p.b.buf, p.b.mr->rkey, IBV_SEND_SIGNALED);
	CHECK("CQ overrun fails the poll", ibv_poll_cq(p.a.scq, 1, &wc) < 0, "polled");
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	ibv_query_qp(p.a.qp, &qa, IBV_QP_STATE, &qia);
	CHECK("CQ overrun: QP in error", qa.qp_state == IBV_QPS_ERR, "state %d", qa.qp_state);
	free_pair(&p);
}

static void check_send(struct dev *d) {
	struct pair p = new_pair(d, 16, 16, 7);
	struct ibv_wc wc;
	pattern(p.a.buf, 300, 5);
	post_recv(p.b.qp, 77, p.b.buf + 512, 300, p.b.mr->lkey);
	struct ibv_sge sge = {(uintptr_t)p.a.buf, 300, p.a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 5, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM, .send_flags = IBV_SEND_SIGNALED, .imm_data = htobe32(0xabc)}, *bad;
	int rc = ibv_post_send(p.a.qp, &wr, &bad);
	int n = poll_one(p.b.rcq, &wc);
	CHECK("send lands in the posted receive", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 77 && wc.byte_len == 300 && wc.opcode == IBV_WC_RECV &&
	                                             (wc.wc_flags & IBV_WC_WITH_IMM) && be32toh(wc.imm_data) == 0xabc && wc.src_qp == p.a.qp->qp_num && bad_bytes(p.b.buf + 512, 300, 5) == 0,
	      "rc %d n %d status %s len %u", rc, n, n == 1 ? ibv_wc_status_str(wc.status) : "-", wc.byte_len);
	n = poll_one(p.a.scq, &wc);
	CHECK("send completes", n == 1 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_SEND, "n %d", n);

	// No receive posted: the send waits (rnr_retry 7) and goes once one is.
	wr.opcode = IBV_WR_SEND;
	rc = ibv_post_send(p.a.qp, &wr, &bad);
	n = ibv_poll_cq(p.a.scq, 1, &wc);
	CHECK("RNR: the send waits", rc == 0 && n == 0, "rc %d n %d", rc, n);
	post_recv(p.b.qp, 78, p.b.buf + 2048, 300, p.b.mr->lkey);
	n = poll_one(p.a.scq, &wc);
	struct ibv_wc rwc;
	int rn = poll_one(p.b.rcq, &rwc);
	CHECK("RNR: it goes when a receive is posted", n == 1 && wc.status == IBV_WC_SUCCESS && rn == 1 && rwc.wr_id == 78 && bad_bytes(p.b.buf + 2048, 300, 5) == 0, "n %d rn %d", n, rn);

	// A message larger than the receive.
	post_recv(p.b.qp, 79, p.b.buf + 4096, 100, p.b.mr->lkey);
	rc = ibv_post_send(p.a.qp, &wr, &bad);
	n = poll_one(p.a.scq, &wc);
	rn = poll_one(p.b.rcq, &rwc);
	CHECK("send larger than the receive", n == 1 && wc.status == IBV_WC_REM_INV_REQ_ERR && rn == 1 && rwc.status == IBV_WC_LOC_LEN_ERR, "n %d status %d rn %d", n, wc.status, rn);
	free_pair(&p);

	// UC: a message nobody receives is dropped, the send completes.
	struct side ua = new_side(d, 16, 16, 16, 0, all_access), ub = new_side(d, 16, 16, 16, 0, all_access);
	ibv_destroy_qp(ua.qp);
	ibv_destroy_qp(ub.qp);
	struct ibv_qp_init_attr uc = {.send_cq = ua.scq, .recv_cq = ua.rcq, .qp_type = IBV_QPT_UC, .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1}};
	ua.qp = ibv_create_qp(d->pd, &uc);
	uc.send_cq = ub.scq;
	uc.recv_cq = ub.rcq;
	ub.qp = ibv_create_qp(d->pd, &uc);
	if (!ua.qp || !ub.qp || connect_qp(ua.qp, ub.qp->qp_num, d->gid, 7) || connect_qp(ub.qp, ua.qp->qp_num, d->gid, 7))
		die("UC");
	rc = post(ua.qp, IBV_WR_SEND, 1, ua.buf, 8, ua.mr->lkey, 0, 0, IBV_SEND_SIGNALED);
	n = poll_one(ua.scq, &wc);
	rn = ibv_poll_cq(ub.rcq, 1, &rwc);
	CHECK("UC: a send with no receive is dropped", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && rn == 0, "rc %d n %d rn %d", rc, n, rn);
	CHECK("UC: no READ", post(ua.qp, IBV_WR_RDMA_READ, 2, ua.buf, 8, ua.mr->lkey, (uintptr_t)ub.buf, ub.mr->rkey, 0) == EINVAL, "accepted");
	free_side(&ua);
	free_side(&ub);

	// rnr_retry 0: no receive is an error at once.
	p = new_pair(d, 16, 16, 0);
	wr.send_flags = 0;
	ibv_post_send(p.a.qp, &wr, &bad);
	n = poll_one(p.a.scq, &wc);
	CHECK("RNR retries exceeded", n == 1 && wc.status == IBV_WC_RNR_RETRY_EXC_ERR, "n %d status %d", n, wc.status);
	free_pair(&p);
}

// The ibv_wr_* API (what perftest uses on ConnectX and EFA).
static void check_wr_api(struct dev *d) {
	struct side a = new_side(d, 16, 16, 16, 64, all_access), b = new_side(d, 16, 16, 16, 64, all_access);
	ibv_destroy_qp(a.qp);
	struct ibv_qp_init_attr_ex x = {.send_cq = a.scq, .recv_cq = a.rcq, .qp_type = IBV_QPT_RC, .cap = {.max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1, .max_recv_sge = 1, .max_inline_data = 64},
	                                .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS, .pd = d->pd,
	                                .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND};
	a.qp = ibv_create_qp_ex(d->ctx, &x);
	struct ibv_qp_ex *qx = a.qp ? ibv_qp_to_qp_ex(a.qp) : NULL;
	if (!qx || connect_qp(a.qp, b.qp->qp_num, d->gid, 7) || connect_qp(b.qp, a.qp->qp_num, d->gid, 7)) {
		CHECK("ibv_wr API", 0, "no qp_ex");
		return;
	}
	pattern(a.buf, 64, 9);
	ibv_wr_start(qx);
	qx->wr_id = 31;
	qx->wr_flags = 0;
	ibv_wr_rdma_write(qx, b.mr->rkey, (uintptr_t)b.buf + 64);
	ibv_wr_set_sge(qx, a.mr->lkey, (uintptr_t)a.buf, 64);
	qx->wr_id = 32;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, b.mr->rkey, (uintptr_t)b.buf + 256);
	ibv_wr_set_inline_data(qx, a.buf, 16);
	int rc = ibv_wr_complete(qx);
	struct ibv_wc wc;
	int n = poll_one(a.scq, &wc);
	CHECK("ibv_wr API", rc == 0 && n == 1 && wc.wr_id == 32 && wc.status == IBV_WC_SUCCESS && bad_bytes(b.buf + 64, 64, 9) == 0 && memcmp(b.buf + 256, a.buf, 16) == 0,
	      "rc %d n %d", rc, n);
	CHECK("ibv_qp_to_qp_ex of a plain QP", ibv_qp_to_qp_ex(b.qp) == NULL, "not NULL");
	free_side(&a);
	free_side(&b);
}

// UD: datagrams through an address handle, each with the GRH a RoCE v2 NIC
// writes ahead of it; lost where nobody takes them, a receive too short
// failing, a send over the MTU failing.
struct ud_side {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint8_t *buf;
	struct ibv_mr *mr;
};

static struct ud_side new_ud(struct dev *d, uint32_t qkey) {
	struct ud_side s;
	s.buf = map(1 << 16);
	s.mr = ibv_reg_mr(d->pd, s.buf, 1 << 16, IBV_ACCESS_LOCAL_WRITE);
	s.cq = ibv_create_cq(d->ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr a = {.send_cq = s.cq, .recv_cq = s.cq, .qp_type = IBV_QPT_UD,
	                             .cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1}};
	if (!s.mr || !s.cq || !(s.qp = ibv_create_qp(d->pd, &a)))
		die("UD QP");
	struct ibv_qp_attr m = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = qkey};
	if (ibv_modify_qp(s.qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("UD INIT");
	m.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(s.qp, &m, IBV_QP_STATE))
		die("UD RTR");
	m.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(s.qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD RTS");
	return s;
}

static int ud_send(struct ud_side *s, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, uint32_t off, uint32_t len) {
	struct ibv_sge sge = {.addr = (uintptr_t)(s->buf + off), .length = len, .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.wr_id = len, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

static void check_ud(struct dev *d) {
	struct ud_side a = new_ud(d, 0x11111111), b = new_ud(d, 0x11111111);
	struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1, .grh = {.dgid = d->gid}};
	struct ibv_ah *ah = ibv_create_ah(d->pd, &aa);
	CHECK("UD: an address handle", ah != NULL, "errno %d", errno);
	struct ibv_ah_attr nog = {.port_num = 1};
	CHECK("UD: no address handle without a GRH (RoCE)", ibv_create_ah(d->pd, &nog) == NULL, "made");
	if (!ah)
		return;
	struct ibv_wc wc[2];
	pattern(a.buf, 100, 21);
	post_recv(b.qp, 5, b.buf, 40 + 100, b.mr->lkey);
	int rc = ud_send(&a, ah, b.qp->qp_num, 0x11111111, 0, 100);
	int n = poll_one(b.cq, &wc[0]);
	const uint8_t *ip = b.buf + 20;
	CHECK("UD: a datagram lands after its GRH", rc == 0 && n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].byte_len == 140 &&
	          (wc[0].wc_flags & IBV_WC_GRH) && wc[0].src_qp == a.qp->qp_num && bad_bytes(b.buf + 40, 100, 21) == 0,
	      "rc %d n %d status %d len %u", rc, n, wc[0].status, wc[0].byte_len);
	CHECK("UD: the GRH holds the sender's IPv4 header", ip[0] == 0x45 && ip[9] == 17 && memcmp(ip + 12, d->gid.raw + 12, 4) == 0,
	      "%02x %02x", ip[0], ip[9]);
	n = poll_one(a.cq, &wc[0]);
	CHECK("UD: the send completes", n == 1 && wc[0].status == IBV_WC_SUCCESS && wc[0].opcode == IBV_WC_SEND, "n %d", n);
	// Lost: no receive, another Q_Key, no such QP; each send succeeds.
	rc = ud_send(&a, ah, b.qp->qp_num, 0x11111111, 0, 10);
	rc |= ud_send(&a, ah, b.qp->qp_num, 0x22222222, 0, 11);
	rc |= ud_send(&a, ah, b.qp->qp_num ^ 0x800000, 0x11111111, 0, 12);
	int sent = 0;
	for (int i = 0; i < 3; i++)
		sent += poll_one(a.cq, &wc[0]) == 1 && wc[0].status == IBV_WC_SUCCESS;
	post_recv(b.qp, 6, b.buf, 40 + 100, b.mr->lkey);
	n = ibv_poll_cq(b.cq, 1, &wc[1]);
	CHECK("UD: lost where nobody takes it, the sends succeed", rc == 0 && sent == 3 && n == 0, "rc %d sent %d received %d", rc, sent, n);
	// Longer than the receive: that receive fails; over the MTU: the send.
	rc = ud_send(&a, ah, b.qp->qp_num, 0x11111111, 0, 101);
	n = poll_one(b.cq, &wc[1]);
	poll_one(a.cq, &wc[0]);
	CHECK("UD: longer than the receive fails there", rc == 0 && n == 1 && wc[1].status == IBV_WC_LOC_LEN_ERR && wc[0].status == IBV_WC_SUCCESS,
	      "rc %d n %d status %d", rc, n, wc[1].status);
	rc = ud_send(&a, ah, b.qp->qp_num, 0x11111111, 0, 4097);
	n = poll_one(a.cq, &wc[0]);
	CHECK("UD: over the MTU fails the send", rc == 0 && n == 1 && wc[0].status == IBV_WC_LOC_LEN_ERR, "rc %d n %d status %d", rc, n, wc[0].status);
	CHECK("UD: no RDMA WRITE", post(a.qp, IBV_WR_RDMA_WRITE, 1, a.buf, 8, a.mr->lkey, 0, 0, 0) == EINVAL, "accepted");
	CHECK("UD: destroy the address handle", ibv_destroy_ah(ah) == 0, "failed");
	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_dereg_mr(a.mr);
	ibv_dereg_mr(b.mr);
	munmap(a.buf, 1 << 16);
	munmap(b.buf, 1 << 16);
}

// Across processes: the responder's buffer is written by the other
// process's WRITE and SEND, and checked there.
struct wire {
	uint32_t qpn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static int cross_process(void) {
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		die("socketpair");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0)
		die("fork");
	// Both open the device after the fork: two processes as any two are.
	struct dev d = open_dev();
	int me = pid == 0;
	int fd = sv[me ? 1 : 0];
	struct side s = new_side(&d, 16, 16, 16, 0, all_access);
	struct wire w = {s.qp->qp_num, s.mr->rkey, (uintptr_t)s.buf, d.gid}, peer;
	if (write(fd, &w, sizeof(w)) != sizeof(w) || read(fd, &peer, sizeof(peer)) != sizeof(peer))
		die("exchange");
	if (connect_qp(s.qp, peer.qpn, peer.gid, 7))
		die("connect");
	if (me) { // the responder
		post_recv(s.qp, 1, s.buf + 8192, 4096, s.mr->lkey);
		char go = 1;
		if (write(fd, &go, 1) != 1 || read(fd, &go, 1) != 1) // receive posted; the peer wrote
			die("sync");
		struct ibv_wc wc;
		int n = poll_one(s.rcq, &wc);
		int ok = bad_bytes(s.buf, 4096, 11) == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.byte_len == 1000 && bad_bytes(s.buf + 8192, 1000, 12) == 0;
		printf("%s cross-process: WRITE and SEND land in the other process's memory%s\n", ok ? "ok" : "FAIL", ok ? "" : ": bad data or no receive");
		fflush(stdout);
		free_side(&s);
		_exit(ok ? 0 : 1);
	}
	char go;
	if (read(fd, &go, 1) != 1)
		die("sync");
	pattern(s.buf, 4096, 11);
	pattern(s.buf + 4096, 1000, 12);
	struct ibv_wc wc;
	int rc = post(s.qp, IBV_WR_RDMA_WRITE, 1, s.buf, 4096, s.mr->lkey, peer.addr, peer.rkey, 0);
	rc |= post(s.qp, IBV_WR_SEND, 2, s.buf + 4096, 1000, s.mr->lkey, 0, 0, IBV_SEND_SIGNALED);
	int n = poll_one(s.scq, &wc);
	CHECK("cross-process: completions", rc == 0 && n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2, "rc %d n %d", rc, n);
	rc = post(s.qp, IBV_WR_RDMA_WRITE, 3, s.buf, 8, s.mr->lkey, peer.addr + (1 << 16) - 4, peer.rkey, 0);
	n = poll_one(s.scq, &wc);
	CHECK("cross-process: a write past the peer's region fails", n == 1 && wc.status == IBV_WC_REM_ACCESS_ERR, "n %d status %d", n, wc.status);
	if (write(fd, &go, 1) != 1)
		die("sync");
	int st;
	waitpid(pid, &st, 0);
	free_side(&s);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

int main(void) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	failures += cross_process();
	struct dev d = open_dev();
	check_device(&d);
	check_write(&d);
	check_remote_access(&d);
	check_queues(&d);
	check_send(&d);
	check_wr_api(&d);
	check_ud(&d);
	ibv_dealloc_pd(d.pd);
	ibv_close_device(d.ctx);
	printf("%d failed\n", failures);
	return failures;
}
