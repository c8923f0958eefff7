// fv.h: the internals of fakeverbs, a libibverbs.so.1 stand-in with a
// zero-cost NIC. Any verbs program loads it unchanged, perftest included:
//
//	make fakeverbs
//	LD_LIBRARY_PATH=build/fakeverbs ib_write_bw -d fake0 -s 2 -n 100000      # server
//	LD_LIBRARY_PATH=build/fakeverbs ib_write_bw -d fake0 -s 2 -n 100000 127.0.0.1
//
// The model: a request is carried out inside ibv_post_send, by the thread
// that posts it. RDMA WRITE copies straight into the peer's registered
// memory, SEND into the peer's posted receive buffer, and the completions go
// into the CQs' rings; nothing else runs, nothing sleeps and the data path
// makes no system call, so what a benchmark measures on it is its own loop.
//
// Peers may live in other processes on this host. Every object a peer must
// reach is a POSIX shared memory object whose name is derived from the
// device and a number the device hands out (the QP number, the MR key, the
// CQ number): "/fakeverbs-fake0-qp-0000012a". Registering memory moves the
// registered pages onto such an object (the same virtual addresses, the
// same contents, now MAP_SHARED), so that a peer can map them and write
// into them as a NIC would DMA. A process's objects go when it closes them;
// those of a process that died, at the next ibv_open_device.
//
// The device: fake0 (FAKEVERBS_DEVICES=N: fake0..fake{N-1}, up to 4), one
// port, RoCE v2 (Ethernet link layer), GID ::ffff:127.0.0.(index+1), 4 KiB
// MTU, NDR 4x; RC, UC and UD QPs (ud.c); WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM,
// READ, fetch-and-add and compare-and-swap; up to 4 SGEs and 1 KiB inline;
// ibv_create_qp_ex's ibv_wr_* API, ibv_create_cq_ex, ibv_query_device_ex.
// It checks what a NIC checks: every key, address range and access right
// (a bad one is an error completion and the QP's error state, never a
// stray write), queue depths (ENOMEM beyond max_send_wr or max_recv_wr),
// inline sizes, CQ overrun (completions lost, polls fail), RNR (a SEND
// waits for a receive within rnr_retry) and a peer that is not there
// (retry_cnt and timeout).
//
// Not there: SRQ, XRC, memory windows, multicast, completion events
// (ibv_req_notify_cq fails: poll), device memory and dma-buf MRs. Memory
// that cannot be moved onto shared memory (hugetlb, SysV shm, files,
// read-only, or pages of an MR that overlap another's only in part) stays
// reachable from its own process only (FAKEVERBS_SHARE=0: all of it). A
// peer that dies leaves its shared pages to writes nobody reads, as a
// host whose NIC outlives its process. Waiting requests (RNR) move when
// their process posts or polls one of the QP's CQs.
//
// FAKEVERBS_STATS=FILE: the meter (struct fv_meter), what make
// bench-overhead reads.
//
// A fabric on one host (fabric.c): FAKEVERBS_NAME=mlx5_0[,mlx5_1...] names
// this process's devices and FAKEVERBS_HOST=node7 the host they are on;
// either set, each device's GID is ::ffff:127.a.b.c with a.b.c a hash of
// "host/name" (never 127.0.0.x), its objects' names carry that GID, and a
// registry object (/fakeverbs-gABCDEF-dev-00000000) tells a peer which
// host and name it is. FAKEVERBS_FABRIC=FILE gives paths a bandwidth and a
// latency (the syntax: fabric.c; docs/development.md, "A fabric on one
// host"): a paced QP's completions, its own and
// the peer's receives, carry a deadline on CLOCK_MONOTONIC (a virtual
// clock per path, src device to dst, shared by the process's QPs on it)
// and no poll returns one before it.
//
// FAKEVERBS_YIELD=1: a poll that finds no completion gives the CPU away
// (sched_yield). Processes that stand for hosts, each with CPUs of its own
// on a cluster, share this host's few: 64 ranks busy-polling 2 CPUs make a
// ping-pong wait out the scheduler's time slices (about 50 ms a round
// trip), where a yielding poller hands the CPU to the side whose turn it is.
#ifndef FAKEVERBS_FV_H
#define FAKEVERBS_FV_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#define FV_EXPORT __attribute__((visibility("default")))
#define FV_LIKELY(x) __builtin_expect(!!(x), 1)
#define FV_UNLIKELY(x) __builtin_expect(!!(x), 0)

