// fakenccl: a test-only stand-in for libnccl.so.2 and libcudart.so with the
// same C ABI as the calls ncclbench makes. "Device" memory is host memory and
// every operation runs synchronously on the calling thread, so streams are
// always idle. Ranks may live in separate processes: rank 0 gathers every
// rank's contribution over loopback TCP (127.0.0.1 only), computes the
// results and sends each rank its share. It is NOT a performance model.
//
// Build: gcc -shared -fPIC -O2 -o libnccl.so.2 fakenccl.c -lpthread
//
// Knobs (environment):
//   RDMABENCH_FAKE_NCCL_VERSION   version code reported (default 22901)
//   RDMABENCH_FAKE_NCCL_GPUS      device count (default 8; 0 = "no GPU")
//   RDMABENCH_FAKE_NCCL_TRANSPORT transport printed in the INFO log
//                                 (default SHM/direct/direct)
//   RDMABENCH_FAKE_NCCL_CORRUPT   rank N flips a high bit of the first element
//                                 it receives (to test wrong-result detection)
//   RDMABENCH_FAKE_NCCL_TIMEOUT   seconds to wait for peers (default 60)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
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
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

// Marker symbol: ncclbench looks it up to label the run as "not a GPU".
int rdmabench_fake_nccl = 1;

enum { ok = 0, errCuda = 1, errSystem = 2, errInternal = 3, errArg = 4, errUsage = 5, errRemote = 6 };
enum { tInt8, tUint8, tInt32, tUint32, tInt64, tUint64, tHalf, tFloat, tDouble, tBf16, tNumTypes };
enum { oSum, oProd, oMax, oMin, oAvg, oNumOps };
enum { kInit = 1, kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce, kAlltoAll, kSend, kRecv };

static const size_t typeSize[tNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};

typedef struct { char internal[128]; } uid_t128;
typedef struct {
  char magic[8];
  uint16_t port;
  uint64_t token;
} idBody;

typedef struct comm {
  int rank, nranks, dev;
  int *fds;   // root: fds[r] for r>0; others: fds[0] is the root
  volatile int aborted;
  int asyncErr;
  int corrupt;
} comm_t;

typedef struct {
  int kind;
  comm_t *comm;
  comm_t **commOut;
  uid_t128 id;
  int rank, nranks;
  const void *send;
  void *recv;
  size_t count;
  int dtype, op, root, peer;
  int dev;
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
  *p = calloc(1, n ? n : 1);
  return *p ? 0 : 2; // cudaErrorMemoryAllocation
}
int cudaFree(void *p) { free(p); return 0; }
int cudaMemcpy(void *dst, const void *src, size_t n, int kind) { (void)kind; memmove(dst, src, n); return 0; }
int cudaMemset(void *dst, int v, size_t n) { memset(dst, v, n); return 0; }
int cudaStreamCreate(void **s) { *s = malloc(8); return 0; }
int cudaStreamCreateWithFlags(void **s, unsigned f) { (void)f; return cudaStreamCreate(s); }
int cudaStreamDestroy(void *s) { free(s); return 0; }
int cudaStreamSynchronize(void *s) { (void)s; return 0; }
int cudaStreamQuery(void *s) { (void)s; return 0; }
int cudaDeviceSynchronize(void) { return 0; }
int cudaRuntimeGetVersion(int *v) { *v = 0; return 0; }
int cudaDriverGetVersion(int *v) { *v = 0; return 0; }
int cudaGetLastError(void) { return 0; }
const char *cudaGetErrorString(int e) {
  switch (e) {
  case 0: return "no error";
  case 2: return "out of memory";
  case 100: return "no CUDA-capable device is detected";
  case 101: return "invalid device ordinal";
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

int ncclGetUniqueId(uid_t128 *id) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) { setErr("socket: %s", strerror(errno)); return errSystem; }
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t al = sizeof a;
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 256) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
    setErr("listen on 127.0.0.1: %s", strerror(errno));
    close(fd);
    return errSystem;
  }
  struct timeval tv;
  gettimeofday(&tv, NULL);
  idBody b;
  memcpy(b.magic, "RBFAKE01", 8);
  b.port = ntohs(a.sin_port);
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

