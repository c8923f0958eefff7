// loops.h: the measurement loops, in C so that a whole measurement is one
// call from Go. Each loop checks a stop flag (set from Go on Ctrl-C or when
// the peer's control connection drops) and a hard deadline, so none can spin
// forever on a dead peer.
#ifndef RDMABENCH_LOOPS_H
#define RDMABENCH_LOOPS_H

#include <stdint.h>
#include <infiniband/verbs.h>

enum rb_status {
	RB_OK = 0,
	RB_TIMEOUT = 1,    // the hard deadline passed
	RB_STOPPED = 2,    // the stop flag was set
	RB_WC_ERROR = 3,   // a completion failed: see wc_status
	RB_POST_ERROR = 4, // ibv_post_* failed: see post_errno
	RB_POLL_ERROR = 5, // ibv_poll_cq failed
	RB_FOREIGN_WC = 6, // a receive completion of a QP outside the loop's own
};

// rb_qp is one QP of a measurement and the memory it moves. Every thread's
// loop sees the whole array (a shared CQ may hand it another thread's
// completions); it posts only on its own slice [lo, hi).
struct rb_qp {
	struct ibv_qp *qp;
	struct ibv_ah *ah;     // UD: the destination
	uint32_t remote_qpn;   // UD
	uint32_t remote_qkey;  // UD
	uint64_t laddr;        // local source (or READ / atomic result destination)
	uint32_t lkey;
	uint64_t raddr;        // remote target (WRITE, READ, atomics)
	uint32_t rkey;
	uint64_t recv_addr;    // where SENDs and write-lat pongs land locally
	uint32_t recv_lkey;
	uint32_t recv_len;
	uint32_t prepost;      // receives to post before the loop starts (tops up what earlier loops left)
	uint32_t index;        // the QP's index in its connection: receive wr_ids carry it, as receives outlive a set
	uint32_t max_in_flight; // 0: tx_depth; a test hook slows one QP with 1...
	uint64_t post_gap_ns;   // ...and this much time between its posts
	uint64_t last_post_c;
	// Filled by the loops.
	uint64_t posted;
	uint64_t completed;    // advanced (atomically, as a maximum) by whichever thread polls its completion
	uint64_t last_sig;     // the last signaled request posted
	uint64_t win_start;    // duration mode: completed at the warm-up margin
	uint64_t win_end;      // ... and at the cool-down margin
	uint64_t bad_bytes;    // --verify: bytes that differed from the pattern
	uint64_t limit;        // messages this QP will post in all
	// The QP's own measured interval: iteration mode, from its first post to
	// its last completion; duration mode, its loop's measurement window.
	uint64_t t_first_c, t_last_c; // counter cycles (t_last_c set by whichever thread saw the completion)
	uint64_t t_first_ns, t_last_ns; // CLOCK_MONOTONIC, filled when the loop ends
};

// rb_params describe one measurement. Times are CLOCK_MONOTONIC nanoseconds.
struct rb_params {
	struct rb_qp *qps;    // all QPs of the measurement
	const uint32_t *pos_of; // set position of QP index i; n_index entries (UINT32_MAX: not in the set)
	uint32_t n_index;
	uint32_t lo, hi;      // this loop's QPs
	struct ibv_cq *cq;    // the CQ this loop polls (sends, or receives)
	int opcode;           // enum ibv_wr_opcode, for initiators
	uint32_t size;
	uint32_t imm;         // WITH_IMM opcodes, network order
	uint64_t compare_add; // atomics
	uint64_t swap;
	uint32_t tx_depth;    // requests in flight per QP
	uint32_t sq_size;     // the send queue's real capacity (latency loops signal every sq_size/2)
	uint32_t rx_depth;    // receives posted per QP
	uint32_t cq_mod;
	uint32_t post_list;   // requests per ibv_post_send call
	int use_inline;
	int ud_grh;           // UD receives: 40 bytes of GRH precede the payload
	uint64_t iters;       // messages per QP; 0 = until end_ns
	uint64_t end_ns;      // duration mode: stop posting at this time
	uint64_t measure_from_ns; // duration mode: figures count from here...
	uint64_t measure_to_ns;   // ...to here (warm-up and cool-down excluded)
	uint64_t deadline_ns; // hard deadline, always set
	volatile int *stop;
	volatile int *ready;  // set once receives are posted (or the loop is set up), so the peer may start
	volatile int *start;  // when set: wait for it after ready, so that every lane starts at once
	volatile uint64_t *progress; // messages completed so far, all lanes (interval reports, burst rate)
	uint64_t interval_ns; // --interval: lower the CQ moderation so that each QP signals ~50 completions an interval
	uint64_t *samples;    // latency: one sample (ns) per iteration
	uint64_t sample_cap;
	uint32_t tag_base;    // write-lat: iteration tags continue across calls
	int verify;           // fill sends with, and check receives against, the pattern
	uint32_t pattern_seed;
	// Message n (from 1) uses slot (n-1) % slots of each region, slot_stride
	// bytes apart, so that messages in flight never share memory (--verify).
	// slots 0 or 1: every message uses the region's start.
	uint32_t slots;
	uint64_t slot_stride;
	uint64_t corrupt_msg; // test hook: flip a byte of this message after filling it
	uint64_t pattern_base; // message n carries pattern pattern_base + n (warm-up came first)
	// fixed_pattern: every message carries pattern 1 instead. Used when a
	// side's buffer is GPU memory: its CPU cannot write a new pattern into
	// each message or check each one as it lands, so it fills its send slots
	// once and checks what landed after the run, through cudaMemcpy.
	int fixed_pattern;
	// --rate (rb_lat_rate): request n is due rate_interval_ns after request
	// n-1's due time; samples_raw (sample_cap entries) gets each answer's
	// time from the request's actual post, samples from its due time.
	uint64_t rate_interval_ns;
	uint64_t *samples_raw;
	// Test hook (ping-pong responders): before answering message stall_at
	// (from 1, counted over the call) wait stall_ns, once.
	uint64_t stall_at;
	uint64_t stall_ns;
};