#define FV_MAX_DEVICES 4
#define FV_MAX_SGE 4          // per send or receive request
#define FV_MAX_INLINE 1024    // bytes of inline data per send request
#define FV_MAX_QP_WR 32768    // send or receive queue depth
#define FV_MAX_CQE (1 << 22)
#define FV_MAX_LOCAL_QPS 4096 // QPs of one process at once (its slot table)
#define FV_MAX_MREFS 1024     // memory regions one process has looked up at once
#define FV_KEY_CACHE 8        // per QP: the MR keys it used last
#define FV_MAGIC_QP 0x66765150u
#define FV_MAGIC_CQ 0x66764351u
#define FV_MAGIC_MR 0x66764d52u
#define FV_VENDOR_ID 0xfa4eu // no PCI vendor's: perftest then takes it for an unknown device
#define FV_CACHELINE 64

// An MR object's header (its first page). The data pages, when the MR owns
// them, follow it.
struct fv_mr_hdr {
	uint32_t magic, key;
	int32_t pid;          // the owner
	uint32_t state;       // FV_MR_VALID until deregistered (atomic)
	uint32_t access;      // enum ibv_access_flags
	uint32_t pd;          // the PD's number: a QP reaches only its own PD's MRs
	uint64_t addr, len;   // the registered range, in the owner's addresses
	uint64_t pbase, plen; // the whole pages around it
	uint32_t shared;      // the pages are in data_key's object, at data_off
	uint32_t data_key;
	uint64_t data_off;
};
enum { FV_MR_DEAD = 0, FV_MR_VALID = 1 };

// A receive request in a QP object's ring.
struct fv_rwqe {
	uint64_t wr_id;
	uint32_t num_sge, pad;
	struct ibv_sge sge[FV_MAX_SGE];
};

// A QP object: what a peer needs of the QP (state, receive ring, CQ).
struct fv_qp_shm {
	uint32_t magic, qpn;
	int32_t pid;
	uint32_t qp_type;
	uint32_t state;         // enum ibv_qp_state (atomic)
	uint32_t access;        // qp_access_flags: what a peer may do to this QP's MRs
	uint32_t pd;
	uint32_t rq_size;       // max_recv_wr
	uint32_t rq_mask;       // ring entries - 1
	uint32_t max_recv_sge;
	uint32_t rcq_id;        // the receive CQ's object
	uint32_t slot;          // the owner's slot (fv_slots) for this QP
	uint32_t min_rnr_timer;
	uint32_t dest_qpn;
	uint32_t qkey;          // UD: what a datagram's Q_Key must be
	uint32_t pad1;
	uint64_t pad0[1];
	// The receive ring: the owner produces, the connected peer consumes
	// (rq_cons, by CAS: the owner takes what is left when it flushes).
	uint64_t rq_prod __attribute__((aligned(FV_CACHELINE)));
	uint64_t rq_cons __attribute__((aligned(FV_CACHELINE)));
	struct fv_rwqe rq[] __attribute__((aligned(FV_CACHELINE)));
};

// A completion in a CQ object's ring (one cache line).
struct fv_cqe {
	uint64_t seq; // the ring's turn (atomic; Vyukov's bounded queue)
	uint64_t wr_id;
	uint32_t status, opcode, byte_len, imm, qp_num, src_qp, wc_flags; // vendor_err is always 0
	uint16_t slot; // the QP's slot in its owner, whose queue the entry frees up to pos
	uint16_t is_recv;
	uint64_t due; // CLOCK_MONOTONIC ns before which no poll returns it (0: at once; a fabric's pacing)
	uint64_t pos;
};
_Static_assert(sizeof(struct fv_cqe) == FV_CACHELINE, "a completion is one cache line");

// A CQ object: a bounded multi-producer, multi-consumer ring. Producers are
// this process's posts (send completions) and peers' SENDs (receive
// completions); consumers are the owner's pollers.
struct fv_cq_shm {
	uint32_t magic, id;
	int32_t pid;
	uint32_t mask;
	uint32_t overrun; // a completion found the ring full (atomic)
	uint64_t tail __attribute__((aligned(FV_CACHELINE)));
	uint64_t head __attribute__((aligned(FV_CACHELINE)));
	struct fv_cqe slot[] __attribute__((aligned(FV_CACHELINE)));
};