static int doInit(op_t *o) {
  idBody b;
  memcpy(&b, o->id.internal, sizeof b);
  if (memcmp(b.magic, "RBFAKE01", 8) != 0) { setErr("unique id was not made by this library"); return errArg; }
  if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks) { setErr("bad rank %d of %d", o->rank, o->nranks); return errArg; }
  comm_t *c = calloc(1, sizeof *c);
  c->rank = o->rank;
  c->nranks = o->nranks;
  c->dev = o->dev;
  c->fds = malloc(sizeof(int) * (size_t)o->nranks);
  for (int i = 0; i < o->nranks; i++) c->fds[i] = -1;
  c->corrupt = getenv("RDMABENCH_FAKE_NCCL_CORRUPT") && envInt("RDMABENCH_FAKE_NCCL_CORRUPT", -1) == o->rank;
  if (o->rank == 0) {
    int lfd = takeListener(b.token);
    if (lfd < 0) { setErr("rank 0 must run in the process that called ncclGetUniqueId"); free(c->fds); free(c); return errUsage; }
    for (int joined = 1; joined < o->nranks;) {
      struct pollfd p = {lfd, POLLIN, 0};
      int pr = poll(&p, 1, timeoutSec() * 1000);
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) { setErr("timeout waiting for %d ranks to join", o->nranks - joined); close(lfd); return errRemote; }
      int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
      if (fd < 0) continue;
      setTimeouts(fd);
      uint64_t hello[2];
      if (readAll(fd, hello, sizeof hello) != 0 || hello[0] != b.token || hello[1] == 0 || hello[1] >= (uint64_t)o->nranks ||
          c->fds[hello[1]] >= 0) {
        close(fd);
        continue;
      }
      c->fds[hello[1]] = fd;
      joined++;
    }
    close(lfd);
    for (int r = 1; r < o->nranks; r++) {
      uint64_t ack = b.token;
      if (writeAll(c->fds[r], &ack, sizeof ack) != 0) { setErr("rank %d went away during init", r); return errRemote; }
    }
  } else {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(b.port);
    int fd = -1;
    time_t deadline = time(NULL) + timeoutSec();
    for (;;) {
      fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
      close(fd);
      fd = -1;
      if (time(NULL) > deadline) { setErr("cannot reach rank 0 at 127.0.0.1:%d", b.port); return errRemote; }
      usleep(20000);
    }
    setTimeouts(fd);
    uint64_t hello[2] = {b.token, (uint64_t)o->rank}, ack = 0;
    if (writeAll(fd, hello, sizeof hello) != 0 || readAll(fd, &ack, sizeof ack) != 0 || ack != b.token) {
      setErr("rank 0 closed the connection during init");
      close(fd);
      return errRemote;
    }
    c->fds[0] = fd;
  }
  const char *tr = getenv("RDMABENCH_FAKE_NCCL_TRANSPORT");
  if (!tr || !*tr) tr = "SHM/direct/direct";
  int v = envInt("RDMABENCH_FAKE_NCCL_VERSION", 22901);
  if (o->rank == 0) info(c->dev, "NCCL version %d.%d.%d+fake (rdmabench test library, not a GPU)", v / 10000, (v / 100) % 100, v % 100);
  info(c->dev, "Bootstrap : Using lo:127.0.0.1<0>");
  info(c->dev, "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.");
  info(c->dev, "NET/Socket : Using [0]lo:127.0.0.1<0>");
  info(c->dev, "Using network Socket");
  info(c->dev, "comm %p rank %d nRanks %d nNodes 1 localRanks %d localRank %d MNNVL 0", (void *)c, c->rank, c->nranks, c->nranks, c->rank);
  if (c->nranks > 1) {
    int next = (c->rank + 1) % c->nranks;
    int isNet = strncmp(tr, "NET/", 4) == 0;
    info(c->dev, "Channel 00/0 : %d[%d] -> %d[%d]%s via %s", c->rank, c->rank, next, next, isNet ? " [send]" : "", tr);
  }
  info(c->dev, "Connected all rings");
  info(c->dev, "ncclCommInitRank comm %p rank %d nranks %d cudaDev %d - Init COMPLETE", (void *)c, c->rank, c->nranks, c->dev);
  *o->commOut = c;
  return ok;
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
// or everything queued between ncclGroupStart and ncclGroupEnd).
typedef struct {
  int32_t kind, dtype, op, root, peer, pad;
  uint64_t count, sendBytes;
} wireOp;

