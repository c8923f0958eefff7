// bare.c: the limit make bench-overhead holds perftest and rdmabench to:
// the fewest instructions that keep a send queue full on a verbs device,
// in one process with the peer QP beside it. Requests are built once; each
// round is a batch of BATCH requests, the last one signaled, posted PLIST
// to an ibv_post_send call (1, as perftest and rdmabench post by default:
// the same calls, none of their bookkeeping), and the loop polls until the
// oldest round has completed, so that DEPTH stay in flight. What a
// benchmark does beyond this per message is its own cost.
//
//	fv-bare write|send SIZE MESSAGES [PLIST [SECONDS [DEVICE]]]
//
// It prints "bare OP SIZE MESSAGES NS_PER_MSG" (wall time of the posting
// loop); it stops posting after SECONDS (default 60) however many messages
// went. For send a second thread keeps the peer's receives posted, as a
// bandwidth test's receiver does: it polls its CQ and reposts each one.
// With two CPUs or more allowed, the receiver runs on the first and the
// sender on the second, as make bench-overhead pins both tools' servers
// and clients.
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <sched.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define DEPTH 128  // requests in flight (perftest's and rdmabench's -t)
#define BATCH 64   // a round: half the queue, the last one signaled
#define RDEPTH 512 // receives posted (-r)
#define DEADLINE_S 120 // no completion this long: the device is stuck

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// pin_to puts the calling thread on the n-th CPU (from 0) of the process's
// allowed set; it stays unpinned when there are fewer.
static void pin_to(int n) {
	cpu_set_t all, one;
	if (sched_getaffinity(0, sizeof(all), &all) != 0 || CPU_COUNT(&all) < 2)
		return;
	CPU_ZERO(&one);
	for (int c = 0, k = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all) && k++ == n) {
			CPU_SET(c, &one);
			pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
			return;
		}
}

static void die(const char *what) {
	fprintf(stderr, "fv-bare: %s: %s\n", what, strerror(errno));
	exit(1);
}

struct recv_side {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_sge sge;
	uint64_t want; // the sender lowers it when it stops early (atomic)
	int failed;
};

