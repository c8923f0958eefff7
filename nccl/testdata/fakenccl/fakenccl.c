// fakenccl: a test-only stand-in for libnccl.so.2 and libcudart.so with the
// same C ABI as the calls ncclbench makes. "Device" memory is host memory.
// Ranks may live in separate processes: rank 0 of a communicator gathers
// every rank's contribution over TCP, computes the results and sends each
// rank its share. Rank 0 listens on loopback, or on the IPv4 address of the
// interface NCCL_SOCKET_IFNAME names (as NCCL reads it: a comma-separated
// list of name prefixes, "=" for exact names), so ranks may span hosts; the
// log's nNodes and localRanks count the hosts the ranks said they are on.
// It is NOT a performance model.
//
// It is as hostile as real NCCL where a benchmark can go wrong:
//  - Asynchronous streams. An NCCL call only queues work; a worker thread per
//    stream runs it later, and cudaStreamQuery says cudaErrorNotReady until
//    then. cudaMemcpy/cudaMemset/cudaFree wait for every stream, as the
//    legacy default stream does.
//  - Communicators are freed by ncclCommAbort and ncclCommDestroy: their
//    memory is made inaccessible, so any later call with one crashes.
//  - Data moves in steps: each step reads part of the send buffer and writes
//    part of the receive buffer. Collectives go chunk by chunk, alltoall in
//    pairwise-exchange order, and rank 0's sends lag one chunk behind its
//    receives (ranks are never in lockstep), so aliased send and receive
//    buffers give wrong data where real NCCL's result is undefined.
//  - A failed operation sets the communicator's asynchronous error and leaves
//    its stream busy until the communicator is aborted, as a real kernel
//    waiting for a dead peer does.
//  - A stream takes at most 1024 queued operations. Then a call on a blocking
//    communicator waits inside NCCL; on a non-blocking one (created with
//    ncclCommInitRankConfig and blocking=0, which itself returns
//    ncclInProgress and finishes in the background) it returns
//    ncclInProgress, and ncclCommGetAsyncError says when it is done.
//  - cudaFree of memory that a live communicator used aborts the process
//    (NCCL may still hold it: free buffers after ncclCommDestroy).
//
// Build: gcc -shared -fPIC -O2 -o libnccl.so.2 fakenccl.c -lpthread
//
// Knobs (environment; RANK is a communicator rank, N counts the operations
// each rank's communicator ran before, from 0):
//   RDMABENCH_FAKE_NCCL_VERSION     version code reported (default 22901)
//   RDMABENCH_FAKE_NCCL_GPUS        device count (default 8; 0 = "no GPU")
//   RDMABENCH_FAKE_NCCL_TRANSPORT   transport printed in the INFO log
//                                   (default SHM/direct/direct)
//   RDMABENCH_FAKE_NCCL_CORRUPT     RANK[,RANK...] flip a high bit of the
//                                   first element they receive in every operation
//   RDMABENCH_FAKE_NCCL_TIMEOUT     seconds to wait for peers (default 60)
//   RDMABENCH_FAKE_NCCL_LATENCY_US  a stream starts each operation this long
//                                   after it was queued (default 100)
//   RDMABENCH_FAKE_NCCL_HANG        RANK[:N] operation N of RANK never
//                                   finishes (until the communicator is aborted)
//   RDMABENCH_FAKE_NCCL_ASYNC_ERROR RANK[:N] operation N of RANK fails with an
//                                   asynchronous ncclRemoteError
//   RDMABENCH_FAKE_NCCL_SLOW        RANK:MS each operation holds RANK's
//                                   stream MS milliseconds (a fraction allowed:
//                                   2:0.5) after its data moved
//   RDMABENCH_FAKE_NCCL_PACE_MS     MS every rank's stream holds each operation
//                                   MS milliseconds after its data moved (on top
//                                   of SLOW): iterations long against a host's
//                                   scheduling hiccups, for timing tests
//   RDMABENCH_FAKE_NCCL_STALL       RANK:PERIOD_MS:STALL_MS RANK's stream stalls
//                                   STALL_MS more after the data of the first
//                                   operation ending PERIOD_MS or more after the
//                                   last stall began (the first period starts at
//                                   its first operation): a process stopped for
//                                   STALL_MS every PERIOD_MS, stopped where the
//                                   others see it (after the data exchange,
//                                   never before it, where a stop holds every
//                                   rank back alike)
//   RDMABENCH_FAKE_NCCL_STALL_AT    RANK:N:MS operation N of RANK stalls MS
//                                   milliseconds more after its data moved: a
//                                   process preempted once, at a known operation
//   RDMABENCH_FAKE_NCCL_TRACE       PREFIX: each rank appends "N queued_ns
//                                   done_ns" (CLOCK_MONOTONIC) per operation
//                                   to PREFIX.RANK
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

// Marker symbol: ncclbench looks it up to label the run as "not a GPU".
int rdmabench_fake_nccl = 1;

enum { ok = 0, errCuda = 1, errSystem = 2, errInternal = 3, errArg = 4, errUsage = 5, errRemote = 6, inProgress = 7 };
enum { tInt8, tUint8, tInt32, tUint32, tInt64, tUint64, tHalf, tFloat, tDouble, tBf16, tNumTypes };
enum { oSum, oProd, oMax, oMin, oAvg, oNumOps };
enum { kInit = 1, kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAlltoAll, kSend, kRecv };
enum { cudaErrorNotReady = 600 };
// maxQueued is the depth at which a stream stops taking work, as CUDA's
// launch queue does: a blocking call waits, a non-blocking one says
// ncclInProgress until the stream has room again.
enum { nChunks = 4, maxUsed = 64, maxQueued = 1024 };

static const size_t typeSize[tNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

typedef struct { char internal[128]; } uid_t128;
typedef struct {
  char magic[8];
  uint16_t port;
  uint32_t addr; // rank 0's listening IPv4 address, network order
  uint64_t token;
} idBody;

// The leading fields of ncclConfig_t, unchanged since NCCL 2.14.
typedef struct {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
} configHead;

typedef struct comm {
  int rank, nranks, dev;
  int *fds; // root: fds[r] for r>0; others: fds[0] is the root
  volatile int aborted;
  volatile int asyncErr; // inProgress while a non-blocking init runs
  volatile int initRunning;
  int corrupt, hangAt, errAt, nonblocking;
  long ops; // operations started
  // Holds after the data moved, in microseconds: every operation's
  // (SLOW + PACE_MS), a periodic stall (STALL, the next due at stallNext
  // on CLOCK_MONOTONIC, 0 before the first operation) and a one-shot one
  // at operation stallAt (STALL_AT; -1: none).
  long long holdUs, stallPeriodUs, stallUs, stallNext, stallAtUs;
  long stallAt;
  uid_t128 id;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  void *used[maxUsed]; // allocations this communicator has read or written
  int nused;
  char err[256];
  void *lastStream; // where its last operation went
  size_t mapBytes;
  struct comm *nextLive;
} comm_t;

typedef struct {
  int kind;
  comm_t *comm;
  comm_t **commOut;
  uid_t128 id;
  int rank, nranks, nonblocking;
  const void *send;
  void *recv;
  size_t count;
  int dtype, op, root, peer;
  int dev;
  void *stream;
} op_t;

static __thread char lastErr[256];
static __thread int curDev;
static __thread int groupDepth;
static __thread op_t *queue;
static __thread int nqueue, capqueue;

static void setErr(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lastErr, sizeof lastErr, fmt, ap);
  va_end(ap);
}

static int envInt(const char *name, int def) {
  const char *s = getenv(name);
  return (s && *s) ? atoi(s) : def;
}

// envRank reads "RANK[:N]"; it returns N (or def) when RANK is rank, else -1.
static int envRank(const char *name, int rank, int def) {
  const char *s = getenv(name);
  if (!s || !*s) return -1;
  char *end;
  long r = strtol(s, &end, 10);
  if (end == s || r != rank) return -1;
  return *end == ':' ? atoi(end + 1) : def;
}

// msToUs reads a count of milliseconds, a fraction allowed, as
// microseconds; a negative or malformed one is 0.
static long long msToUs(const char *s, char **end) {
  double v = strtod(s, end);
  return v > 0 ? (long long)(v * 1000 + 0.5) : 0;
}

// envRankMs reads "RANK:MS"; it returns MS in microseconds when RANK is
// rank, else 0.
static long long envRankMs(const char *name, int rank) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long r = strtol(s, &end, 10);
  if (end == s || r != rank || *end != ':') return 0;
  return msToUs(end + 1, &end);
}

// envRankPair reads "RANK:A:MS" into *a (a count, or milliseconds in
// microseconds with aMs) and *us; it returns 0 unless RANK is rank.
static int envRankPair(const char *name, int rank, int aMs, long long *a, long long *us) {
  const char *s = getenv(name);
  if (!s || !*s) return 0;
  char *end;
  long r = strtol(s, &end, 10);
  if (end == s || r != rank || *end != ':') return 0;
  const char *p = end + 1;
  *a = aMs ? msToUs(p, &end) : strtoll(p, &end, 10);
  if (end == p || *end != ':') return 0;
  *us = msToUs(end + 1, &end);
  return 1;
}