static size_t sendBytesOf(const wireOp *w, int rank, int n) {
  size_t ts = typeSize[w->dtype];
  switch (w->kind) {
  case kAllReduce: case kAllGather: case kReduce: case kSend: return w->count * ts;
  case kReduceScatter: case kAlltoAll: return w->count * ts * (size_t)n;
  case kBroadcast: return rank == w->root ? w->count * ts : 0;
  default: return 0;
  }
}

static size_t recvBytesOf(const wireOp *w, int rank, int n) {
  size_t ts = typeSize[w->dtype];
  switch (w->kind) {
  case kAllReduce: case kReduceScatter: case kBroadcast: case kRecv: return w->count * ts;
  case kAllGather: case kAlltoAll: return w->count * ts * (size_t)n;
  case kReduce: return rank == w->root ? w->count * ts : 0;
  default: return 0;
  }
}

static int isColl(int kind) { return kind != kSend && kind != kRecv; }

static int fail(comm_t *c, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(lastErr, sizeof lastErr, fmt, ap);
  va_end(ap);
  c->asyncErr = code;
  return code;
}

// rootCompute fills res[r][i] for every rank r and op i. w[r]/data[r] hold
// each rank's ops and send payloads.
static int rootCompute(comm_t *c, int n, wireOp **w, int *nops, const void ***data, void ***res) {
  int ncoll = -1;
  for (int r = 0; r < n; r++) {
    int k = 0;
    for (int i = 0; i < nops[r]; i++) k += isColl(w[r][i].kind);
    if (ncoll >= 0 && k != ncoll) return fail(c, errUsage, "ranks issued different numbers of collectives (%d vs %d)", ncoll, k);
    ncoll = k;
  }
  for (int r = 0; r < n; r++)
    for (int i = 0; i < nops[r]; i++) {
      size_t rb = recvBytesOf(&w[r][i], r, n);
      res[r][i] = rb ? malloc(rb) : NULL;
      if (rb && !res[r][i]) return fail(c, errSystem, "out of host memory");
    }
  int *idx = calloc((size_t)n, sizeof(int));
  const void **in = malloc(sizeof(void *) * (size_t)n);
  for (int j = 0; j < ncoll; j++) {
    for (int r = 0; r < n; r++) {
      while (!isColl(w[r][idx[r]].kind)) idx[r]++;
      const wireOp *a = &w[0][idx[0]], *b = &w[r][idx[r]];
      if (a->kind != b->kind || a->count != b->count || a->dtype != b->dtype || a->op != b->op || a->root != b->root) {
        free(idx); free(in);
        return fail(c, errUsage, "rank %d called a different collective than rank 0", r);
      }
      in[r] = data[r][idx[r]];
    }
    const wireOp *a = &w[0][idx[0]];
    size_t ts = typeSize[a->dtype], cnt = a->count;
    switch (a->kind) {
    case kAllReduce:
      reduceInto(res[0][idx[0]], in, n, cnt, a->dtype, a->op);
      for (int r = 1; r < n; r++) memcpy(res[r][idx[r]], res[0][idx[0]], cnt * ts);
      break;
    case kReduce:
      reduceInto(res[a->root][idx[a->root]], in, n, cnt, a->dtype, a->op);
      break;
    case kBroadcast:
      for (int r = 0; r < n; r++) memcpy(res[r][idx[r]], in[a->root], cnt * ts);
      break;
    case kAllGather:
      for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++) memcpy((char *)res[r][idx[r]] + (size_t)p * cnt * ts, in[p], cnt * ts);
      break;
    case kReduceScatter: {
      void *tmp = malloc(cnt * ts * (size_t)n);
      reduceInto(tmp, in, n, cnt * (size_t)n, a->dtype, a->op);
      for (int r = 0; r < n; r++) memcpy(res[r][idx[r]], (char *)tmp + (size_t)r * cnt * ts, cnt * ts);
      free(tmp);
      break;
    }
    case kAlltoAll:
      for (int r = 0; r < n; r++)
        for (int p = 0; p < n; p++)
          memcpy((char *)res[r][idx[r]] + (size_t)p * cnt * ts, (const char *)in[p] + (size_t)r * cnt * ts, cnt * ts);
      break;
    }
    for (int r = 0; r < n; r++) idx[r]++;
  }
  free(in);
  free(idx);
  // Point-to-point: the k-th recv at r from p matches the k-th send at p to r.
  for (int r = 0; r < n; r++)
    for (int i = 0; i < nops[r]; i++) {
      if (w[r][i].kind != kRecv) continue;
      int p = w[r][i].peer, k = 0, found = 0;
      if (p < 0 || p >= n) return fail(c, errArg, "recv from invalid peer %d", p);
      for (int q = 0; q < i; q++) k += (w[r][q].kind == kRecv && w[r][q].peer == p);
      for (int s = 0; s < nops[p]; s++) {
        if (w[p][s].kind != kSend || w[p][s].peer != r) continue;
        if (k-- == 0) {
          size_t want = w[r][i].count * typeSize[w[r][i].dtype], have = w[p][s].sendBytes;
          if (have != want) return fail(c, errUsage, "send %d->%d has %zu bytes, recv expects %zu", p, r, have, want);
          memcpy(res[r][i], data[p][s], want);
          found = 1;
          break;
        }
      }
      if (!found) return fail(c, errUsage, "recv at rank %d from %d has no matching send (every rank must take part in each group)", r, p);
    }
  return ok;
}

