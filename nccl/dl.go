package nccl

// The C side holds one function pointer per NCCL/CUDA entry point, filled by
// dlsym, and tiny trampolines that call through them. Nothing is linked at
// build time, so the binary needs no CUDA headers or libraries.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } rb_uid;

static void *rb_nccl, *rb_cudart;

static int (*p_ncclGetVersion)(int*);
static int (*p_ncclGetUniqueId)(rb_uid*);
static int (*p_ncclCommInitRank)(void**, int, rb_uid, int);
static int (*p_ncclCommInitRankConfig)(void**, int, rb_uid, int, void*);
static int (*p_ncclCommDestroy)(void*);
static int (*p_ncclCommFinalize)(void*);
static int (*p_ncclCommAbort)(void*);
static int (*p_ncclCommGetAsyncError)(void*, int*);
static const char* (*p_ncclGetErrorString)(int);
static const char* (*p_ncclGetLastError)(void*);
static int (*p_ncclGroupStart)(void);
static int (*p_ncclGroupEnd)(void);
static int (*p_ncclAllReduce)(const void*, void*, size_t, int, int, void*, void*);
static int (*p_ncclAllGather)(const void*, void*, size_t, int, void*, void*);
static int (*p_ncclReduceScatter)(const void*, void*, size_t, int, int, void*, void*);
static int (*p_ncclBroadcast)(const void*, void*, size_t, int, int, void*, void*);
static int (*p_ncclReduce)(const void*, void*, size_t, int, int, int, void*, void*);
static int (*p_ncclAlltoAll)(const void*, void*, size_t, int, void*, void*);
static int (*p_ncclSend)(const void*, size_t, int, int, void*, void*);
static int (*p_ncclRecv)(void*, size_t, int, int, void*, void*);

static int (*p_cudaGetDeviceCount)(int*);
static int (*p_cudaSetDevice)(int);
static int (*p_cudaMalloc)(void**, size_t);
static int (*p_cudaFree)(void*);
static int (*p_cudaMemcpy)(void*, const void*, size_t, int);
static int (*p_cudaMemset)(void*, int, size_t);
static int (*p_cudaStreamCreate)(void**);
static int (*p_cudaStreamDestroy)(void*);
static int (*p_cudaStreamQuery)(void*);
static int (*p_cudaStreamSynchronize)(void*);
static int (*p_cudaRuntimeGetVersion)(int*);
static int (*p_cudaDriverGetVersion)(int*);
static const char* (*p_cudaGetErrorString)(int);
static int (*p_cudaGetDeviceProperties)(void*, int);
static int (*p_cudaDeviceGetPCIBusId)(char*, int, int);
static int (*p_cudaEventCreate)(void**);
static int (*p_cudaEventDestroy)(void*);
static int (*p_cudaEventRecord)(void*, void*);
static int (*p_cudaEventElapsedTime)(float*, void*, void*);
static int (*p_cudaStreamBeginCapture)(void*, int);
static int (*p_cudaStreamEndCapture)(void*, void**);
static int (*p_cudaGraphInstantiateWithFlags)(void**, void*, unsigned long long);
static int (*p_cudaGraphLaunch)(void*, void*);
static int (*p_cudaGraphExecDestroy)(void*);
static int (*p_cudaGraphDestroy)(void*);

#define SYM(h, name, req) do { *(void**)(&p_##name) = dlsym(h, #name); if (!p_##name && req) return #name; } while (0)