// A QP's slot in its process: the queue counters that pollers advance, which
// must outlive the QP (a poller may hold a completion of a QP being
// destroyed). One cache line each, as every QP is polled on its own.
struct fv_slot {
	uint64_t sq_freed; // send requests whose slots a polled completion freed
	uint64_t rq_freed; // receives polled
	uint32_t qpn;      // 0: free
} __attribute__((aligned(FV_CACHELINE)));

struct fv_device {
	struct ibv_device dev;
	int index;
	union ibv_gid gid; // ::ffff:127.0.0.(index+1), or a hash's (FAKEVERBS_NAME/HOST): RoCE v2, an IPv4 address on lo
	uint64_t guid;
	char ns[16];       // its objects' names: "fake0", or "g" and the GID's last 3 bytes in hex
	char host[64];     // FAKEVERBS_HOST ("localhost"): the fabric file's name for it is host/name
	int named;         // FAKEVERBS_NAME or FAKEVERBS_HOST: registered while a context is open
	int opens;         // contexts open (under fv_qps_mu)
	int owner;         // this process made the registry object
};

// A device of another process, known by its GID: its objects' namespace
// and its name in the fabric file. A dev number at FV_MAX_DEVICES or above
// is fv_peers[dev - FV_MAX_DEVICES].
#define FV_MAX_PEERS 1024
struct fv_peer {
	union ibv_gid gid;
	char ns[16];
	char host[64];
	char name[64];
};

// The registry object of a named device (kind FV_DEV, number 0).
#define FV_MAGIC_DEV 0x66764456u
struct fv_dev_shm {
	uint32_t magic, pad;
	int32_t pid; // the third word, as every object's (fv_gc)
	uint32_t pad2;
	char host[64];
	char name[64];
};

struct fv_context {
	struct verbs_context vctx; // its last member is the ibv_context apps see
	struct fv_device *dev;
};

struct fv_pd {
	struct ibv_pd pd;
	uint32_t num;
};

// fv_mref is a process's handle on an MR, its own or a peer's: the header,
// where its pages are in this process, and the references QPs hold.
struct fv_mref {
	int dev;
	uint32_t key;
	int own;                     // this process's MR: the addresses are its own
	struct fv_mr_hdr *hdr;       // mapped header
	uint8_t *base;               // where hdr->pbase is in this process
	void *data_map;              // a peer's data pages mapped here (NULL: own)
	size_t data_len;
	int refs;                    // under fv_mref_mu
	struct fv_mref *next;
};

struct fv_span;

struct fv_mr {
	struct ibv_mr mr;
	struct fv_mref *ref; // the MR's own handle (one reference)
	struct fv_span *span;
};

// fv_meter is FAKEVERBS_STATS's record of what a QP posted (or a CQ gave):
// every FV_METER_EVERY messages a window closes with its wall time. A
// loaded host preempts a benchmark for milliseconds at a time, and a
// stall, however long, falls in one window: the windows' median is the
// benchmark's own cost where its overall rate is not. (Not the thread's
// CPU time: in this project's VMs CLOCK_THREAD_CPUTIME_ID ran at a third
// of the wall clock's pace for a thread that never left the CPU.)
#define FV_METER_EVERY 1024
#define FV_METER_WINDOWS 65536
struct fv_meter {
	uint64_t n, next;
	uint64_t n0, wall0;    // the first sample
	uint64_t nl, walll;    // the last
	uint32_t *win;         // each window's ns per message, ×100
	uint32_t nwin;
};

struct fv_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cqx;
	} u; // first: apps see this
	struct fv_cq_shm *shm;
	size_t map_len;
	uint32_t id;
	int reported, told_events; // overrun, and that events are not supported, said on stderr (once each)
	// ibv_start_poll: the completion being read
	struct fv_cqe cur;
	struct fv_meter meter; // completions polled
	uint32_t npending; // QPs using this CQ that have requests waiting (atomic)
};

// A send request waiting for its peer (a SEND with no receive posted yet,
// or a peer QP not ready): RC keeps order, so everything after it waits too.
struct fv_pending {
	struct ibv_send_wr wr;
	struct ibv_sge sge[FV_MAX_SGE];
	uint64_t pos;
	uint64_t due; // the fabric's deadline, computed at post time
	uint8_t *inl; // inline data, copied at post time (max_inline bytes)
};