static int runRound(comm_t *c, op_t *ops, int nops) {
  if (c->aborted) return fail(c, errUsage, "communicator was aborted");
  int n = c->nranks;
  if (c->rank != 0) {
    uint64_t hdr = (uint64_t)nops;
    if (writeAll(c->fds[0], &hdr, sizeof hdr) != 0) goto lost;
    for (int i = 0; i < nops; i++) {
      wireOp w = {ops[i].kind, ops[i].dtype, ops[i].op, ops[i].root, ops[i].peer, 0, ops[i].count, 0};
      w.sendBytes = sendBytesOf(&w, c->rank, n);
      if (writeAll(c->fds[0], &w, sizeof w) != 0) goto lost;
      if (w.sendBytes && writeAll(c->fds[0], ops[i].send, w.sendBytes) != 0) goto lost;
    }
    for (int i = 0; i < nops; i++) {
      uint64_t nb = 0;
      if (readAll(c->fds[0], &nb, sizeof nb) != 0) goto lost;
      if (nb == UINT64_MAX) return fail(c, errRemote, "rank 0 reported an error in this operation");
      if (nb && readAll(c->fds[0], ops[i].recv, nb) != 0) goto lost;
      if (nb && c->corrupt) ((unsigned char *)ops[i].recv)[typeSize[ops[i].dtype] - 1] ^= 0x40;
    }
    return ok;
  lost:
    return fail(c, errRemote, c->aborted ? "communicator aborted" : "lost connection to rank 0 (peer process died?)");
  }
  wireOp **w = calloc((size_t)n, sizeof *w);
  int *cnt = calloc((size_t)n, sizeof(int));
  const void ***data = calloc((size_t)n, sizeof *data);
  void ***res = calloc((size_t)n, sizeof *res);
  int rc = ok;
  cnt[0] = nops;
  w[0] = calloc((size_t)nops, sizeof(wireOp));
  data[0] = calloc((size_t)nops, sizeof(void *));
  for (int i = 0; i < nops; i++) {
    wireOp x = {ops[i].kind, ops[i].dtype, ops[i].op, ops[i].root, ops[i].peer, 0, ops[i].count, 0};
    x.sendBytes = sendBytesOf(&x, 0, n);
    w[0][i] = x;
    data[0][i] = ops[i].send;
  }
  for (int r = 1; r < n && rc == ok; r++) {
    uint64_t hdr;
    if (readAll(c->fds[r], &hdr, sizeof hdr) != 0 || hdr > 1 << 20) { rc = fail(c, errRemote, "lost connection to rank %d (peer process died?)", r); break; }
    cnt[r] = (int)hdr;
    w[r] = calloc(hdr ? hdr : 1, sizeof(wireOp));
    data[r] = calloc(hdr ? hdr : 1, sizeof(void *));
    for (uint64_t i = 0; i < hdr; i++) {
      if (readAll(c->fds[r], &w[r][i], sizeof(wireOp)) != 0) { rc = fail(c, errRemote, "lost connection to rank %d (peer process died?)", r); break; }
      if (w[r][i].dtype < 0 || w[r][i].dtype >= tNumTypes) { rc = fail(c, errArg, "bad datatype from rank %d", r); break; }
      if (w[r][i].sendBytes) {
        void *buf = malloc(w[r][i].sendBytes);
        data[r][i] = buf;
        if (!buf || readAll(c->fds[r], buf, w[r][i].sendBytes) != 0) { rc = fail(c, errRemote, "lost connection to rank %d (peer process died?)", r); break; }
      }
    }
  }
  for (int r = 0; r < n && rc == ok; r++) res[r] = calloc((size_t)(cnt[r] ? cnt[r] : 1), sizeof(void *));
  if (rc == ok) rc = rootCompute(c, n, w, cnt, data, res);
  for (int r = 1; r < n; r++) {
    if (rc != ok) {
      uint64_t nb = UINT64_MAX;
      (void)writeAll(c->fds[r], &nb, sizeof nb);
      continue;
    }
    for (int i = 0; i < cnt[r]; i++) {
      uint64_t nb = rc == ok ? recvBytesOf(&w[r][i], r, n) : UINT64_MAX;
      if (writeAll(c->fds[r], &nb, sizeof nb) != 0) { if (rc == ok) rc = fail(c, errRemote, "lost connection to rank %d (peer process died?)", r); break; }
      if (rc == ok && nb && writeAll(c->fds[r], res[r][i], nb) != 0) { rc = fail(c, errRemote, "lost connection to rank %d (peer process died?)", r); break; }
      if (rc != ok) break;
    }
  }
  if (rc == ok)
    for (int i = 0; i < nops; i++) {
      size_t nb = recvBytesOf(&w[0][i], 0, n);
      if (nb) memcpy(ops[i].recv, res[0][i], nb);
      if (nb && c->corrupt) ((unsigned char *)ops[i].recv)[typeSize[ops[i].dtype] - 1] ^= 0x40;
    }
  for (int r = 0; r < n; r++) {
    for (int i = 0; i < cnt[r]; i++) {
      if (r > 0 && data[r]) free((void *)data[r][i]);
      if (res[r]) free(res[r][i]);
    }
    free(w[r]); free(data[r]); free(res[r]);
  }
  free(w); free(cnt); free(data); free(res);
  return rc;
}