// rb_bind_nccl returns the name of the first missing required symbol, or NULL.
static const char* rb_bind_nccl(void* h) {
	rb_nccl = h;
	SYM(h, ncclGetVersion, 1);
	SYM(h, ncclGetUniqueId, 1);
	SYM(h, ncclCommInitRank, 1);
	SYM(h, ncclCommInitRankConfig, 0);
	SYM(h, ncclCommDestroy, 1);
	SYM(h, ncclCommFinalize, 0);
	SYM(h, ncclCommAbort, 1);
	SYM(h, ncclCommGetAsyncError, 1);
	SYM(h, ncclGetErrorString, 1);
	SYM(h, ncclGetLastError, 0);
	SYM(h, ncclGroupStart, 1);
	SYM(h, ncclGroupEnd, 1);
	SYM(h, ncclAllReduce, 1);
	SYM(h, ncclAllGather, 1);
	SYM(h, ncclReduceScatter, 1);
	SYM(h, ncclBroadcast, 1);
	SYM(h, ncclReduce, 1);
	SYM(h, ncclAlltoAll, 0);
	SYM(h, ncclSend, 1);
	SYM(h, ncclRecv, 1);
	return NULL;
}

static const char* rb_bind_cudart(void* h) {
	rb_cudart = h;
	SYM(h, cudaGetDeviceCount, 1);
	SYM(h, cudaSetDevice, 1);
	SYM(h, cudaMalloc, 1);
	SYM(h, cudaFree, 1);
	SYM(h, cudaMemcpy, 1);
	SYM(h, cudaMemset, 1);
	SYM(h, cudaStreamCreate, 1);
	SYM(h, cudaStreamDestroy, 1);
	SYM(h, cudaStreamQuery, 1);
	SYM(h, cudaStreamSynchronize, 1);
	SYM(h, cudaRuntimeGetVersion, 0);
	SYM(h, cudaDriverGetVersion, 0);
	SYM(h, cudaGetErrorString, 1);
	SYM(h, cudaDeviceGetPCIBusId, 0);
	SYM(h, cudaEventCreate, 0);
	SYM(h, cudaEventDestroy, 0);
	SYM(h, cudaEventRecord, 0);
	SYM(h, cudaEventElapsedTime, 0);
	SYM(h, cudaStreamBeginCapture, 0);
	SYM(h, cudaStreamEndCapture, 0);
	SYM(h, cudaGraphInstantiateWithFlags, 0);
	SYM(h, cudaGraphLaunch, 0);
	SYM(h, cudaGraphExecDestroy, 0);
	SYM(h, cudaGraphDestroy, 0);
	// CUDA 12 renamed the struct-filling call; the old name stays for ABI
	// compatibility with older structs, so prefer the _v2 symbol.
	*(void**)(&p_cudaGetDeviceProperties) = dlsym(h, "cudaGetDeviceProperties_v2");
	if (!p_cudaGetDeviceProperties) *(void**)(&p_cudaGetDeviceProperties) = dlsym(h, "cudaGetDeviceProperties");
	return NULL;
}

static int rb_has_alltoall(void) { return p_ncclAlltoAll != NULL; }
static int rb_has_lasterror(void) { return p_ncclGetLastError != NULL; }
static int rb_has_config(void) { return p_ncclCommInitRankConfig != NULL; }
static int rb_has_events(void) { return p_cudaEventCreate && p_cudaEventDestroy && p_cudaEventRecord && p_cudaEventElapsedTime; }
static int rb_cudaEventCreate(uintptr_t* e) { void* x = NULL; int r = p_cudaEventCreate(&x); *e = (uintptr_t)x; return r; }
static int rb_cudaEventDestroy(uintptr_t e) { return p_cudaEventDestroy((void*)e); }
static int rb_cudaEventRecord(uintptr_t e, uintptr_t s) { return p_cudaEventRecord((void*)e, (void*)s); }
static int rb_cudaEventElapsedTime(float* ms, uintptr_t a, uintptr_t b) { return p_cudaEventElapsedTime(ms, (void*)a, (void*)b); }
static int rb_has_graphs(void) {
	return p_cudaStreamBeginCapture && p_cudaStreamEndCapture && p_cudaGraphInstantiateWithFlags && p_cudaGraphLaunch && p_cudaGraphExecDestroy && p_cudaGraphDestroy;
}
// cudaStreamCaptureModeThreadLocal (1), as nccl-tests captures.
static int rb_cudaStreamBeginCapture(uintptr_t s) { return p_cudaStreamBeginCapture((void*)s, 1); }
static int rb_cudaStreamEndCapture(uintptr_t s, uintptr_t* g) { void* x = NULL; int r = p_cudaStreamEndCapture((void*)s, &x); *g = (uintptr_t)x; return r; }
static int rb_cudaGraphInstantiate(uintptr_t* e, uintptr_t g) { void* x = NULL; int r = p_cudaGraphInstantiateWithFlags(&x, (void*)g, 0); *e = (uintptr_t)x; return r; }
static int rb_cudaGraphLaunch(uintptr_t e, uintptr_t s) { return p_cudaGraphLaunch((void*)e, (void*)s); }
static int rb_cudaGraphExecDestroy(uintptr_t e) { return p_cudaGraphExecDestroy((void*)e); }
static int rb_cudaGraphDestroy(uintptr_t g) { return p_cudaGraphDestroy((void*)g); }