// inList reports whether the comma-separated list s holds n.
static int inList(const char *s, int n) {
  while (s && *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s) return 0;
    if (v == n) return 1;
    s = *end == ',' ? end + 1 : NULL;
  }
  return 0;
}

static long long nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

// ---------------------------------------------------------------- logging
static pthread_mutex_t logMu = PTHREAD_MUTEX_INITIALIZER;

static int infoEnabled(void) {
  const char *d = getenv("NCCL_DEBUG");
  return d && (strcasecmp(d, "INFO") == 0 || strcasecmp(d, "TRACE") == 0);
}

static void info(int dev, const char *fmt, ...) {
  if (!infoEnabled()) return;
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  char *dot = strchr(host, '.');
  if (dot) *dot = 0;
  const char *path = getenv("NCCL_DEBUG_FILE");
  char expanded[4096];
  FILE *f = stdout;
  pthread_mutex_lock(&logMu);
  if (path && *path) {
    // NCCL expands %h to the host name and %p to the pid.
    size_t o = 0;
    for (const char *p = path; *p && o < sizeof expanded - 64; p++) {
      if (p[0] == '%' && p[1] == 'h') { o += snprintf(expanded + o, sizeof expanded - o, "%s", host); p++; }
      else if (p[0] == '%' && p[1] == 'p') { o += snprintf(expanded + o, sizeof expanded - o, "%d", getpid()); p++; }
      else expanded[o++] = *p;
    }
    expanded[o] = 0;
    f = fopen(expanded, "a");
    if (!f) f = stdout;
  }
  fprintf(f, "%s:%d:%ld [%d] NCCL INFO ", host, getpid(), (long)syscall(SYS_gettid), dev);
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fputc('\n', f);
  if (f != stdout) fclose(f); else fflush(f);
  pthread_mutex_unlock(&logMu);
}

// ---------------------------------------------------------------- memory
typedef struct alloc { char *p; size_t n; struct alloc *next; } alloc_t;
static alloc_t *allocs;
static comm_t *liveComms;
static pthread_mutex_t memMu = PTHREAD_MUTEX_INITIALIZER;

// allocOf returns the start of the cudaMalloc block holding p, or NULL.
static void *allocOf(const void *p) {
  void *base = NULL;
  pthread_mutex_lock(&memMu);
  for (alloc_t *a = allocs; a; a = a->next)
    if ((const char *)p >= a->p && (const char *)p < a->p + (a->n ? a->n : 1)) { base = a->p; break; }
  pthread_mutex_unlock(&memMu);
  return base;
}

static void markUsed(comm_t *c, const void *p) {
  void *base = p ? allocOf(p) : NULL;
  if (!base) return;
  for (int i = 0; i < c->nused; i++)
    if (c->used[i] == base) return;
  if (c->nused < maxUsed) c->used[c->nused++] = base;
}

// ---------------------------------------------------------------- streams
// An event completes, with the time, when the stream's worker reaches it:
// after everything queued before it, as cudaEventRecord's does.
typedef struct fevent {
  pthread_mutex_t mu;
  int pending;   // recorded, not yet reached
  int completed; // reached at least once
  long long at;  // when, CLOCK_MONOTONIC ns
} fevent_t;

typedef struct item {
  comm_t *comm;
  op_t *ops;
  int nops;
  fevent_t *ev; // an event mark instead of an operation
  long long queued;
  struct item *next;
} item_t;

typedef struct stream {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  item_t *head, *tail;
  int depth;
  comm_t *running;   // the communicator whose operation the worker runs now
  comm_t *stuckBy;   // a failed operation keeps the stream busy until its comm goes
  long long readyAt; // the last operation is reported done from this time on
  int quit;
  pthread_t th;
  struct stream *next;
  // Graph capture (cudaStreamBeginCapture): work is recorded, not run.
  int capturing;
  item_t *capHead, *capTail;
} stream_t;

// A CUDA graph: the items a capture recorded, queued again, copies, at
// each cudaGraphLaunch. Its executable form is the graph itself.
typedef struct fgraph {
  item_t *head;
  int items;
} fgraph_t;

enum { cudaErrorStreamCaptureUnsupported = 900, cudaErrorIllegalState = 401 };

static stream_t *streams;
static pthread_mutex_t streamsMu = PTHREAD_MUTEX_INITIALIZER;
static stream_t *defaultStream;

static int runItem(item_t *it, long long *holdUs, int *grank);
static void trace(int grank, long seq, long long queued, long long done);

static int busyLocked(stream_t *s) { return s->head || s->running || s->stuckBy || nowNs() < s->readyAt; }