// ---------------------------------------------------------------- groups
typedef struct {
  comm_t *comm;
  op_t *ops;
  int nops;
  int rc;
  char err[256];
} task_t;

static void *taskMain(void *arg) {
  task_t *t = arg;
  if (t->ops[0].kind == kInit) t->rc = doInit(&t->ops[0]);
  else t->rc = runRound(t->comm, t->ops, t->nops);
  memcpy(t->err, lastErr, sizeof t->err);
  return NULL;
}

static int runOps(op_t *ops, int n) {
  if (n == 0) return ok;
  // One task per communicator (init ops each get their own), all run
  // concurrently as a real group would.
  task_t *tasks = calloc((size_t)n, sizeof *tasks);
  op_t *sorted = malloc(sizeof(op_t) * (size_t)n);
  int nt = 0, used = 0;
  char *taken = calloc((size_t)n, 1);
  for (int i = 0; i < n; i++) {
    if (taken[i]) continue;
    task_t *t = &tasks[nt++];
    t->comm = ops[i].comm;
    t->ops = &sorted[used];
    for (int j = i; j < n; j++) {
      if (taken[j]) continue;
      if (j == i || (ops[i].kind != kInit && ops[j].kind != kInit && ops[j].comm == ops[i].comm)) {
        sorted[used++] = ops[j];
        t->nops++;
        taken[j] = 1;
      }
    }
  }
  int rc = ok;
  if (nt == 1) {
    taskMain(&tasks[0]);
  } else {
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)nt);
    for (int i = 0; i < nt; i++) pthread_create(&th[i], NULL, taskMain, &tasks[i]);
    for (int i = 0; i < nt; i++) pthread_join(th[i], NULL);
    free(th);
  }
  for (int i = 0; i < nt; i++)
    if (tasks[i].rc != ok && rc == ok) {
      rc = tasks[i].rc;
      memcpy(lastErr, tasks[i].err, sizeof lastErr);
    }
  free(tasks); free(sorted); free(taken);
  return rc;
}