static int rb_ncclGetVersion(int* v) { return p_ncclGetVersion(v); }
static int rb_ncclGetUniqueId(void* id) { return p_ncclGetUniqueId((rb_uid*)id); }
static int rb_ncclCommInitRank(uintptr_t* comm, int n, void* id, int rank) {
	rb_uid u;
	memcpy(&u, id, sizeof u);
	void* c = NULL;
	int r = p_ncclCommInitRank(&c, n, u, rank);
	*comm = (uintptr_t)c;
	return r;
}
// Inside a group, ncclCommInitRank writes the communicator later (at
// ncclGroupEnd), so the caller must provide stable C memory for it.
static int rb_ncclCommInitRankPtr(uintptr_t slot, int n, void* id, int rank) {
	rb_uid u;
	memcpy(&u, id, sizeof u);
	return p_ncclCommInitRank((void**)slot, n, u, rank);
}
// ncclConfig_t as NCCL 2.14 defined it; later versions read the version
// field and take the fields they do not find here as unset.
typedef struct {
	size_t size;
	unsigned int magic, version;
	int blocking, cgaClusterSize, minCTAs, maxCTAs;
	const char* netName;
} rb_config_v21400;
static int rb_ncclCommInitRankConfigPtr(uintptr_t slot, int n, void* id, int rank, int blocking) {
	rb_uid u;
	memcpy(&u, id, sizeof u);
	// NCCL may read the config when a group ends, after this returns: keep it.
	rb_config_v21400* cfg = malloc(sizeof *cfg);
	*cfg = (rb_config_v21400){sizeof *cfg, 0xcafebeef, 21400, blocking, INT_MIN, INT_MIN, INT_MIN, NULL};
	return p_ncclCommInitRankConfig((void**)slot, n, u, rank, cfg);
}
static int rb_ncclCommDestroy(uintptr_t c) { return p_ncclCommDestroy((void*)c); }
static int rb_ncclCommFinalize(uintptr_t c) { return p_ncclCommFinalize ? p_ncclCommFinalize((void*)c) : 0; }
static int rb_ncclCommAbort(uintptr_t c) { return p_ncclCommAbort((void*)c); }
static int rb_ncclCommGetAsyncError(uintptr_t c, int* e) { return p_ncclCommGetAsyncError((void*)c, e); }
static const char* rb_ncclGetErrorString(int r) { return p_ncclGetErrorString(r); }
static const char* rb_ncclGetLastError(uintptr_t c) { return p_ncclGetLastError ? p_ncclGetLastError((void*)c) : ""; }
static int rb_ncclGroupStart(void) { return p_ncclGroupStart(); }
static int rb_ncclGroupEnd(void) { return p_ncclGroupEnd(); }
static int rb_ncclAllReduce(uintptr_t s, uintptr_t r, size_t n, int t, int op, uintptr_t c, uintptr_t st) {
	return p_ncclAllReduce((const void*)s, (void*)r, n, t, op, (void*)c, (void*)st);
}
static int rb_ncclAllGather(uintptr_t s, uintptr_t r, size_t n, int t, uintptr_t c, uintptr_t st) {
	return p_ncclAllGather((const void*)s, (void*)r, n, t, (void*)c, (void*)st);
}
static int rb_ncclReduceScatter(uintptr_t s, uintptr_t r, size_t n, int t, int op, uintptr_t c, uintptr_t st) {
	return p_ncclReduceScatter((const void*)s, (void*)r, n, t, op, (void*)c, (void*)st);
}
static int rb_ncclBroadcast(uintptr_t s, uintptr_t r, size_t n, int t, int root, uintptr_t c, uintptr_t st) {
	return p_ncclBroadcast((const void*)s, (void*)r, n, t, root, (void*)c, (void*)st);
}
static int rb_ncclReduce(uintptr_t s, uintptr_t r, size_t n, int t, int op, int root, uintptr_t c, uintptr_t st) {
	return p_ncclReduce((const void*)s, (void*)r, n, t, op, root, (void*)c, (void*)st);
}
static int rb_ncclAlltoAll(uintptr_t s, uintptr_t r, size_t n, int t, uintptr_t c, uintptr_t st) {
	return p_ncclAlltoAll((const void*)s, (void*)r, n, t, (void*)c, (void*)st);
}
static int rb_ncclSend(uintptr_t s, size_t n, int t, int peer, uintptr_t c, uintptr_t st) {
	return p_ncclSend((const void*)s, n, t, peer, (void*)c, (void*)st);
}
static int rb_ncclRecv(uintptr_t r, size_t n, int t, int peer, uintptr_t c, uintptr_t st) {
	return p_ncclRecv((void*)r, n, t, peer, (void*)c, (void*)st);
}