static void *streamMain(void *arg) {
  stream_t *s = arg;
  long latency = envInt("RDMABENCH_FAKE_NCCL_LATENCY_US", 100);
  long seq = 0;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while ((!s->head || s->stuckBy) && !s->quit) pthread_cond_wait(&s->cv, &s->mu);
    if (s->quit && (!s->head || s->stuckBy)) break;
    item_t *it = s->head;
    s->head = it->next;
    if (!s->head) s->tail = NULL;
    s->depth--;
    if (it->ev) {
      fevent_t *ev = it->ev;
      pthread_mutex_lock(&ev->mu);
      ev->at = nowNs();
      ev->completed = 1;
      ev->pending--;
      pthread_mutex_unlock(&ev->mu);
      free(it);
      pthread_cond_broadcast(&s->cv);
      continue;
    }
    s->running = it->comm;
    pthread_mutex_unlock(&s->mu);
    long long wake = it->queued + latency * 1000;
    while (nowNs() < wake) usleep(20);
    long long hold = 0;
    int grank = 0;
    int rc = runItem(it, &hold, &grank); // the last touch of it->comm
    long long done = nowNs() + hold * 1000;
    while (nowNs() < done) usleep(200);
    pthread_mutex_lock(&s->mu);
    if (rc != ok) s->stuckBy = it->comm;
    s->readyAt = done;
    s->running = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    trace(grank, seq++, it->queued, done);
    free(it->ops);
    free(it);
    pthread_mutex_lock(&s->mu);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

static stream_t *newStream(void) {
  stream_t *s = calloc(1, sizeof *s);
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_create(&s->th, NULL, streamMain, s);
  pthread_mutex_lock(&streamsMu);
  s->next = streams;
  streams = s;
  pthread_mutex_unlock(&streamsMu);
  return s;
}

// push queues it on s; with wait, first until s has room.
static void push(stream_t *s, item_t *it, int wait) {
  pthread_mutex_lock(&s->mu);
  if (s->capturing) {
    if (s->capTail) s->capTail->next = it;
    else s->capHead = it;
    s->capTail = it;
    pthread_mutex_unlock(&s->mu);
    return;
  }
  while (wait && s->depth >= maxQueued) pthread_cond_wait(&s->cv, &s->mu);
  if (s->tail) s->tail->next = it;
  else s->head = it;
  s->tail = it;
  s->depth++;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

static int full(stream_t *s) {
  pthread_mutex_lock(&s->mu);
  int f = s->depth >= maxQueued;
  pthread_mutex_unlock(&s->mu);
  return f;
}

static void waitIdle(stream_t *s) {
  pthread_mutex_lock(&s->mu);
  while (busyLocked(s)) {
    if (s->head || s->running || s->stuckBy) pthread_cond_wait(&s->cv, &s->mu);
    else {
      pthread_mutex_unlock(&s->mu);
      usleep(100);
      pthread_mutex_lock(&s->mu);
    }
  }
  pthread_mutex_unlock(&s->mu);
}

// allStreams is the head of the stream list. New streams go in front and
// destroyed ones keep their memory, so the list can be walked unlocked.
static stream_t *allStreams(void) {
  pthread_mutex_lock(&streamsMu);
  stream_t *list = streams;
  pthread_mutex_unlock(&streamsMu);
  return list;
}

// syncAll is the legacy default stream's implicit synchronization.
static void syncAll(void) {
  for (stream_t *s = allStreams(); s; s = s->next) waitIdle(s);
}

// forget drops everything queued for c and waits until no stream runs it.
static void forget(comm_t *c) {
  for (stream_t *s = allStreams(); s; s = s->next) {
    pthread_mutex_lock(&s->mu);
    item_t **pp = &s->head, *last = NULL;
    while (*pp) {
      item_t *it = *pp;
      if (it->comm == c) {
        *pp = it->next;
        s->depth--;
        free(it->ops);
        free(it);
      } else {
        last = it;
        pp = &it->next;
      }
    }
    s->tail = last;
    while (s->running == c) pthread_cond_wait(&s->cv, &s->mu);
    if (s->stuckBy == c) s->stuckBy = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
  }
}

// ---------------------------------------------------------------- CUDA runtime
int cudaGetDeviceCount(int *n) {
  int g = envInt("RDMABENCH_FAKE_NCCL_GPUS", 8);
  if (g <= 0) { *n = 0; return 100; } // cudaErrorNoDevice
  *n = g;
  return 0;
}
int cudaSetDevice(int d) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != 0) return 100;
  if (d < 0 || d >= n) return 101; // cudaErrorInvalidDevice
  curDev = d;
  return 0;
}
int cudaGetDevice(int *d) { *d = curDev; return 0; }
int cudaMalloc(void **p, size_t n) {
  alloc_t *a = calloc(1, sizeof *a);
  *p = calloc(1, n ? n : 1);
  if (!*p || !a) { free(a); free(*p); *p = NULL; return 2; } // cudaErrorMemoryAllocation
  a->p = *p;
  a->n = n;
  pthread_mutex_lock(&memMu);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&memMu);
  return 0;
}
int cudaFree(void *p) {
  if (!p) return 0;
  syncAll();
  pthread_mutex_lock(&memMu);
  for (comm_t *c = liveComms; c; c = c->nextLive)
    for (int i = 0; i < c->nused; i++)
      if (c->used[i] == p) {
        fprintf(stderr, "fakenccl: cudaFree(%p): communicator %p (rank %d) still uses this memory; free buffers after ncclCommDestroy\n", p, (void *)c, c->rank);
        abort();
      }
  alloc_t **pp = &allocs;
  while (*pp && (*pp)->p != p) pp = &(*pp)->next;
  if (!*pp) { pthread_mutex_unlock(&memMu); return 1; } // cudaErrorInvalidValue
  alloc_t *a = *pp;
  *pp = a->next;
  pthread_mutex_unlock(&memMu);
  free(a);
  free(p);
  return 0;
}
int cudaMemcpy(void *dst, const void *src, size_t n, int kind) { (void)kind; syncAll(); memmove(dst, src, n); return 0; }
int cudaMemset(void *dst, int v, size_t n) { syncAll(); memset(dst, v, n); return 0; }
int cudaStreamCreate(void **s) { *s = newStream(); return 0; }
int cudaStreamCreateWithFlags(void **s, unsigned f) { (void)f; return cudaStreamCreate(s); }
int cudaStreamDestroy(void *p) {
  stream_t *s = p;
  if (!s) return 1;
  pthread_mutex_lock(&s->mu);
  s->quit = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->th, NULL);
  pthread_mutex_lock(&streamsMu);
  for (stream_t **pp = &streams; *pp; pp = &(*pp)->next)
    if (*pp == s) { *pp = s->next; break; }
  pthread_mutex_unlock(&streamsMu);
  // Other threads may still walk the list they copied: keep the memory.
  return 0;
}
static int capturing(stream_t *s) {
  if (!s) return 0;
  pthread_mutex_lock(&s->mu);
  int c = s->capturing;
  pthread_mutex_unlock(&s->mu);
  return c;
}
// As CUDA, a capturing stream may be neither waited for nor queried.
int cudaStreamSynchronize(void *p) {
  stream_t *s = p ? (stream_t *)p : defaultStream;
  if (capturing(s)) return cudaErrorStreamCaptureUnsupported;
  waitIdle(s);
  return 0;
}
int cudaStreamQuery(void *p) {
  stream_t *s = p ? (stream_t *)p : defaultStream;
  if (!s) return 0;
  pthread_mutex_lock(&s->mu);
  int busy = busyLocked(s), capt = s->capturing;
  pthread_mutex_unlock(&s->mu);
  if (capt) return cudaErrorStreamCaptureUnsupported;
  return busy ? cudaErrorNotReady : 0;
}
int cudaStreamBeginCapture(void *p, int mode) {
  (void)mode;
  stream_t *s = p;
  if (!s) return cudaErrorStreamCaptureUnsupported; // the legacy stream cannot be captured
  pthread_mutex_lock(&s->mu);
  int was = s->capturing;
  s->capturing = 1;
  pthread_mutex_unlock(&s->mu);
  return was ? cudaErrorIllegalState : 0;
}
int cudaStreamEndCapture(void *p, void **graph) {
  stream_t *s = p;
  if (!s || !graph) return 1;
  pthread_mutex_lock(&s->mu);
  if (!s->capturing) {
    pthread_mutex_unlock(&s->mu);
    return cudaErrorIllegalState;
  }
  fgraph_t *g = calloc(1, sizeof *g);
  g->head = s->capHead;
  for (item_t *it = g->head; it; it = it->next) g->items++;
  s->capHead = s->capTail = NULL;
  s->capturing = 0;
  pthread_mutex_unlock(&s->mu);
  *graph = g;
  return 0;
}
int cudaGraphInstantiateWithFlags(void **exec, void *graph, unsigned long long flags) {
  (void)flags;
  if (!exec || !graph) return 1;
  *exec = graph;
  return 0;
}
// cudaGraphLaunch queues a copy of every recorded item, in order, as new
// work: each collective runs again, matched across ranks by its order.
int cudaGraphLaunch(void *exec, void *st) {
  fgraph_t *g = exec;
  stream_t *s = st ? (stream_t *)st : defaultStream;
  if (!g || !s) return 1;
  long long t = nowNs();
  for (item_t *it = g->head; it; it = it->next) {
    item_t *c = calloc(1, sizeof *c);
    c->comm = it->comm;
    c->nops = it->nops;
    c->ev = it->ev;
    c->queued = t;
    if (it->ops) {
      c->ops = malloc(sizeof(op_t) * (size_t)it->nops);
      memcpy(c->ops, it->ops, sizeof(op_t) * (size_t)it->nops);
    }
    if (c->ev) {
      pthread_mutex_lock(&c->ev->mu);
      c->ev->pending++;
      pthread_mutex_unlock(&c->ev->mu);
    }
    if (c->comm) c->comm->lastStream = s;
    push(s, c, 1);
  }
  return 0;
}
int cudaGraphExecDestroy(void *exec) { return exec ? 0 : 1; }
int cudaGraphDestroy(void *graph) {
  fgraph_t *g = graph;
  if (!g) return 1;
  for (item_t *it = g->head, *next; it; it = next) {
    next = it->next;
    if (it->ev) {
      pthread_mutex_lock(&it->ev->mu);
      it->ev->pending--;
      pthread_mutex_unlock(&it->ev->mu);
    }
    free(it->ops);
    free(it);
  }
  free(g);
  return 0;
}
int cudaDeviceSynchronize(void) { syncAll(); return 0; }
int cudaEventCreate(void **e) {
  fevent_t *ev = calloc(1, sizeof *ev);
  pthread_mutex_init(&ev->mu, NULL);
  *e = ev;
  return 0;
}
int cudaEventCreateWithFlags(void **e, unsigned f) { (void)f; return cudaEventCreate(e); }
int cudaEventDestroy(void *e) {
  fevent_t *ev = e;
  if (!ev) return 1;
  pthread_mutex_lock(&ev->mu);
  int pending = ev->pending;
  pthread_mutex_unlock(&ev->mu);
  if (pending) return 1; // a stream still holds it (real CUDA defers; tests must not)
  free(ev);
  return 0;
}
int cudaEventRecord(void *e, void *st) {
  fevent_t *ev = e;
  stream_t *s = st ? (stream_t *)st : defaultStream;
  if (!ev || !s) return 1; // cudaErrorInvalidValue
  pthread_mutex_lock(&ev->mu);
  ev->pending++;
  pthread_mutex_unlock(&ev->mu);
  item_t *it = calloc(1, sizeof *it);
  it->ev = ev;
  it->queued = nowNs();
  push(s, it, 1);
  return 0;
}
int cudaEventQuery(void *e) {
  fevent_t *ev = e;
  pthread_mutex_lock(&ev->mu);
  int r = ev->pending ? cudaErrorNotReady : 0;
  pthread_mutex_unlock(&ev->mu);
  return r;
}
int cudaEventElapsedTime(float *ms, void *a, void *b) {
  fevent_t *x = a, *y = b;
  if (!x || !y) return 1;
  // One event against itself is 0 ms, as in CUDA (and locked once).
  pthread_mutex_lock(&x->mu);
  if (y != x) pthread_mutex_lock(&y->mu);
  int ready = !x->pending && !y->pending, done = x->completed && y->completed;
  long long d = y->at - x->at;
  if (y != x) pthread_mutex_unlock(&y->mu);
  pthread_mutex_unlock(&x->mu);
  if (!ready) return cudaErrorNotReady;
  if (!done) return 400; // cudaErrorInvalidResourceHandle: never recorded
  *ms = (float)((double)d / 1e6);
  return 0;
}
int cudaRuntimeGetVersion(int *v) { *v = 0; return 0; }
int cudaDriverGetVersion(int *v) { *v = 0; return 0; }
int cudaGetLastError(void) { return 0; }
const char *cudaGetErrorString(int e) {
  switch (e) {
  case 0: return "no error";
  case 1: return "invalid argument";
  case 2: return "out of memory";
  case 100: return "no CUDA-capable device is detected";
  case 101: return "invalid device ordinal";
  case cudaErrorNotReady: return "device not ready";
  default: return "unknown error";
  }
}
// cudaDeviceProp starts with char name[256]; nothing else is filled in.
int cudaGetDeviceProperties(void *prop, int dev) {
  (void)dev;
  memset(prop, 0, 256);
  strcpy((char *)prop, "fake-cpu");
  return 0;
}
int cudaGetDeviceProperties_v2(void *prop, int dev) { return cudaGetDeviceProperties(prop, dev); }
int cudaDeviceGetPCIBusId(char *buf, int len, int dev) {
  snprintf(buf, len, "0000:%02x:00.0", dev);
  return 0;
}