// fv_key_cache is a QP's copy of what it checks of an MR it used lately:
// the header's fields (fixed for the MR's life, but its state) and where
// its pages are here (addr + delta). A QP keeps its own MRs' keys and its
// peer's apart, so that an lkey and an rkey never evict each other.
struct fv_key_cache {
	uint32_t key, access;
	int32_t pid;
	uint32_t pd;
	uint64_t lo, len;
	intptr_t delta;
	const uint32_t *state;
	struct fv_mref *ref; // NULL: the entry is empty
	int reachable;       // the pages are mapped here (a peer's MR may not be shared)
};

// A path's virtual clock (fabric pacing): when the path from device src
// to dst (dev numbers) is next free, for every QP of this process on it.
struct fv_path {
	uint64_t vclock; // CLOCK_MONOTONIC ns (atomic)
	int src, dst;
} __attribute__((aligned(FV_CACHELINE)));

struct fv_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qpx;
	} u; // first
	uint32_t lock;  // the send queue (as mlx5's per-QP lock; fv_lock)
	uint32_t rlock; // the receive queue's producer side
	struct fv_qp_shm *shm;
	size_t map_len;
	int dev;
	uint32_t qpn, slot_ix, pd;
	struct fv_slot *slot;
	struct fv_cq *scq, *rcq;
	uint32_t qp_type, state;
	uint32_t max_send_wr, max_send_sge, max_inline, sig_all;
	uint64_t sq_posted;
	uint64_t due;     // the deadline of the request being carried out (0: unpaced)
	uint64_t rq_prod; // = shm->rq_prod, kept here to post without reading shared memory
	// The connection (RTR): the peer QP's object and its receive CQ.
	uint32_t dest_qpn;
	int dest_dev;
	struct fv_qp_shm *peer;
	size_t peer_len;
	struct fv_cq_shm *peer_rcq;
	size_t peer_rcq_len;
	int32_t peer_pid;
	uint8_t timeout, retry_cnt, rnr_retry;
	uint32_t access;
	// Waiting requests (a ring of max_send_wr).
	struct fv_pending *pend;
	uint8_t *pend_inl;
	uint32_t pend_head, pend_count;
	uint64_t blocked_since; // CLOCK_MONOTONIC ns the head request first waited (0: not yet)
	int blocked_rnr;
	struct fv_key_cache lkeys[FV_KEY_CACHE], rkeys[FV_KEY_CACHE]; // this process's MRs, the peer's
	// ibv_wr_* (qp_ex): requests built between wr_start and wr_complete.
	struct ibv_send_wr *bwr;
	struct ibv_sge *bsge;
	uint8_t *binl;
	uint32_t bcount;
	int berr;
	struct fv_meter meter; // requests posted
	// The fabric (FAKEVERBS_FABRIC): set at RTR from the path's rules.
	// [0] this QP's device to the peer's (WRITE, SEND, atomics), [1] back
	// (READ's data); path: the process's clock of that path, which its
	// QPs on it share (own: when the table is full).
	int pace;
	double ns_per_byte[2];
	uint64_t lat_ns[2];
	struct fv_path *path[2];
	struct fv_path *own;
};

// A spin lock, inlined: posting takes one per call (as mlx5 does), and
// glibc's is a call through the PLT each way.
static inline int fv_trylock(uint32_t *l) { return !__atomic_exchange_n(l, 1, __ATOMIC_ACQUIRE); }
static inline void fv_lock(uint32_t *l) {
	while (!fv_trylock(l))
		while (__atomic_load_n(l, __ATOMIC_RELAXED)) {
#if defined(__x86_64__) || defined(__i386__)
			__builtin_ia32_pause();
#elif defined(__aarch64__)
			__asm__ volatile("yield");
#endif
		}
}
static inline void fv_unlock(uint32_t *l) { __atomic_store_n(l, 0, __ATOMIC_RELEASE); }

// fv_zalloc_lines allocates zeroed memory of whole cache lines: QPs and CQs
// of different threads then share none (one's counters, written each post,
// sat in the line with the next one's ibv_qp, read each post).
static inline void *fv_zalloc_lines(size_t n) {
	n = (n + FV_CACHELINE - 1) & ~(size_t)(FV_CACHELINE - 1);
	void *p = aligned_alloc(FV_CACHELINE, n);
	if (p)
		memset(p, 0, n);
	return p;
}