static int rb_cudaGetDeviceCount(int* n) { return p_cudaGetDeviceCount(n); }
static int rb_cudaSetDevice(int d) { return p_cudaSetDevice(d); }
static int rb_cudaMalloc(uintptr_t* p, size_t n) { void* x = NULL; int r = p_cudaMalloc(&x, n); *p = (uintptr_t)x; return r; }
static int rb_cudaFree(uintptr_t p) { return p_cudaFree((void*)p); }
// kind: 1 = host to device, 2 = device to host (cudaMemcpyKind values).
static int rb_cudaMemcpyH2D(uintptr_t dst, const void* src, size_t n) { return p_cudaMemcpy((void*)dst, src, n, 1); }
static int rb_cudaMemcpyD2H(void* dst, uintptr_t src, size_t n) { return p_cudaMemcpy(dst, (const void*)src, n, 2); }
static int rb_cudaMemset(uintptr_t p, int v, size_t n) { return p_cudaMemset((void*)p, v, n); }
static int rb_cudaStreamCreate(uintptr_t* s) { void* x = NULL; int r = p_cudaStreamCreate(&x); *s = (uintptr_t)x; return r; }
static int rb_cudaStreamDestroy(uintptr_t s) { return p_cudaStreamDestroy((void*)s); }
static int rb_cudaStreamQuery(uintptr_t s) { return p_cudaStreamQuery((void*)s); }
static int rb_cudaStreamSynchronize(uintptr_t s) { return p_cudaStreamSynchronize((void*)s); }
static int rb_cudaRuntimeGetVersion(int* v) { if (!p_cudaRuntimeGetVersion) { *v = 0; return 0; } return p_cudaRuntimeGetVersion(v); }
static int rb_cudaDriverGetVersion(int* v) { if (!p_cudaDriverGetVersion) { *v = 0; return 0; } return p_cudaDriverGetVersion(v); }
static const char* rb_cudaGetErrorString(int e) { return p_cudaGetErrorString(e); }
// cudaDeviceProp begins with char name[256] in every CUDA version; the rest
// of the struct changes, so a generous buffer is passed and only the name read.
static int rb_cudaDeviceName(int dev, char* out, int len) {
	if (!p_cudaGetDeviceProperties) { strncpy(out, "unknown", len); return 0; }
	char* buf = calloc(1, 1 << 14);
	int r = p_cudaGetDeviceProperties(buf, dev);
	if (r == 0) { strncpy(out, buf, len - 1); out[len - 1] = 0; }
	free(buf);
	return r;
}
static int rb_cudaDeviceGetPCIBusId(char* buf, int len, int dev) {
	if (!p_cudaDeviceGetPCIBusId) { buf[0] = 0; return 0; }
	return p_cudaDeviceGetPCIBusId(buf, len, dev);
}
*/
import "C"