// ---------------------------------------------------------------- sockets
static int timeoutSec(void) { return envInt("RDMABENCH_FAKE_NCCL_TIMEOUT", 60); }

static int writeAll(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static int readAll(int fd, void *buf, size_t n) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

typedef struct lst { uint64_t token; int fd; struct lst *next; } lst_t;
static lst_t *listeners;
static pthread_mutex_t lstMu = PTHREAD_MUTEX_INITIALIZER;

// ifMatches: NCCL_SOCKET_IFNAME's rule, a comma-separated list of name
// prefixes, or of exact names after a leading "=".
static int ifMatches(const char *spec, const char *name) {
  int exact = spec[0] == '=';
  if (exact) spec++;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
    if (exact ? strcmp(name, tok) == 0 : strncmp(name, tok, strlen(tok)) == 0) return 1;
  return 0;
}

// bootstrapIf picks the interface rank 0 listens on: loopback unless
// NCCL_SOCKET_IFNAME names others (a leading "^", exclusion, is refused).
static int bootstrapIf(char name[IFNAMSIZ], struct in_addr *addr) {
  const char *spec = getenv("NCCL_SOCKET_IFNAME");
  if (!spec || !*spec) {
    snprintf(name, IFNAMSIZ, "lo");
    addr->s_addr = htonl(INADDR_LOOPBACK);
    return ok;
  }
  if (spec[0] == '^') {
    setErr("NCCL_SOCKET_IFNAME=%s: this test library does not take exclusions", spec);
    return errArg;
  }
  struct ifaddrs *ifs, *i;
  if (getifaddrs(&ifs) != 0) {
    setErr("getifaddrs: %s", strerror(errno));
    return errSystem;
  }
  int found = 0;
  for (i = ifs; i && !found; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !ifMatches(spec, i->ifa_name)) continue;
    snprintf(name, IFNAMSIZ, "%s", i->ifa_name);
    *addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
    found = 1;
  }
  freeifaddrs(ifs);
  if (!found) {
    setErr("Bootstrap : no socket interface found (NCCL_SOCKET_IFNAME=%s)", spec);
    return errSystem;
  }
  return ok;
}

int ncclGetUniqueId(uid_t128 *id) {
  char ifName[IFNAMSIZ];
  struct in_addr ifAddr;
  int rc = bootstrapIf(ifName, &ifAddr);
  if (rc != ok) return rc;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) { setErr("socket: %s", strerror(errno)); return errSystem; }
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr = ifAddr;
  socklen_t al = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4096) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
    setErr("listen on %s (%s): %s", inet_ntoa(ifAddr), ifName, strerror(errno));
    close(fd);
    return errSystem;
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  idBody b;
  memcpy(b.magic, "RBFAKE03", 8);
  b.port = ntohs(a.sin_port);
  b.addr = ifAddr.s_addr;
  b.token = ((uint64_t)getpid() << 32) ^ (uint64_t)tv.tv_usec ^ ((uint64_t)tv.tv_sec << 20) ^ (uint64_t)fd;
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &b, sizeof b);
  lst_t *l = malloc(sizeof *l);
  l->token = b.token;
  l->fd = fd;
  pthread_mutex_lock(&lstMu);
  l->next = listeners;
  listeners = l;
  pthread_mutex_unlock(&lstMu);
  return ok;
}

// hostHash tells rank 0 which ranks share a host (FNV-1a of the hostname).
static uint64_t hostHash(void) {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  uint64_t x = 1469598103934665603ULL;
  for (const char *p = h; *p; p++) x = (x ^ (unsigned char)*p) * 1099511628211ULL;
  return x;
}

static int takeListener(uint64_t token) {
  pthread_mutex_lock(&lstMu);
  int fd = -1;
  for (lst_t **pp = &listeners; *pp; pp = &(*pp)->next) {
    if ((*pp)->token == token) {
      lst_t *l = *pp;
      fd = l->fd;
      *pp = l->next;
      free(l);
      break;
    }
  }
  pthread_mutex_unlock(&lstMu);
  return fd;
}

static void setTimeouts(int fd) {
  struct timeval tv = {timeoutSec(), 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int commFail(comm_t *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err, sizeof c->err, fmt, ap);
  va_end(ap);
  memcpy(lastErr, c->err, sizeof lastErr);
  c->asyncErr = code;
  return code;
}

// newComm maps the communicator on pages of its own, so that freeing it
// (mprotect, never reused) makes every later use crash.
static comm_t *newComm(int rank, int nranks, int dev) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE), bytes = (sizeof(comm_t) + pg - 1) / pg * pg;
  comm_t *c = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (c == MAP_FAILED) return NULL;
  memset(c, 0, sizeof *c);
  c->mapBytes = bytes;
  c->rank = rank;
  c->nranks = nranks;
  c->dev = dev;
  c->fds = malloc(sizeof(int) * (size_t)nranks);
  for (int i = 0; i < nranks; i++) c->fds[i] = -1;
  pthread_mutex_init(&c->mu, NULL);
  pthread_cond_init(&c->cv, NULL);
  c->corrupt = inList(getenv("RDMABENCH_FAKE_NCCL_CORRUPT"), rank);
  c->hangAt = envRank("RDMABENCH_FAKE_NCCL_HANG", rank, 0);
  c->errAt = envRank("RDMABENCH_FAKE_NCCL_ASYNC_ERROR", rank, 0);
  c->holdUs = envRankMs("RDMABENCH_FAKE_NCCL_SLOW", rank) + 1000LL * envInt("RDMABENCH_FAKE_NCCL_PACE_MS", 0);
  if (!envRankPair("RDMABENCH_FAKE_NCCL_STALL", rank, 1, &c->stallPeriodUs, &c->stallUs) || c->stallPeriodUs <= 0)
    c->stallPeriodUs = c->stallUs = 0;
  long long at = -1;
  if (!envRankPair("RDMABENCH_FAKE_NCCL_STALL_AT", rank, 0, &at, &c->stallAtUs) || at < 0) at = -1;
  c->stallAt = (long)at;
  pthread_mutex_lock(&memMu);
  c->nextLive = liveComms;
  liveComms = c;
  pthread_mutex_unlock(&memMu);
  return c;
}

// freeComm is the end of a communicator, as in NCCL: its memory goes away.
static void freeComm(comm_t *c) {
  pthread_mutex_lock(&memMu);
  for (comm_t **pp = &liveComms; *pp; pp = &(*pp)->nextLive)
    if (*pp == c) { *pp = c->nextLive; break; }
  pthread_mutex_unlock(&memMu);
  for (int i = 0; i < c->nranks; i++)
    if (c->fds[i] >= 0) close(c->fds[i]);
  free(c->fds);
  mprotect(c, c->mapBytes, PROT_NONE);
}