struct rb_result {
	int status;
	int wc_status;
	uint32_t vendor_err;
	uint64_t wr_id;
	int wc_opcode;
	uint32_t qp_num;      // the QP whose completion or post failed
	int post_errno;
	uint64_t completed;   // messages in the measured interval, all own QPs
	uint64_t t_start_ns;  // measured interval
	uint64_t t_end_ns;
	double burst_bytes_per_ns; // highest rate of all lanes together over a window of RB_BURST_SAMPLES samples
	uint32_t min_cq_mod;  // the lowest CQ moderation used (--interval lowers it)
	uint64_t samples;     // latency samples written
	uint64_t posted;      // rb_lat_rate: requests posted
	uint64_t post_span_ns; // rb_lat_rate: first post to last post
	int rate_cut;         // rb_lat_rate: posting stopped behind the schedule (RB_RATE_CUT_GRACE_NS); status stays OK
};

uint64_t rb_now_ns(void);
// rb_calibrate measures the cycle counter against CLOCK_MONOTONIC for
// duration_ns and returns ns per cycle. The loops read the counter (rdtsc,
// cntvct) instead of the clock: where the clocksource is not the TSC (HPET in
// many VMs) clock_gettime is a system call costing a microsecond. Without a
// usable counter the loops fall back to CLOCK_MONOTONIC.
double rb_calibrate(uint64_t duration_ns);
// rb_cycles_now reads the counter the loops use (tests compare it to the clock).
uint64_t rb_cycles_now(void);
void rb_set_flag(volatile int *flag, int v);
int rb_get_flag(volatile int *flag);
uint64_t rb_get_u64(volatile uint64_t *v);

// rb_pattern fills a message with the pattern of (seed, message number), so a
// receiver can check every byte; rb_pattern_check counts the bytes that differ.
void rb_pattern(uint8_t *buf, uint32_t len, uint32_t seed, uint64_t msg);
uint64_t rb_pattern_check(const uint8_t *buf, uint32_t len, uint32_t seed, uint64_t msg);

// Initiator of a bandwidth test: keeps tx_depth requests in flight on each of
// its QPs, round robin, posted post_list at a time, polling completions in
// batches. A request is signaled at most every cq_mod (CQ moderation), and
// always often enough that a full window holds a signaled one: a chain is
// signaled (its last request) when it ends at least m requests after the
// last signaled one, with m = min(cq_mod, window - post_list + 1).
void rb_bw_post(const struct rb_params *p, struct rb_result *r);
// Receiver of a send bandwidth test: keeps rx_depth receives posted per QP.
// One receiver polls a CQ: per-QP message numbers (--verify) follow the
// order of that CQ.
void rb_bw_recv(const struct rb_params *p, struct rb_result *r);
// Ping-pong over SEND/RECV on qps[lo]. The initiator records one round trip
// per sample.
void rb_lat_send(const struct rb_params *p, struct rb_result *r, int initiator);
// Ping-pong over RDMA WRITE: each side spins on the last byte of its receive
// region for the iteration tag, then writes the same tag back.
void rb_lat_write(const struct rb_params *p, struct rb_result *r, int initiator);
// One outstanding request at a time (RDMA READ, atomics); a sample is the
// whole operation.
void rb_lat_one(const struct rb_params *p, struct rb_result *r);
// rb_lat_rate is the open-loop initiator of --rate on qps[lo]. by_recv: the
// answer to a request is the peer's SEND (send-lat, write-lat by
// WRITE_WITH_IMM); otherwise the request's own completion (READ, atomics).
// A rate the path cannot carry would take iters over the path's own rate,
// however long: once the loop is behind its schedule by more than the
// schedule's whole span plus RB_RATE_CUT_GRACE_NS (now past t0 + 2·iters·
// interval + grace) it posts no more, drains the answers of what it posted
// and returns OK with rate_cut set: a pass costs at most twice its planned
// span and the grace (the engine's step deadline counts on that). The grace
// keeps a short schedule (1100 requests at 1M/s plan 1.1 ms) from being cut
// by one descheduling of the thread, which would cost its samples, while
// adding little to what an overloaded pass costs beside a step's fixed costs.
#define RB_RATE_CUT_GRACE_NS 100000000ull
void rb_lat_rate(const struct rb_params *p, struct rb_result *r, int by_recv);

#endif