import (
	"time"
	"unsafe"
)

func bindNCCL(h unsafe.Pointer) string {
	if m := C.rb_bind_nccl(h); m != nil {
		return C.GoString(m)
	}
	return ""
}

func bindCudart(h unsafe.Pointer) string {
	if m := C.rb_bind_cudart(h); m != nil {
		return C.GoString(m)
	}
	return ""
}

func hasAlltoAll() bool { return C.rb_has_alltoall() != 0 }
func hasConfig() bool   { return C.rb_has_config() != 0 }
func hasEvents() bool   { return C.rb_has_events() != 0 }
func hasGraphs() bool   { return C.rb_has_graphs() != 0 }

// ---- NCCL calls. Device pointers, streams and communicators are opaque
// C pointers carried as uintptr so Go never dereferences them.

func ncclCheck(call string, r C.int, comm Comm) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: int(r), Text: C.GoString(C.rb_ncclGetErrorString(r))}
	if r != codeInProgress && C.rb_has_lasterror() != 0 {
		e.Detail = C.GoString(C.rb_ncclGetLastError(C.uintptr_t(comm)))
	}
	return e
}

func cudaCheck(call string, r C.int) error {
	if r == 0 {
		return nil
	}
	return &CudaError{Call: call, Code: int(r), Text: C.GoString(C.rb_cudaGetErrorString(r))}
}

func ncclVersion() (int, error) {
	var v C.int
	err := ncclCheck("ncclGetVersion", C.rb_ncclGetVersion(&v), 0)
	return int(v), err
}

// GetUniqueID creates the id rank 0 shares with every other rank.
func (l *Lib) GetUniqueID() (UniqueID, error) {
	var id UniqueID
	err := ncclCheck("ncclGetUniqueId", C.rb_ncclGetUniqueId(unsafe.Pointer(&id[0])), 0)
	return id, err
}

// CommInitRanks creates one communicator per (rank, device) pair of this
// process, grouped when there is more than one, as NCCL requires for a
// single thread driving several GPUs. With nonblocking (and HasNonblocking)
// they are created with blocking=0: this and every later call on them
// returns promptly, possibly with an error for which InProgress is true,
// and CommAsyncError says when the work is done.
func (l *Lib) CommInitRanks(nranks int, id UniqueID, ranks, devs []int, nonblocking bool) ([]Comm, error) {
	nonblocking = nonblocking && l.HasNonblocking
	n := len(ranks)
	slots := unsafe.Slice((*C.uintptr_t)(C.calloc(C.size_t(n), 8)), n)
	defer C.free(unsafe.Pointer(&slots[0]))
	cid := C.CBytes(id[:])
	defer C.free(cid)
	if n > 1 {
		if err := ncclCheck("ncclGroupStart", C.rb_ncclGroupStart(), 0); err != nil {
			return nil, err
		}
	}
	var firstErr error
	for i := range ranks {
		if err := l.SetDevice(devs[i]); err != nil {
			firstErr = err
			break
		}
		slot := C.uintptr_t(uintptr(unsafe.Pointer(&slots[i])))
		var err error
		if nonblocking {
			err = ncclCheck("ncclCommInitRankConfig", C.rb_ncclCommInitRankConfigPtr(slot, C.int(nranks), cid, C.int(ranks[i]), 0), 0)
		} else {
			err = ncclCheck("ncclCommInitRank", C.rb_ncclCommInitRankPtr(slot, C.int(nranks), cid, C.int(ranks[i])), 0)
		}
		if err != nil && !InProgress(err) {
			firstErr = err
			break
		}
	}
	if n > 1 {
		if err := ncclCheck("ncclGroupEnd", C.rb_ncclGroupEnd(), 0); err != nil && !InProgress(err) && firstErr == nil {
			firstErr = err
		}
	}
	comms := make([]Comm, n)
	for i := range comms {
		comms[i] = Comm(slots[i])
	}
	return comms, firstErr
}

