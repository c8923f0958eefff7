// loops.c: what the loops share that Go calls too: the clocks, the flags
// and the verification pattern. The loops: loops_bw.c (bandwidth) and
// loops_lat.c (latency).
#include "loops_int.h"

uint64_t rb_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void rb_set_flag(volatile int *flag, int v) { __atomic_store_n(flag, v, __ATOMIC_RELEASE); }

int rb_get_flag(volatile int *flag) { return __atomic_load_n(flag, __ATOMIC_ACQUIRE); }

// The cycle counter's state (loops_int.h).
int rb_use_counter;
double rb_ns_per_cycle = 1.0;

uint64_t rb_cycles_now(void) { return rb_cycles(); }

double rb_calibrate(uint64_t duration_ns) {
	uint64_t n0 = rb_now_ns(), c0 = raw_counter(), n1, c1;
	do {
		n1 = rb_now_ns();
		c1 = raw_counter();
	} while (n1 - n0 < duration_ns);
	double npc = c1 > c0 ? (double)(n1 - n0) / (double)(c1 - c0) : 0;
	// Reject a counter that does not move, or runs implausibly (slower than
	// 10 MHz or faster than 100 GHz): keep the clock then.
	if (npc > 0.01 && npc < 100) {
		rb_ns_per_cycle = npc;
		rb_use_counter = 1;
	} else {
		rb_ns_per_cycle = 1.0;
		rb_use_counter = 0;
	}
	return rb_ns_per_cycle;
}

uint64_t rb_get_u64(volatile uint64_t *v) { return __atomic_load_n(v, __ATOMIC_ACQUIRE); }

// The pattern of message msg is a xorshift64 stream from a start that
// seed and msg set: pattern_byte gives its next byte.
static inline uint64_t pattern_start(uint32_t seed, uint64_t msg) {
	return ((uint64_t)seed << 32) ^ (msg * 0x9e3779b97f4a7c15ull) ^ 0x632be59bd9b4e019ull;
}

static inline uint8_t pattern_byte(uint64_t *x) {
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint8_t)*x;
}

void rb_pattern(uint8_t *buf, uint32_t len, uint32_t seed, uint64_t msg) {
	uint64_t x = pattern_start(seed, msg);
	for (uint32_t i = 0; i < len; i++)
		buf[i] = pattern_byte(&x);
}

uint64_t rb_pattern_check(const uint8_t *buf, uint32_t len, uint32_t seed, uint64_t msg) {
	uint64_t x = pattern_start(seed, msg), bad = 0;
	for (uint32_t i = 0; i < len; i++)
		bad += buf[i] != pattern_byte(&x);
	return bad;
}