static int enqueue(op_t o) {
  o.dev = curDev;
  if (o.kind != kInit) {
    if (!o.comm) { setErr("NULL communicator"); return errArg; }
    if (o.dtype < 0 || o.dtype >= tNumTypes) { setErr("invalid datatype %d", o.dtype); return errArg; }
    if (o.op < 0 || o.op >= oNumOps) { setErr("invalid reduction op %d", o.op); return errArg; }
    if ((o.kind == kBroadcast || o.kind == kReduce) && (o.root < 0 || o.root >= o.comm->nranks)) { setErr("invalid root %d", o.root); return errArg; }
    if (o.comm->asyncErr) { setErr("communicator has a pending error"); return o.comm->asyncErr; }
  }
  if (groupDepth == 0) return runOps(&o, 1);
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
  return runOps(queue, n);
}

// ---------------------------------------------------------------- NCCL API
int ncclGetVersion(int *v) { *v = envInt("RDMABENCH_FAKE_NCCL_VERSION", 22901); return ok; }

int ncclCommInitRank(comm_t **comm, int nranks, uid_t128 id, int rank) {
  op_t o = {0};
  o.kind = kInit;
  o.commOut = comm;
  o.id = id;
  o.nranks = nranks;
  o.rank = rank;
  return enqueue(o);
}

static void closeAll(comm_t *c, int destroy) {
  for (int i = 0; i < c->nranks; i++)
    if (c->fds[i] >= 0) {
      if (destroy) close(c->fds[i]);
      else shutdown(c->fds[i], SHUT_RDWR);
    }
}

int ncclCommDestroy(comm_t *c) {
  if (!c) return ok;
  closeAll(c, 1);
  free(c->fds);
  free(c);
  return ok;
}

// Abort may be called from another thread while an operation is blocked on
// the sockets: shut them down (which wakes the blocked call) but leave the
// memory alone.
int ncclCommAbort(comm_t *c) {
  if (!c) return ok;
  c->aborted = 1;
  closeAll(c, 0);
  return ok;
}

int ncclCommGetAsyncError(comm_t *c, int *e) { *e = c ? c->asyncErr : 0; return ok; }
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
  default: return "unknown result code";
  }
}
const char *ncclGetLastError(comm_t *c) { (void)c; return lastErr; }

#define DATA_OP(K, S, R, C, T, O, ROOT, PEER, COMM)                                                   \
  do {                                                                                                \
    op_t o = {0};                                                                                     \
    o.kind = K; o.send = S; o.recv = R; o.count = C; o.dtype = T; o.op = O; o.root = ROOT;            \
    o.peer = PEER; o.comm = COMM;                                                                     \
    return enqueue(o);                                                                                \
  } while (0)

int ncclAllReduce(const void *s, void *r, size_t n, int t, int op, comm_t *c, void *st) { (void)st; DATA_OP(kAllReduce, s, r, n, t, op, 0, 0, c); }
int ncclAllGather(const void *s, void *r, size_t n, int t, comm_t *c, void *st) { (void)st; DATA_OP(kAllGather, s, r, n, t, 0, 0, 0, c); }
int ncclReduceScatter(const void *s, void *r, size_t n, int t, int op, comm_t *c, void *st) { (void)st; DATA_OP(kReduceScatter, s, r, n, t, op, 0, 0, c); }
int ncclBroadcast(const void *s, void *r, size_t n, int t, int root, comm_t *c, void *st) { (void)st; DATA_OP(kBroadcast, s, r, n, t, 0, root, 0, c); }
int ncclReduce(const void *s, void *r, size_t n, int t, int op, int root, comm_t *c, void *st) { (void)st; DATA_OP(kReduce, s, r, n, t, op, root, 0, c); }
int ncclAlltoAll(const void *s, void *r, size_t n, int t, comm_t *c, void *st) { (void)st; DATA_OP(kAlltoAll, s, r, n, t, 0, 0, 0, c); }
int ncclSend(const void *s, size_t n, int t, int peer, comm_t *c, void *st) { (void)st; DATA_OP(kSend, s, NULL, n, t, 0, 0, peer, c); }
int ncclRecv(void *r, size_t n, int t, int peer, comm_t *c, void *st) { (void)st; DATA_OP(kRecv, NULL, r, n, t, 0, 0, peer, c); }