const codeInProgress = 7 // ncclInProgress

// InProgress reports whether err is ncclInProgress: a call on a
// non-blocking communicator was accepted but has not finished; poll
// CommAsyncError until it no longer says so.
func InProgress(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Code == codeInProgress
}

// CommFinalize flushes c's outstanding work and releases its network
// resources (NCCL >= 2.18; nil where the library lacks it). On a
// non-blocking communicator it may answer InProgress: poll CommAsyncError
// before CommDestroy.
func (l *Lib) CommFinalize(c Comm) error {
	return ncclCheck("ncclCommFinalize", C.rb_ncclCommFinalize(C.uintptr_t(c)), c)
}

// CommDestroy frees c. An InProgress answer (non-blocking communicator)
// means NCCL finishes freeing it in the background: c is gone either way.
func (l *Lib) CommDestroy(c Comm) error {
	return ncclCheck("ncclCommDestroy", C.rb_ncclCommDestroy(C.uintptr_t(c)), c)
}

// CommAbort stops c and frees it: no call may use c afterwards, and none
// may run concurrently with it (call it from the thread that owns c; on a
// non-blocking communicator no call blocks, so that thread is free to).
func (l *Lib) CommAbort(c Comm) error {
	return ncclCheck("ncclCommAbort", C.rb_ncclCommAbort(C.uintptr_t(c)), c)
}

// CommAsyncError reports an error NCCL found in the background (e.g. a
// network failure during a collective).
func (l *Lib) CommAsyncError(c Comm) error {
	var e C.int
	if err := ncclCheck("ncclCommGetAsyncError", C.rb_ncclCommGetAsyncError(C.uintptr_t(c), &e), c); err != nil {
		return err
	}
	return ncclCheck("async", e, c)
}

func (l *Lib) GroupStart() error { return ncclCheck("ncclGroupStart", C.rb_ncclGroupStart(), 0) }
func (l *Lib) GroupEnd() error   { return ncclCheck("ncclGroupEnd", C.rb_ncclGroupEnd(), 0) }

