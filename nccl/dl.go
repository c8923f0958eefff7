package nccl

// The C side holds one function pointer per NCCL entry point, filled by
// dlsym, and tiny trampolines that call through them. Nothing is linked at
// build time, so the binary needs no CUDA headers or libraries. The CUDA
// runtime's calls are internal/cudart's (cuda.go).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char internal[128]; } rb_uid;

static void *rb_nccl;

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

static int rb_has_alltoall(void) { return p_ncclAlltoAll != NULL; }
static int rb_has_lasterror(void) { return p_ncclGetLastError != NULL; }
static int rb_has_config(void) { return p_ncclCommInitRankConfig != NULL; }

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

*/
import "C"

import (
	"errors"
	"unsafe"
)

func bindNCCL(h unsafe.Pointer) string {
	if m := C.rb_bind_nccl(h); m != nil {
		return C.GoString(m)
	}
	return ""
}

func hasAlltoAll() bool { return C.rb_has_alltoall() != 0 }
func hasConfig() bool   { return C.rb_has_config() != 0 }

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
	var e *Error
	return errors.As(err, &e) && e.Code == codeInProgress
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