// receiver reposts every receive that completes until want have (or the
// sender gives up).
static void *receiver(void *arg) {
	struct recv_side *r = arg;
	pin_to(0);
	struct ibv_recv_wr wr = {.sg_list = &r->sge, .num_sge = 1}, *bad;
	struct ibv_wc wc[16];
	uint64_t got = 0, deadline = now_ns() + DEADLINE_S * 1000000000ull;
	uint32_t spins = 0;
	while (got < __atomic_load_n(&r->want, __ATOMIC_ACQUIRE)) {
		int n = ibv_poll_cq(r->cq, 16, wc);
		if (n < 0) {
			r->failed = 1;
			break;
		}
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "fv-bare: receive failed: %s\n", ibv_wc_status_str(wc[i].status));
				r->failed = 1;
				return NULL;
			}
			wr.wr_id = wc[i].wr_id;
			if (ibv_post_recv(r->qp, &wr, &bad)) {
				r->failed = 1;
				return NULL;
			}
		}
		got += (uint64_t)n;
		if (++spins % 4096 == 0 && now_ns() > deadline) {
			r->failed = 1;
			break;
		}
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: fv-bare write|send SIZE MESSAGES [PLIST [SECONDS [DEVICE]]]\n");
		return 2;
	}
	int send = strcmp(argv[1], "send") == 0;
	if (!send && strcmp(argv[1], "write") != 0) {
		fprintf(stderr, "fv-bare: %s: want write or send\n", argv[1]);
		return 2;
	}
	uint32_t size = (uint32_t)strtoul(argv[2], NULL, 10);
	uint64_t msgs = strtoull(argv[3], NULL, 10);
	int plist = argc > 4 ? atoi(argv[4]) : 1;
	double seconds = argc > 5 ? atof(argv[5]) : 60;
	if (size < 1 || size > 65536 || msgs < BATCH || plist < 1 || BATCH % plist || !(seconds > 0)) {
		fprintf(stderr, "fv-bare: SIZE 1..65536, MESSAGES >= %d, PLIST dividing %d, SECONDS > 0\n", BATCH, BATCH);
		return 2;
	}
	msgs -= msgs % BATCH;
	int ndev;
	struct ibv_device **list = ibv_get_device_list(&ndev);
	if (!list || ndev == 0)
		die("no RDMA device");
	struct ibv_device *dev = list[0];
	for (int i = 0; argc > 6 && i < ndev; i++)
		if (strcmp(ibv_get_device_name(list[i]), argv[6]) == 0)
			dev = list[i];
	struct ibv_context *ctx = ibv_open_device(dev);
	if (!ctx)
		die("ibv_open_device");
	ibv_free_device_list(list);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	size_t len = 2 * (size_t)size + 4096;
	uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED)
		die("mmap");
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		die("ibv_reg_mr");
	// Each side has its CQs, as two processes would: the sender polls
	// scq, the receiver rcq.
	struct ibv_cq *scq = ibv_create_cq(ctx, DEPTH, NULL, NULL, 0), *rcq = ibv_create_cq(ctx, RDEPTH, NULL, NULL, 0);
	struct ibv_cq *scq_b = ibv_create_cq(ctx, DEPTH, NULL, NULL, 0), *rcq_a = ibv_create_cq(ctx, RDEPTH, NULL, NULL, 0);
	if (!scq || !rcq || !scq_b || !rcq_a)
		die("ibv_create_cq");
	struct ibv_qp_init_attr ia = {.send_cq = scq, .recv_cq = rcq_a, .qp_type = IBV_QPT_RC,
	                              .cap = {.max_send_wr = DEPTH, .max_recv_wr = RDEPTH, .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *a = ibv_create_qp(pd, &ia);
	ia.send_cq = scq_b;
	ia.recv_cq = rcq;
	struct ibv_qp *b = ibv_create_qp(pd, &ia);
	if (!a || !b)
		die("ibv_create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 0, &gid))
		die("ibv_query_gid");
	struct ibv_qp *qps[2] = {a, b};
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_attr at = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE};
		if (ibv_modify_qp(qps[i], &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
			die("INIT");
		memset(&at, 0, sizeof(at));
		at.qp_state = IBV_QPS_RTR;
		at.path_mtu = IBV_MTU_4096;
		at.dest_qp_num = qps[1 - i]->qp_num;
		at.ah_attr.is_global = 1;
		at.ah_attr.grh.dgid = gid;
		at.ah_attr.port_num = 1;
		at.max_dest_rd_atomic = 1;
		at.min_rnr_timer = 1;
		if (ibv_modify_qp(qps[i], &at, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
			die("RTR");
		memset(&at, 0, sizeof(at));
		at.qp_state = IBV_QPS_RTS;
		at.timeout = 14;
		at.retry_cnt = 7;
		at.rnr_retry = 7;
		at.max_rd_atomic = 1;
		if (ibv_modify_qp(qps[i], &at, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
			die("RTS");
	}
	struct recv_side rs = {.qp = b, .cq = rcq, .sge = {.addr = (uintptr_t)buf + size, .length = size, .lkey = mr->lkey}, .want = send ? msgs : 0};
	pthread_t th;
	if (send) {
		struct ibv_recv_wr rw = {.sg_list = &rs.sge, .num_sge = 1}, *rbad;
		for (int i = 0; i < RDEPTH; i++)
			if (ibv_post_recv(b, &rw, &rbad))
				die("ibv_post_recv");
		if (pthread_create(&th, NULL, receiver, &rs))
			die("pthread_create");
	}
	pin_to(1);
	// The batch, built once: BATCH requests, the last signaled, linked
	// in chains of plist.
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = size, .lkey = mr->lkey};
	struct ibv_send_wr wr[BATCH], *bad;
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < BATCH; i++) {
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].opcode = send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
		wr[i].wr.rdma.remote_addr = (uintptr_t)buf + size;
		wr[i].wr.rdma.rkey = mr->rkey;
		wr[i].next = (i + 1) % plist ? &wr[i + 1] : NULL;
	}
	wr[BATCH - 1].send_flags = IBV_SEND_SIGNALED;
	struct ibv_wc wc[4];
	uint64_t rounds = msgs / BATCH, posted = 0, done = 0, t0 = now_ns();
	uint64_t deadline = t0 + DEADLINE_S * 1000000000ull, stop_at = t0 + (uint64_t)(seconds * 1e9);
	uint32_t polls = 0;
	int moved = 0;
	while (done < posted || posted < rounds) {
		while (posted < rounds && posted - done < DEPTH / BATCH) {
			for (int i = 0; i < BATCH; i += plist)
				if (ibv_post_send(a, &wr[i], &bad))
					die("ibv_post_send");
			posted++;
		}
		int n = ibv_poll_cq(scq, 4, wc);
		if (n < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "fv-bare: send failed: %s\n", ibv_wc_status_str(wc[i].status));
				return 1;
			}
		done += (uint64_t)n;
		moved |= n > 0;
		// The clock, every 1024 polls: time up (drain what is in
		// flight), or no completion for DEADLINE_S (a stuck device).
		if (++polls % 1024 == 0) {
			uint64_t t = now_ns();
			if (t > stop_at && rounds > posted)
				rounds = posted;
			if (moved)
				deadline = t + DEADLINE_S * 1000000000ull;
			else if (t > deadline) {
				fprintf(stderr, "fv-bare: no completion for %d s\n", DEADLINE_S);
				return 1;
			}
			moved = 0;
		}
	}
	msgs = done * BATCH;
	__atomic_store_n(&rs.want, msgs, __ATOMIC_RELEASE);
	uint64_t t1 = now_ns();
	if (send) {
		pthread_join(th, NULL);
		if (rs.failed) {
			fprintf(stderr, "fv-bare: the receiver failed\n");
			return 1;
		}
	}
	printf("bare %s %u %llu %.2f\n", argv[1], size, (unsigned long long)msgs, (double)(t1 - t0) / (double)msgs);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_destroy_cq(scq);
	ibv_destroy_cq(rcq);
	ibv_destroy_cq(scq_b);
	ibv_destroy_cq(rcq_a);
	ibv_dereg_mr(mr);
	munmap(buf, len);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