func (l *Lib) AllReduce(s, r DevPtr, count int, dt, op int, c Comm, st Stream) error {
	return ncclCheck("ncclAllReduce", C.rb_ncclAllReduce(C.uintptr_t(s), C.uintptr_t(r), C.size_t(count), C.int(dt), C.int(op), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) AllGather(s, r DevPtr, count int, dt int, c Comm, st Stream) error {
	return ncclCheck("ncclAllGather", C.rb_ncclAllGather(C.uintptr_t(s), C.uintptr_t(r), C.size_t(count), C.int(dt), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) ReduceScatter(s, r DevPtr, count int, dt, op int, c Comm, st Stream) error {
	return ncclCheck("ncclReduceScatter", C.rb_ncclReduceScatter(C.uintptr_t(s), C.uintptr_t(r), C.size_t(count), C.int(dt), C.int(op), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) Broadcast(s, r DevPtr, count int, dt, root int, c Comm, st Stream) error {
	return ncclCheck("ncclBroadcast", C.rb_ncclBroadcast(C.uintptr_t(s), C.uintptr_t(r), C.size_t(count), C.int(dt), C.int(root), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) Reduce(s, r DevPtr, count int, dt, op, root int, c Comm, st Stream) error {
	return ncclCheck("ncclReduce", C.rb_ncclReduce(C.uintptr_t(s), C.uintptr_t(r), C.size_t(count), C.int(dt), C.int(op), C.int(root), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) AlltoAll(s, r DevPtr, count int, dt int, c Comm, st Stream) error {
	return ncclCheck("ncclAlltoAll", C.rb_ncclAlltoAll(C.uintptr_t(s), C.uintptr_t(r), C.size_t(count), C.int(dt), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) Send(s DevPtr, count int, dt, peer int, c Comm, st Stream) error {
	return ncclCheck("ncclSend", C.rb_ncclSend(C.uintptr_t(s), C.size_t(count), C.int(dt), C.int(peer), C.uintptr_t(c), C.uintptr_t(st)), c)
}

func (l *Lib) Recv(r DevPtr, count int, dt, peer int, c Comm, st Stream) error {
	return ncclCheck("ncclRecv", C.rb_ncclRecv(C.uintptr_t(r), C.size_t(count), C.int(dt), C.int(peer), C.uintptr_t(c), C.uintptr_t(st)), c)
}

// ---- CUDA runtime calls.

const cudaErrorNotReady = 600

func (l *Lib) DeviceCount() (int, error) {
	var n C.int
	err := cudaCheck("cudaGetDeviceCount", C.rb_cudaGetDeviceCount(&n))
	return int(n), err
}

func (l *Lib) SetDevice(d int) error { return cudaCheck("cudaSetDevice", C.rb_cudaSetDevice(C.int(d))) }

func (l *Lib) Malloc(n int) (DevPtr, error) {
	var p C.uintptr_t
	err := cudaCheck("cudaMalloc", C.rb_cudaMalloc(&p, C.size_t(n)))
	return DevPtr(p), err
}

func (l *Lib) Free(p DevPtr) error { return cudaCheck("cudaFree", C.rb_cudaFree(C.uintptr_t(p))) }

func (l *Lib) MemcpyH2D(dst DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return cudaCheck("cudaMemcpy", C.rb_cudaMemcpyH2D(C.uintptr_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

func (l *Lib) MemcpyD2H(dst []byte, src DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return cudaCheck("cudaMemcpy", C.rb_cudaMemcpyD2H(unsafe.Pointer(&dst[0]), C.uintptr_t(src), C.size_t(len(dst))))
}

func (l *Lib) Memset(p DevPtr, v byte, n int) error {
	return cudaCheck("cudaMemset", C.rb_cudaMemset(C.uintptr_t(p), C.int(v), C.size_t(n)))
}

func (l *Lib) StreamCreate() (Stream, error) {
	var s C.uintptr_t
	err := cudaCheck("cudaStreamCreate", C.rb_cudaStreamCreate(&s))
	return Stream(s), err
}

func (l *Lib) StreamDestroy(s Stream) error {
	return cudaCheck("cudaStreamDestroy", C.rb_cudaStreamDestroy(C.uintptr_t(s)))
}

// StreamDone polls a stream without blocking, so waits can have deadlines.
func (l *Lib) StreamDone(s Stream) (bool, error) {
	r := C.rb_cudaStreamQuery(C.uintptr_t(s))
	if r == cudaErrorNotReady {
		return false, nil
	}
	return r == 0, cudaCheck("cudaStreamQuery", r)
}

// Graph is a cudaGraph_t a stream capture recorded, GraphExec its
// executable form (-G).
type (
	Graph     uintptr
	GraphExec uintptr
)

// StreamBeginCapture starts recording s's work into a graph instead of
// running it.
func (l *Lib) StreamBeginCapture(s Stream) error {
	return cudaCheck("cudaStreamBeginCapture", C.rb_cudaStreamBeginCapture(C.uintptr_t(s)))
}

// StreamEndCapture ends the recording and returns the graph.
func (l *Lib) StreamEndCapture(s Stream) (Graph, error) {
	var g C.uintptr_t
	err := cudaCheck("cudaStreamEndCapture", C.rb_cudaStreamEndCapture(C.uintptr_t(s), &g))
	return Graph(g), err
}

// GraphInstantiate makes g executable (cudaGraphInstantiateWithFlags).
func (l *Lib) GraphInstantiate(g Graph) (GraphExec, error) {
	var e C.uintptr_t
	err := cudaCheck("cudaGraphInstantiateWithFlags", C.rb_cudaGraphInstantiate(&e, C.uintptr_t(g)))
	return GraphExec(e), err
}

// GraphLaunch queues the graph's work on s.
func (l *Lib) GraphLaunch(e GraphExec, s Stream) error {
	return cudaCheck("cudaGraphLaunch", C.rb_cudaGraphLaunch(C.uintptr_t(e), C.uintptr_t(s)))
}

// GraphDestroy frees an executable graph and its graph.
func (l *Lib) GraphDestroy(e GraphExec, g Graph) error {
	err := cudaCheck("cudaGraphExecDestroy", C.rb_cudaGraphExecDestroy(C.uintptr_t(e)))
	if gerr := cudaCheck("cudaGraphDestroy", C.rb_cudaGraphDestroy(C.uintptr_t(g))); err == nil {
		err = gerr
	}
	return err
}

// Event is a cudaEvent_t: a mark in a stream that completes, with a time,
// when the work queued before it has.
type Event uintptr

func (l *Lib) EventCreate() (Event, error) {
	var e C.uintptr_t
	err := cudaCheck("cudaEventCreate", C.rb_cudaEventCreate(&e))
	return Event(e), err
}

func (l *Lib) EventDestroy(e Event) error {
	return cudaCheck("cudaEventDestroy", C.rb_cudaEventDestroy(C.uintptr_t(e)))
}

func (l *Lib) EventRecord(e Event, s Stream) error {
	return cudaCheck("cudaEventRecord", C.rb_cudaEventRecord(C.uintptr_t(e), C.uintptr_t(s)))
}

// EventElapsed is the time from a to b, both completed.
func (l *Lib) EventElapsed(a, b Event) (time.Duration, error) {
	var ms C.float
	if err := cudaCheck("cudaEventElapsedTime", C.rb_cudaEventElapsedTime(&ms, C.uintptr_t(a), C.uintptr_t(b))); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

func (l *Lib) StreamSynchronize(s Stream) error {
	return cudaCheck("cudaStreamSynchronize", C.rb_cudaStreamSynchronize(C.uintptr_t(s)))
}

func (l *Lib) RuntimeVersion() int {
	var v C.int
	C.rb_cudaRuntimeGetVersion(&v)
	return int(v)
}

func (l *Lib) DriverVersion() int {
	var v C.int
	C.rb_cudaDriverGetVersion(&v)
	return int(v)
}

func (l *Lib) DeviceName(dev int) (string, error) {
	buf := (*C.char)(C.calloc(256, 1))
	defer C.free(unsafe.Pointer(buf))
	err := cudaCheck("cudaGetDeviceProperties", C.rb_cudaDeviceName(C.int(dev), buf, 256))
	return C.GoString(buf), err
}

func (l *Lib) PCIBusID(dev int) string {
	buf := (*C.char)(C.calloc(64, 1))
	defer C.free(unsafe.Pointer(buf))
	if C.rb_cudaDeviceGetPCIBusId(buf, 64, C.int(dev)) != 0 {
		return ""
	}
	return C.GoString(buf)
}