static int doInit(comm_t *c) {
  idBody b;
  memcpy(&b, c->id.internal, sizeof b);
  if (memcmp(b.magic, "RBFAKE03", 8) != 0) return commFail(c, errArg, "unique id was not made by this library");
  long long deadline = nowNs() + (long long)timeoutSec() * 1000000000LL;
  // Every rank says which host it is on; rank 0 answers with the number
  // of hosts and of ranks on the asker's host, and its place among them.
  uint64_t myHost = hostHash();
  int nNodes = 1, localRanks = c->nranks, localRank = c->rank;
  if (c->rank == 0) {
    int lfd = takeListener(b.token);
    if (lfd < 0) return commFail(c, errUsage, "rank 0 must run in the process that called ncclGetUniqueId");
    uint64_t *hosts = calloc((size_t)c->nranks, sizeof *hosts);
    if (!hosts) { close(lfd); return commFail(c, errSystem, "out of memory"); }
    hosts[0] = myHost;
    for (int joined = 1; joined < c->nranks;) {
      if (c->aborted) { close(lfd); free(hosts); return commFail(c, errRemote, "communicator aborted during init"); }
      if (nowNs() > deadline) { close(lfd); free(hosts); return commFail(c, errRemote, "timeout waiting for %d ranks to join", c->nranks - joined); }
      struct pollfd p = {lfd, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) continue;
      setTimeouts(fd);
      uint64_t hello[3];
      if (readAll(fd, hello, sizeof hello) != 0 || hello[0] != b.token || hello[1] == 0 || hello[1] >= (uint64_t)c->nranks ||
          c->fds[hello[1]] >= 0) {
        close(fd);
        continue;
      }
      c->fds[hello[1]] = fd;
      hosts[hello[1]] = hello[2];
      joined++;
    }
    close(lfd);
    nNodes = 0;
    for (int r = 0; r < c->nranks; r++) {
      int first = 1;
      for (int q = 0; q < r; q++) first &= hosts[q] != hosts[r];
      nNodes += first;
    }
    for (int r = 0; r < c->nranks; r++) {
      uint64_t ack[4] = {b.token, (uint64_t)nNodes, 0, 0};
      for (int q = 0; q < c->nranks; q++) {
        if (hosts[q] != hosts[r]) continue;
        if (q < r) ack[3]++;
        ack[2]++;
      }
      if (r == 0) {
        localRanks = (int)ack[2], localRank = 0;
        continue;
      }
      if (writeAll(c->fds[r], ack, sizeof ack) != 0) { free(hosts); return commFail(c, errRemote, "rank %d went away during init", r); }
    }
    free(hosts);
  } else {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = b.addr;
    a.sin_port = htons(b.port);
    int fd = -1;
    for (;;) {
      if (c->aborted) return commFail(c, errRemote, "communicator aborted during init");
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
      close(fd);
      fd = -1;
      if (nowNs() > deadline) return commFail(c, errRemote, "cannot reach rank 0 at %s:%d", inet_ntoa(a.sin_addr), b.port);
      usleep(20000);
    }
    setTimeouts(fd);
    c->fds[0] = fd;
    uint64_t hello[3] = {b.token, (uint64_t)c->rank, myHost}, ack[4] = {0};
    if (writeAll(fd, hello, sizeof hello) != 0 || readAll(fd, ack, sizeof ack) != 0 || ack[0] != b.token)
      return commFail(c, errRemote, "rank 0 closed the connection during init");
    nNodes = (int)ack[1], localRanks = (int)ack[2], localRank = (int)ack[3];
  }
  char ifName[IFNAMSIZ];
  struct in_addr ifAddr;
  if (bootstrapIf(ifName, &ifAddr) != ok) return commFail(c, errSystem, "%s", lastErr);
  char ifAddrText[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &ifAddr, ifAddrText, sizeof ifAddrText);
  const char *tr = getenv("RDMABENCH_FAKE_NCCL_TRANSPORT");
  if (!tr || !*tr) tr = "SHM/direct/direct";
  int v = envInt("RDMABENCH_FAKE_NCCL_VERSION", 22901);
  if (c->rank == 0) info(c->dev, "NCCL version %d.%d.%d+fake (rdmabench test library, not a GPU)", v / 10000, (v / 100) % 100, v % 100);
  info(c->dev, "Bootstrap : Using %s:%s<0>", ifName, ifAddrText);
  info(c->dev, "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.");
  info(c->dev, "NET/Socket : Using [0]%s:%s<0>", ifName, ifAddrText);
  info(c->dev, "Using network Socket");
  info(c->dev, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", (void *)c, c->rank, c->nranks, nNodes, localRanks, localRank);
  if (c->nranks > 1) {
    int next = (c->rank + 1) % c->nranks;
    int isNet = strncmp(tr, "NET/", 4) == 0;
    info(c->dev, "Channel 00/0 : %d[%d] -> %d[%d]%s via %s", c->rank, c->rank, next, next, isNet ? " [send]" : "", tr);
  }
  info(c->dev, "Connected all rings");
  info(c->dev, "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d - Init COMPLETE", (void *)c, c->rank, c->nranks, c->dev);
  return ok;
}

static void *initMain(void *arg) {
  comm_t *c = arg;
  int rc = doInit(c);
  pthread_mutex_lock(&c->mu);
  if (rc == ok) c->asyncErr = ok;
  c->initRunning = 0;
  pthread_cond_broadcast(&c->cv);
  pthread_mutex_unlock(&c->mu);
  return NULL;
}

// ---------------------------------------------------------------- arithmetic
static float halfToFloat(uint16_t h) {
  uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0) {
    if (man == 0) bits = sign;
    else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((man & 0x400) == 0) { man <<= 1; exp--; }
      man &= 0x3ff;
      bits = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 31) bits = sign | 0x7f800000 | (man << 13);
  else bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t floatToHalf(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return (uint16_t)(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return (uint16_t)sign;
    man |= 0x800000;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
  return (uint16_t)(sign | h);
}

static float bf16ToFloat(uint16_t b) {
  uint32_t x = (uint32_t)b << 16;
  float f;
  memcpy(&f, &x, 4);
  return f;
}

static uint16_t floatToBf16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

#define INT_REDUCE(T)                                                            \
  {                                                                              \
    for (size_t i = 0; i < count; i++) {                                         \
      T acc = ((const T *)in[0])[i];                                             \
      for (int r = 1; r < n; r++) {                                              \
        T v = ((const T *)in[r])[i];                                             \
        switch (op) {                                                            \
        case oSum: case oAvg: acc = (T)(acc + v); break;                         \
        case oProd: acc = (T)(acc * v); break;                                   \
        case oMax: acc = v > acc ? v : acc; break;                               \
        case oMin: acc = v < acc ? v : acc; break;                               \
        }                                                                        \
      }                                                                          \
      if (op == oAvg) acc = (T)(acc / (T)n);                                     \
      ((T *)out)[i] = acc;                                                       \
    }                                                                            \
  }

static double loadF(const void *p, size_t i, int t) {
  switch (t) {
  case tHalf: return halfToFloat(((const uint16_t *)p)[i]);
  case tBf16: return bf16ToFloat(((const uint16_t *)p)[i]);
  case tFloat: return ((const float *)p)[i];
  default: return ((const double *)p)[i];
  }
}

static void storeF(void *p, size_t i, int t, double v) {
  switch (t) {
  case tHalf: ((uint16_t *)p)[i] = floatToHalf((float)v); break;
  case tBf16: ((uint16_t *)p)[i] = floatToBf16((float)v); break;
  case tFloat: ((float *)p)[i] = (float)v; break;
  default: ((double *)p)[i] = v; break;
  }
}

static void reduceInto(void *out, const void **in, int n, size_t count, int t, int op) {
  switch (t) {
  case tInt8: INT_REDUCE(int8_t) return;
  case tUint8: INT_REDUCE(uint8_t) return;
  case tInt32: INT_REDUCE(int32_t) return;
  case tUint32: INT_REDUCE(uint32_t) return;
  case tInt64: INT_REDUCE(int64_t) return;
  case tUint64: INT_REDUCE(uint64_t) return;
  default: break;
  }
  for (size_t i = 0; i < count; i++) {
    double acc = loadF(in[0], i, t);
    for (int r = 1; r < n; r++) {
      double v = loadF(in[r], i, t);
      switch (op) {
      case oSum: case oAvg: acc += v; break;
      case oProd: acc *= v; break;
      case oMax: acc = v > acc ? v : acc; break;
      case oMin: acc = v < acc ? v : acc; break;
      }
    }
    if (op == oAvg) acc /= n;
    storeF(out, i, t, acc);
  }
}

// ---------------------------------------------------------------- rounds
// A round is one rank's list of operations on one communicator (a single call
// or everything queued between ncclGroupStart and ncclGroupEnd). Ranks first
// send rank 0 their operations; rank 0 checks that they match and answers
// with the number of steps. In every step each rank sends the parts of its
// send buffers that step reads, and rank 0 answers with the parts of the
// receive buffers that step writes.
typedef struct {
  int32_t kind, dtype, op, root, peer, pad;
  uint64_t count;
} wireOp;

typedef struct {
  int32_t code, steps;
  uint64_t bytes;
  char msg[192];
} status_t;

typedef struct { size_t off, len; } slice_t;

static int isColl(int kind) { return kind != kSend && kind != kRecv; }

static int stepsOf(const wireOp *w, int n) {
  switch (w->kind) {
  case kAlltoAll: return n;
  case kSend: case kRecv: return nChunks + 1;
  default: return nChunks;
  }
}

// lag: rank 0's sends run one step behind everything else.
static int lag(int rank) { return rank == 0 ? 1 : 0; }

// slicesOf lists the byte ranges of the send (dir 0) or receive (dir 1)
// buffer that operation w of rank r touches in step t. At most n slices.
static int slicesOf(const wireOp *w, int r, int n, int t, int dir, slice_t *out) {
  size_t ts = typeSize[w->dtype], c = (size_t)w->count;
  int k = t;
  if (w->kind == kSend) k = t - lag(r);
  if (w->kind == kRecv) k = t - lag(w->peer);
  size_t lo = 0, len = 0;
  if (k >= 0 && k < nChunks) {
    lo = c * (size_t)k / nChunks;
    len = c * (size_t)(k + 1) / nChunks - lo;
  }
  int ns = 0;
#define SL(o, l) do { if ((l) > 0) { out[ns].off = (o) * ts; out[ns].len = (l) * ts; ns++; } } while (0)
  switch (w->kind) {
  case kAllReduce: SL(lo, len); break;
  case kReduce: if (dir == 0 || r == w->root) SL(lo, len); break;
  case kBroadcast: if (dir == 1 || r == w->root) SL(lo, len); break;
  case kAllGather:
    if (dir == 0) SL(lo, len);
    else for (int p = 0; p < n; p++) SL((size_t)p * c + lo, len);
    break;
  case kReduceScatter:
    if (dir == 1) SL(lo, len);
    else for (int p = 0; p < n; p++) SL((size_t)p * c + lo, len);
    break;
  case kAlltoAll:
    if (t < n) SL((size_t)((dir == 0 ? r + t : r - t + n) % n) * c, c);
    break;
  case kSend: if (dir == 0) SL(lo, len); break;
  case kRecv: if (dir == 1) SL(lo, len); break;
  }
#undef SL
  return ns;
}

static size_t bytesOf(const wireOp *w, int r, int n, int t, int dir, slice_t *tmp) {
  size_t b = 0;
  int ns = slicesOf(w, r, n, t, dir, tmp);
  for (int i = 0; i < ns; i++) b += tmp[i].len;
  return b;
}

// stepIO copies this rank's inputs of step t into buf (dir 0) or its outputs
// from buf into the receive buffers (dir 1).
static void stepIO(comm_t *c, op_t *ops, const wireOp *w, int nops, int t, int dir, char *buf, slice_t *tmp) {
  size_t o = 0;
  for (int i = 0; i < nops; i++) {
    int ns = slicesOf(&w[i], c->rank, c->nranks, t, dir, tmp);
    for (int j = 0; j < ns; j++) {
      if (dir == 0) memcpy(buf + o, (const char *)ops[i].send + tmp[j].off, tmp[j].len);
      else {
        memcpy((char *)ops[i].recv + tmp[j].off, buf + o, tmp[j].len);
        if (c->corrupt && tmp[j].off == 0) ((unsigned char *)ops[i].recv)[typeSize[w[i].dtype] - 1] ^= 0x40;
      }
      o += tmp[j].len;
    }
  }
}

static size_t stepBytes(const wireOp *w, int nops, int r, int n, int t, int dir, size_t *offs, slice_t *tmp) {
  size_t o = 0;
  for (int i = 0; i < nops; i++) {
    if (offs) offs[i] = o;
    o += bytesOf(&w[i], r, n, t, dir, tmp);
  }
  return o;
}

// plan is rank 0's view of a round: every rank's operations, which
// collective of each rank is the j-th, and which send feeds each receive.
typedef struct {
  int n, ncoll, steps;
  int *nops;
  wireOp **w;
  int **coll;  // coll[r][j]: index of rank r's j-th collective
  int **match; // match[r][i]: for a receive, the index of the send at its peer
} plan_t;

static void freePlan(plan_t *p) {
  for (int r = 0; r < p->n; r++) {
    if (p->w) free(p->w[r]);
    if (p->coll) free(p->coll[r]);
    if (p->match) free(p->match[r]);
  }
  free(p->w); free(p->coll); free(p->match); free(p->nops);
}

static int checkPlan(plan_t *p, char *msg, size_t msglen) {
  int n = p->n;
  p->ncoll = -1;
  p->steps = 0;
  for (int r = 0; r < n; r++) {
    int k = 0;
    for (int i = 0; i < p->nops[r]; i++) {
      const wireOp *x = &p->w[r][i];
      if (x->kind < kAllReduce || x->kind > kRecv || x->dtype < 0 || x->dtype >= tNumTypes || x->op < 0 || x->op >= oNumOps) {
        snprintf(msg, msglen, "rank %d sent a malformed operation", r);
        return errInternal;
      }
      if ((x->kind == kSend || x->kind == kRecv) && (x->peer < 0 || x->peer >= n)) {
        snprintf(msg, msglen, "rank %d: invalid peer %d", r, x->peer);
        return errArg;
      }
      k += isColl(x->kind);
      int s = stepsOf(x, n);
      if (s > p->steps) p->steps = s;
    }
    if (p->ncoll >= 0 && k != p->ncoll) {
      snprintf(msg, msglen, "ranks issued different numbers of collectives (%d vs %d)", p->ncoll, k);
      return errUsage;
    }
    p->ncoll = k;
  }
  p->coll = calloc((size_t)n, sizeof(int *));
  p->match = calloc((size_t)n, sizeof(int *));
  for (int r = 0; r < n; r++) {
    p->coll[r] = calloc((size_t)p->ncoll + 1, sizeof(int));
    p->match[r] = calloc((size_t)p->nops[r] + 1, sizeof(int));
    for (int i = 0, j = 0; i < p->nops[r]; i++)
      if (isColl(p->w[r][i].kind)) p->coll[r][j++] = i;
  }
  for (int j = 0; j < p->ncoll; j++)
    for (int r = 1; r < n; r++) {
      const wireOp *a = &p->w[0][p->coll[0][j]], *b = &p->w[r][p->coll[r][j]];
      if (a->kind != b->kind || a->count != b->count || a->dtype != b->dtype || a->op != b->op || a->root != b->root) {
        snprintf(msg, msglen, "rank %d called a different collective than rank 0", r);
        return errUsage;
      }
    }
  // Point-to-point: the k-th recv at r from p matches the k-th send at p to r.
  for (int r = 0; r < n; r++)
    for (int i = 0; i < p->nops[r]; i++) {
      const wireOp *x = &p->w[r][i];
      if (x->kind != kRecv) continue;
      int q = x->peer, k = 0, found = -1;
      for (int m = 0; m < i; m++) k += (p->w[r][m].kind == kRecv && p->w[r][m].peer == q);
      for (int s = 0; s < p->nops[q] && found < 0; s++) {
        const wireOp *y = &p->w[q][s];
        if (y->kind == kSend && y->peer == r && k-- == 0) found = s;
      }
      if (found < 0) {
        snprintf(msg, msglen, "recv at rank %d from %d has no matching send (every rank must take part in each group)", r, q);
        return errUsage;
      }
      const wireOp *y = &p->w[q][found];
      if (y->count * typeSize[y->dtype] != x->count * typeSize[x->dtype]) {
        snprintf(msg, msglen, "send %d->%d has %llu bytes, recv expects %llu", q, r, (unsigned long long)(y->count * typeSize[y->dtype]),
                 (unsigned long long)(x->count * typeSize[x->dtype]));
        return errUsage;
      }
      p->match[r][i] = found;
    }
  return ok;
}

// computeStep fills out[r] (laid out as stepBytes says) from in[r].
static void computeStep(plan_t *p, int t, char **in, size_t **inOff, char **out, size_t **outOff, slice_t *tmp) {
  int n = p->n;
  const void **parts = malloc(sizeof(void *) * (size_t)n);
  for (int j = 0; j < p->ncoll; j++) {
    const wireOp *a = &p->w[0][p->coll[0][j]];
    size_t ts = typeSize[a->dtype];
#define IN(r) (in[r] + inOff[r][p->coll[r][j]])
#define OUT(r) (out[r] + outOff[r][p->coll[r][j]])
    size_t len = bytesOf(a, 0, n, t, 0, tmp); // one rank's input this step
    switch (a->kind) {
    case kAllReduce:
    case kReduce:
      if (len == 0) break;
      for (int r = 0; r < n; r++) parts[r] = IN(r);
      if (a->kind == kReduce) reduceInto(OUT(a->root), parts, n, len / ts, a->dtype, a->op);
      else {
        reduceInto(OUT(0), parts, n, len / ts, a->dtype, a->op);
        for (int r = 1; r < n; r++) memcpy(OUT(r), OUT(0), len);
      }
      break;
    case kBroadcast: {
      size_t l = bytesOf(a, a->root, n, t, 0, tmp);
      for (int r = 0; r < n; r++) memcpy(OUT(r), IN(a->root), l);
      break;
    }
    case kAllGather:
      for (int r = 0; r < n; r++)
        for (int q = 0; q < n; q++) memcpy(OUT(r) + (size_t)q * len, IN(q), len);
      break;
    case kReduceScatter: {
      size_t part = len / (size_t)n;
      if (part == 0) break;
      for (int r = 0; r < n; r++) {
        for (int q = 0; q < n; q++) parts[q] = IN(q) + (size_t)r * part;
        reduceInto(OUT(r), parts, n, part / ts, a->dtype, a->op);
      }
      break;
    }
    case kAlltoAll:
      for (int r = 0; r < n; r++) memcpy(OUT(r), IN((r - t + n) % n), len);
      break;
    }
#undef IN
#undef OUT
  }
  free(parts);
  for (int r = 0; r < n; r++)
    for (int i = 0; i < p->nops[r]; i++) {
      const wireOp *x = &p->w[r][i];
      if (x->kind != kRecv) continue;
      size_t l = bytesOf(x, r, n, t, 1, tmp);
      if (l) memcpy(out[r] + outOff[r][i], in[x->peer] + inOff[x->peer][p->match[r][i]], l);
    }
}

static int sendStatus(int fd, int code, int steps, uint64_t bytes, const char *msg) {
  status_t s = {code, steps, bytes, {0}};
  if (msg) snprintf(s.msg, sizeof s.msg, "%s", msg);
  return writeAll(fd, &s, sizeof s);
}

static int lost(comm_t *c, int r) {
  if (c->aborted) return commFail(c, errRemote, "communicator aborted");
  if (r == 0) return commFail(c, errRemote, "lost connection to rank 0 (peer process died?)");
  return commFail(c, errRemote, "lost connection to rank %d (peer process died?)", r);
}

static wireOp *describe(op_t *ops, int nops) {
  wireOp *w = calloc((size_t)nops + 1, sizeof *w);
  for (int i = 0; i < nops; i++) {
    wireOp x = {ops[i].kind, ops[i].dtype, ops[i].op, ops[i].root, ops[i].peer, 0, ops[i].count};
    w[i] = x;
  }
  return w;
}

static int runPeer(comm_t *c, op_t *ops, int nops) {
  int fd = c->fds[0], rc = ok;
  wireOp *w = describe(ops, nops);
  slice_t *tmp = malloc(sizeof(slice_t) * (size_t)c->nranks);
  char *buf = NULL;
  uint64_t hdr = (uint64_t)nops;
  status_t st;
  if (writeAll(fd, &hdr, sizeof hdr) != 0 || writeAll(fd, w, sizeof(wireOp) * (size_t)nops) != 0 || readAll(fd, &st, sizeof st) != 0) {
    rc = lost(c, 0);
    goto out;
  }
  if (st.code != ok) { rc = commFail(c, st.code, "%.*s", (int)sizeof st.msg, st.msg); goto out; }
  for (int t = 0; t < st.steps; t++) {
    uint64_t nin = stepBytes(w, nops, c->rank, c->nranks, t, 0, NULL, tmp), nout = stepBytes(w, nops, c->rank, c->nranks, t, 1, NULL, tmp);
    buf = realloc(buf, (nin > nout ? nin : nout) + 1);
    stepIO(c, ops, w, nops, t, 0, buf, tmp);
    status_t s;
    if (writeAll(fd, buf, nin) != 0 || readAll(fd, &s, sizeof s) != 0) { rc = lost(c, 0); goto out; }
    if (s.code != ok) { rc = commFail(c, s.code, "rank 0: %.*s", (int)sizeof s.msg, s.msg); goto out; }
    if (s.bytes != nout || readAll(fd, buf, nout) != 0) { rc = lost(c, 0); goto out; }
    stepIO(c, ops, w, nops, t, 1, buf, tmp);
  }
out:
  free(buf); free(tmp); free(w);
  return rc;
}

static int runRoot(comm_t *c, op_t *ops, int nops) {
  int n = c->nranks, rc = ok;
  char msg[192] = "";
  plan_t p = {0};
  p.n = n;
  p.nops = calloc((size_t)n, sizeof(int));
  p.w = calloc((size_t)n, sizeof(wireOp *));
  p.nops[0] = nops;
  p.w[0] = describe(ops, nops);
  slice_t *tmp = malloc(sizeof(slice_t) * (size_t)n);
  char **in = calloc((size_t)n, sizeof(char *)), **out = calloc((size_t)n, sizeof(char *));
  size_t **inOff = calloc((size_t)n, sizeof(size_t *)), **outOff = calloc((size_t)n, sizeof(size_t *));
  for (int r = 1; r < n && rc == ok; r++) {
    uint64_t hdr;
    if (readAll(c->fds[r], &hdr, sizeof hdr) != 0 || hdr > 1 << 16) { rc = lost(c, r); break; }
    p.nops[r] = (int)hdr;
    p.w[r] = calloc(hdr + 1, sizeof(wireOp));
    if (readAll(c->fds[r], p.w[r], sizeof(wireOp) * hdr) != 0) rc = lost(c, r);
  }
  if (rc == ok) {
    rc = checkPlan(&p, msg, sizeof msg);
    if (rc != ok) commFail(c, rc, "%s", msg);
  } else {
    snprintf(msg, sizeof msg, "%.191s", c->err);
  }
  for (int r = 1; r < n; r++)
    if (sendStatus(c->fds[r], rc, p.steps, 0, msg) != 0 && rc == ok) rc = lost(c, r);
  for (int r = 0; r < n && rc == ok; r++) {
    inOff[r] = calloc((size_t)p.nops[r] + 1, sizeof(size_t));
    outOff[r] = calloc((size_t)p.nops[r] + 1, sizeof(size_t));
  }
  for (int t = 0; t < p.steps && rc == ok; t++) {
    for (int r = 0; r < n; r++) {
      size_t nin = stepBytes(p.w[r], p.nops[r], r, n, t, 0, inOff[r], tmp), nout = stepBytes(p.w[r], p.nops[r], r, n, t, 1, outOff[r], tmp);
      in[r] = realloc(in[r], nin + 1);
      out[r] = realloc(out[r], nout + 1);
      if (r == 0) stepIO(c, ops, p.w[0], nops, t, 0, in[0], tmp);
      else if (readAll(c->fds[r], in[r], nin) != 0) { rc = lost(c, r); break; }
    }
    if (rc != ok) {
      snprintf(msg, sizeof msg, "%.191s", c->err);
      for (int r = 1; r < n; r++) sendStatus(c->fds[r], rc, 0, 0, msg);
      break;
    }
    computeStep(&p, t, in, inOff, out, outOff, tmp);
    for (int r = 1; r < n && rc == ok; r++) {
      size_t nout = stepBytes(p.w[r], p.nops[r], r, n, t, 1, NULL, tmp);
      if (sendStatus(c->fds[r], ok, 0, nout, NULL) != 0 || writeAll(c->fds[r], out[r], nout) != 0) rc = lost(c, r);
    }
    if (rc == ok) stepIO(c, ops, p.w[0], nops, t, 1, out[0], tmp);
  }
  for (int r = 0; r < n; r++) {
    free(in[r]); free(out[r]); free(inOff[r]); free(outOff[r]);
  }
  free(in); free(out); free(inOff); free(outOff); free(tmp);
  freePlan(&p);
  return rc;
}

// stallAfter is how much longer than its usual hold operation seq holds
// the stream, its data moved (STALL, STALL_AT).
static long long stallAfter(comm_t *c, long seq) {
  long long us = seq == c->stallAt ? c->stallAtUs : 0;
  if (c->stallPeriodUs > 0) {
    long long now = nowNs(), period = c->stallPeriodUs * 1000;
    if (c->stallNext == 0) c->stallNext = now + period;
    else if (now >= c->stallNext) {
      us += c->stallUs;
      c->stallNext = now + period;
    }
  }
  return us;
}

// runItem runs one queued round on the stream's worker thread, and says
// how long to hold the stream after it.
static int runItem(item_t *it, long long *holdUs, int *grank) {
  comm_t *c = it->comm;
  *grank = c->rank;
  *holdUs = c->holdUs;
  long seq = c->ops++;
  if (c->aborted) return commFail(c, errRemote, "communicator aborted");
  if (c->asyncErr != ok) return c->asyncErr;
  if (seq == c->hangAt) {
    pthread_mutex_lock(&c->mu);
    while (!c->aborted) pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
    return commFail(c, errRemote, "communicator aborted");
  }
  if (seq == c->errAt) return commFail(c, errRemote, "injected asynchronous error (RDMABENCH_FAKE_NCCL_ASYNC_ERROR)");
  int rc = c->rank == 0 ? runRoot(c, it->ops, it->nops) : runPeer(c, it->ops, it->nops);
  if (rc == ok) *holdUs += stallAfter(c, seq);
  return rc;
}

static void trace(int grank, long seq, long long queued, long long done) {
  const char *pre = getenv("RDMABENCH_FAKE_NCCL_TRACE");
  if (!pre || !*pre) return;
  char path[4096], line[96];
  snprintf(path, sizeof path, "%s.%d", pre, grank);
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return;
  int n = snprintf(line, sizeof line, "%ld %lld %lld\n", seq, queued, done);
  if (write(fd, line, (size_t)n) < 0) { /* best effort */ }
  close(fd);
}

// ---------------------------------------------------------------- groups
typedef struct {
  op_t *op;
  int rc;
  char err[256];
} initTask;

static void *blockingInit(void *arg) {
  initTask *t = arg;
  comm_t *c = *t->op->commOut;
  t->rc = doInit(c);
  if (t->rc == ok) c->asyncErr = ok;
  memcpy(t->err, c->err, sizeof t->err);
  return NULL;
}

// runInits creates the communicators of a group: blocking ones together on
// threads of their own (a real group would deadlock otherwise), non-blocking
// ones in the background.
static int runInits(op_t *ops, int n) {
  int rc = ok, nb = 0, nblocking = 0;
  for (int i = 0; i < n; i++) {
    op_t *o = &ops[i];
    if (o->kind != kInit) continue;
    if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks) { setErr("bad rank %d of %d", o->rank, o->nranks); return errArg; }
  }
  initTask *tasks = calloc((size_t)n + 1, sizeof *tasks);
  pthread_t *th = calloc((size_t)n + 1, sizeof *th);
  for (int i = 0; i < n; i++) {
    op_t *o = &ops[i];
    if (o->kind != kInit) continue;
    comm_t *c = newComm(o->rank, o->nranks, o->dev);
    if (!c) { setErr("out of memory"); rc = errSystem; break; }
    c->id = o->id;
    c->asyncErr = inProgress;
    c->nonblocking = o->nonblocking;
    *o->commOut = c;
    if (o->nonblocking) {
      c->initRunning = 1;
      pthread_t t;
      pthread_create(&t, NULL, initMain, c);
      pthread_detach(t);
      nb++;
    } else {
      tasks[nblocking].op = o;
      pthread_create(&th[nblocking], NULL, blockingInit, &tasks[nblocking]);
      nblocking++;
    }
  }
  for (int i = 0; i < nblocking; i++) {
    pthread_join(th[i], NULL);
    if (tasks[i].rc != ok) {
      if (rc == ok) { rc = tasks[i].rc; memcpy(lastErr, tasks[i].err, sizeof lastErr); }
      comm_t *c = *tasks[i].op->commOut;
      *tasks[i].op->commOut = NULL;
      freeComm(c);
    }
  }
  free(tasks);
  free(th);
  return rc == ok && nb ? inProgress : rc;
}

// submit queues one round per communicator on the stream of its first
// operation; nothing runs on the calling thread.
static int submit(op_t *ops, int n) {
  int rc = ok;
  char *taken = calloc((size_t)n + 1, 1);
  long long t = nowNs();
  for (int i = 0; i < n; i++) {
    if (taken[i] || ops[i].kind == kInit) continue;
    item_t *it = calloc(1, sizeof *it);
    it->comm = ops[i].comm;
    it->queued = t;
    it->ops = malloc(sizeof(op_t) * (size_t)n);
    for (int j = i; j < n; j++)
      if (!taken[j] && ops[j].kind != kInit && ops[j].comm == ops[i].comm) {
        it->ops[it->nops++] = ops[j];
        taken[j] = 1;
      }
    stream_t *s = ops[i].stream;
    if (!s) {
      pthread_mutex_lock(&streamsMu);
      int make = !defaultStream;
      pthread_mutex_unlock(&streamsMu);
      if (make) defaultStream = newStream();
      s = defaultStream;
    }
    comm_t *c = it->comm;
    c->lastStream = s;
    push(s, it, !c->nonblocking);
    if (c->nonblocking && full(s)) rc = inProgress;
  }
  free(taken);
  return rc;
}

static int flush(op_t *ops, int n) {
  if (n == 0) return ok;
  int rc = runInits(ops, n);
  if (rc != ok && rc != inProgress) return rc;
  int rc2 = submit(ops, n);
  return rc2 != ok ? rc2 : rc;
}

static int enqueue(op_t o) {
  o.dev = curDev;
  if (o.kind != kInit) {
    comm_t *c = o.comm;
    if (!c) { setErr("NULL communicator"); return errArg; }
    if (c->aborted) { setErr("communicator was aborted"); return errUsage; }
    if (c->asyncErr == inProgress) { setErr("communicator is still being initialized (poll ncclCommGetAsyncError)"); return errUsage; }
    if (c->asyncErr) { setErr("communicator has a pending error: %s", c->err); return c->asyncErr; }
    if (c->nonblocking && c->lastStream && full(c->lastStream)) { setErr("the previous call returned ncclInProgress and has not completed"); return errUsage; }
    if (o.dtype < 0 || o.dtype >= tNumTypes) { setErr("invalid datatype %d", o.dtype); return errArg; }
    if (o.op < 0 || o.op >= oNumOps) { setErr("invalid reduction op %d", o.op); return errArg; }
    if ((o.kind == kBroadcast || o.kind == kReduce) && (o.root < 0 || o.root >= c->nranks)) { setErr("invalid root %d", o.root); return errArg; }
    if ((o.kind == kSend || o.kind == kRecv) && (o.peer < 0 || o.peer >= c->nranks)) { setErr("invalid peer %d", o.peer); return errArg; }
    markUsed(c, o.send);
    markUsed(c, o.recv);
  }
  if (groupDepth == 0) return flush(&o, 1);
  if (nqueue == capqueue) {
    capqueue = capqueue ? capqueue * 2 : 16;
    queue = realloc(queue, sizeof(op_t) * (size_t)capqueue);
  }
  queue[nqueue++] = o;
  return ok;
}

int ncclGroupStart(void) { groupDepth++; return ok; }
int ncclGroupEnd(void) {
  if (groupDepth == 0) { setErr("ncclGroupEnd without ncclGroupStart"); return errUsage; }
  if (--groupDepth > 0) return ok;
  int n = nqueue;
  nqueue = 0;
  return flush(queue, n);
}

// ---------------------------------------------------------------- NCCL API
int ncclGetVersion(int *v) { *v = envInt("RDMABENCH_FAKE_NCCL_VERSION", 22901); return ok; }

static int initRank(comm_t **comm, int nranks, uid_t128 id, int rank, int nonblocking) {
  op_t o = {0};
  o.kind = kInit;
  o.commOut = comm;
  o.id = id;
  o.nranks = nranks;
  o.rank = rank;
  o.nonblocking = nonblocking;
  return enqueue(o);
}

int ncclCommInitRank(comm_t **comm, int nranks, uid_t128 id, int rank) { return initRank(comm, nranks, id, rank, 0); }

int ncclCommInitRankConfig(comm_t **comm, int nranks, uid_t128 id, int rank, configHead *config) {
  if (config && config->magic != 0xcafebeef) { setErr("ncclConfig_t not initialized with NCCL_CONFIG_INITIALIZER"); return errArg; }
  return initRank(comm, nranks, id, rank, config && config->blocking == 0);
}

// teardown ends c: in-flight work is stopped (abort) or finished (destroy),
// then the memory goes away.
static void teardown(comm_t *c, int abortNow) {
  if (abortNow) {
    c->aborted = 1;
    for (int i = 0; i < c->nranks; i++)
      if (c->fds[i] >= 0) shutdown(c->fds[i], SHUT_RDWR);
  }
  pthread_mutex_lock(&c->mu);
  pthread_cond_broadcast(&c->cv);
  while (c->initRunning) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  forget(c);
  freeComm(c);
}

// drain waits for the communicator's queued work, unless it failed.
static void drain(comm_t *c) {
  for (stream_t *s = allStreams(); s; s = s->next) {
    pthread_mutex_lock(&s->mu);
    for (;;) {
      int mine = s->running == c && s->stuckBy != c;
      for (item_t *it = s->head; it && !mine && s->stuckBy != c; it = it->next) mine = it->comm == c;
      if (!mine) break;
      pthread_cond_wait(&s->cv, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
  }
}

// Finalize flushes the communicator's work; it stays usable for destroy.
int ncclCommFinalize(comm_t *c) {
  if (!c) { setErr("NULL communicator"); return errArg; }
  drain(c);
  return c->asyncErr;
}

int ncclCommDestroy(comm_t *c) {
  if (!c) return ok;
  drain(c);
  teardown(c, c->asyncErr != ok);
  return ok;
}

int ncclCommAbort(comm_t *c) {
  if (!c) return ok;
  teardown(c, 1);
  return ok;
}

int ncclCommGetAsyncError(comm_t *c, int *e) {
  *e = c ? c->asyncErr : 0;
  if (*e == ok && c && c->lastStream && full(c->lastStream)) *e = inProgress;
  return ok;
}
int ncclCommCount(const comm_t *c, int *n) { *n = c->nranks; return ok; }
int ncclCommUserRank(const comm_t *c, int *r) { *r = c->rank; return ok; }

const char *ncclGetErrorString(int r) {
  switch (r) {
  case ok: return "no error";
  case errCuda: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case errSystem: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case errInternal: return "internal error - please report this issue to the NCCL developers";
  case errArg: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case errUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case errRemote: return "remote process exited or there was a network error";
  case inProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

// The last error of the communicator's background work, else this thread's.
const char *ncclGetLastError(comm_t *c) {
  if (c && c->err[0]) memcpy(lastErr, c->err, sizeof lastErr);
  return lastErr;
}

#define DATA_OP(K, S, R, C, T, O, ROOT, PEER, COMM, ST)                                               \
  do {                                                                                                \
    op_t o = {0};                                                                                     \
    o.kind = K; o.send = S; o.recv = R; o.count = C; o.dtype = T; o.op = O; o.root = ROOT;            \
    o.peer = PEER; o.comm = COMM; o.stream = ST;                                                      \
    return enqueue(o);                                                                                \
  } while (0)

int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, comm_t *c, void *st) { DATA_OP(kAllReduce, s, r, n, t, op, 0, 0, c, st); }
int ncclAllGather(const void *s, void *r, size_t n, int t, comm_t *c, void *st) { DATA_OP(kAllGather, s, r, n, t, 0, 0, 0, c, st); }
int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, comm_t *c, void *st) { DATA_OP(kReduceScatter, s, r, n, t, op, 0, 0, c, st); }
int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, comm_t *c, void *st) { DATA_OP(kBroadcast, s, r, n, t, 0, root, 0, c, st); }
int ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, comm_t *c, void *st) { DATA_OP(kReduce, s, r, n, t, op, root, 0, c, st); }
int ncclAlltoAll(const void *s, void *r, size_t n, int t, comm_t *c, void *st) { DATA_OP(kAlltoAll, s, r, n, t, 0, 0, 0, c, st); }
int ncclSend(const void *s, size_t n, int t, int peer, comm_t *c, void *st) { DATA_OP(kSend, s, NULL, n, t, 0, 0, peer, c, st); }
int ncclRecv(void *r, size_t n, int t, int peer, comm_t *c, void *st) { DATA_OP(kRecv, NULL, r, n, t, 0, 0, peer, c, st); }