// Globals (device.c).
extern struct fv_device fv_devices[FV_MAX_DEVICES];
extern int fv_ndevices;
extern struct fv_slot fv_slots[FV_MAX_LOCAL_QPS];
extern struct fv_qp *fv_qps[FV_MAX_LOCAL_QPS];
extern pthread_mutex_t fv_qps_mu;
extern long fv_page;
// FV_HDR_SIZE is an MR object's header: a page, so that the data pages
// after it map at a page-aligned offset whatever the page size.
#define FV_HDR_SIZE ((size_t)fv_page)

extern int fv_stats; // FAKEVERBS_STATS is set
extern int fv_paced; // FAKEVERBS_FABRIC gave a rule: completions may carry deadlines
extern int fv_yield; // FAKEVERBS_YIELD=1: an empty poll yields the CPU

// Devices (device.c): dev numbers of this process's devices and peers'.
const char *fv_dev_ns(int dev);
const union ibv_gid *fv_dev_gid(int dev);
void fv_dev_ident(int dev, const char **host, const char **name);

// The fabric (fabric.c). fv_fabric_load reads FAKEVERBS_FABRIC (-1: a bad
// file, said on stderr); fv_fabric_path gives the path from src to dst
// (Gb/s, 0: no limit; µs).
int fv_fabric_load(void);
void fv_fabric_path(int src, int dst, double *bw_gbps, double *lat_us);

void fv_init(void);
// fv_meter_sample closes a window when m->n has passed m->next;
// fv_meter_report appends the windows' figures to FAKEVERBS_STATS and frees
// them.
void fv_meter_sample(struct fv_meter *m);
void fv_meter_report(struct fv_meter *m, const char *kind, uint32_t id);
static inline void fv_meter_add(struct fv_meter *m, uint64_t k) {
	if (FV_UNLIKELY(fv_stats) && k) {
		m->n += k;
		if (m->n >= m->next)
			fv_meter_sample(m);
	}
}
void fv_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t fv_now_ns(void);
int fv_device_by_gid(const union ibv_gid *gid);

// Objects (shm.c).
enum fv_kind { FV_QP, FV_CQ, FV_MR, FV_DEV };
void fv_obj_name(char *buf, size_t len, int dev, enum fv_kind kind, uint32_t id);
void fv_obj_name_ns(char *buf, size_t len, const char *ns, enum fv_kind kind, uint32_t id);
// fv_obj_create makes a new object of size bytes with a number of its own
// (from first, skipping taken ones) and maps it; returns the fd (-1: errno).
int fv_obj_create(int dev, enum fv_kind kind, uint32_t first, size_t size, uint32_t *id, void **map);
// fv_obj_new is fv_obj_create for an object reached only through its
// mapping (a CQ's, a QP's): the fd is closed. NULL: errno.
void *fv_obj_new(int dev, enum fv_kind kind, uint32_t first, size_t size, uint32_t *id);
// fv_undo_free frees what a failed call half made, keeping that call's
// errno, and returns NULL for the caller to return.
static inline void *fv_undo_free(void *p) {
	int e = errno;
	free(p);
	errno = e;
	return NULL;
}
void *fv_obj_map(int dev, enum fv_kind kind, uint32_t id, size_t *len);
void fv_obj_unlink(int dev, enum fv_kind kind, uint32_t id);
void fv_gc(int dev);

// Memory (mem.c).
struct fv_mref *fv_mref_get(int dev, uint32_t key);
void fv_mref_put(struct fv_mref *r);

// CQs (cq.c).
int fv_cq_push(struct fv_cq_shm *cq, const struct fv_cqe *e);
void fv_progress(struct fv_cq *c);

// QPs (qp.c).
void fv_qp_ops(struct ibv_context_ops *ops);
struct ibv_qp *fv_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr);

// UD (ud.c): an address handle, and a datagram's 40-byte GRH as a NIC
// writes it ahead of the payload (RoCE v2: an IPv4 header in its last 20
// bytes for an IPv4-mapped GID, the first 20 left as they were; else an
// IPv6 header).
#define FV_MAGIC_AH 0x66764148u
#define FV_GRH 40
#define FV_UD_MTU 4096
struct fv_ah {
	struct ibv_ah ah; // first: apps see this
	uint32_t magic;   // FV_MAGIC_AH until destroyed (a send through a freed AH fails)
	union ibv_gid dgid;
	int dev; // the GID's device (fv_device_by_gid), -1 until it is there
};
void fv_ud_grh(uint8_t grh[FV_GRH], const union ibv_gid *src, const union ibv_gid *dst, uint32_t payload);

#endif
