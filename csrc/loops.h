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
};

// rb_params describe one measurement. Times are CLOCK_MONOTONIC nanoseconds.
struct rb_params {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	int opcode;        // enum ibv_wr_opcode, for initiators
	uint64_t laddr;    // local source (or READ destination)
	uint32_t lkey;
	uint32_t size;
	uint64_t raddr;    // remote target (WRITE, READ)
	uint32_t rkey;
	uint64_t recv_addr; // where SENDs and write-lat pongs land locally
	uint32_t recv_lkey;
	uint32_t recv_len;
	uint32_t tx_depth;
	uint32_t sq_size;     // the send queue's real capacity (latency loops signal every sq_size/2)
	uint32_t rx_depth;
	uint32_t cq_mod;
	int use_inline;
	uint64_t iters;       // messages to complete; 0 = until end_ns
	uint64_t end_ns;      // duration mode: stop posting at this time
	uint64_t measure_from_ns; // duration mode: figures count from here...
	uint64_t measure_to_ns;   // ...to here (warm-up and cool-down excluded)
	uint64_t deadline_ns; // hard deadline, always set
	volatile int *stop;
	volatile int *ready; // set once receives are posted, so the peer may start
	uint64_t *samples;    // latency: one sample (ns) per iteration
	uint64_t sample_cap;
	uint32_t tag_base;    // write-lat: iteration tags continue across calls
	int prepost;          // send-lat: post the initial receives (first call only)
};

struct rb_result {
	int status;
	int wc_status;
	uint32_t vendor_err;
	uint64_t wr_id;
	int wc_opcode;
	int post_errno;
	uint64_t completed;   // messages in the measured interval
	uint64_t t_start_ns;  // measured interval
	uint64_t t_end_ns;
	double peak_bytes_per_ns;
	uint64_t samples;     // latency samples written
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

// Initiator of a bandwidth test: keeps tx_depth requests in flight, one
// signaled every cq_mod (CQ moderation), polling completions in batches.
void rb_bw_post(const struct rb_params *p, struct rb_result *r);
// Receiver of a send bandwidth test: keeps rx_depth receives posted.
void rb_bw_recv(const struct rb_params *p, struct rb_result *r);
// Ping-pong over SEND/RECV. The initiator records one round trip per sample.
void rb_lat_send(const struct rb_params *p, struct rb_result *r, int initiator);
// Ping-pong over RDMA WRITE: each side spins on the last byte of its receive
// region for the iteration tag, then writes the same tag back.
void rb_lat_write(const struct rb_params *p, struct rb_result *r, int initiator);
// One outstanding RDMA READ at a time; a sample is the whole operation.
void rb_lat_read(const struct rb_params *p, struct rb_result *r);

#endif
