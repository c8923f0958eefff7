package cudart

// The C side holds one function pointer per CUDA entry point, filled by
// dlsym, and trampolines that call through them; a call whose pointer is
// NULL answers CodeUnbound. Device handles, streams, events and graphs are
// opaque C pointers carried as uintptr so Go never dereferences them.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int (*p_cudaGetDeviceCount)(int*);
static int (*p_cudaSetDevice)(int);
static int (*p_cudaMalloc)(void**, size_t);
static int (*p_cudaFree)(void*);
static int (*p_cudaMemcpy)(void*, const void*, size_t, int);
static int (*p_cudaMemset)(void*, int, size_t);
static const char* (*p_cudaGetErrorString)(int);
static int (*p_cudaDeviceGetPCIBusId)(char*, int, int);
static int (*p_cudaDeviceGetByPCIBusId)(int*, const char*);
static int (*p_cudaGetDeviceProperties)(void*, int);
static int (*p_cudaRuntimeGetVersion)(int*);
static int (*p_cudaDriverGetVersion)(int*);
static int (*p_cudaStreamCreate)(void**);
static int (*p_cudaStreamDestroy)(void*);
static int (*p_cudaStreamQuery)(void*);
static int (*p_cudaStreamSynchronize)(void*);
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

static int (*p_cuInit)(unsigned);
static int (*p_cuGetErrorString)(int, const char**);
static int (*p_cuPointerSetAttribute)(const void*, int, uintptr_t);
static int (*p_cuMemGetHandleForAddressRange)(void*, uintptr_t, size_t, int, unsigned long long);

#define RB_UNBOUND -1 // CodeUnbound
#define SYM(h, name) (*(void**)(&p_##name) = dlsym(h, #name))
#define CALL(name, ...) (p_##name ? p_##name(__VA_ARGS__) : RB_UNBOUND)

// Every pointer is set, to NULL where h lacks the symbol: a second runtime
// bound leaves nothing of the first.
static void rb_bind_cudart(void* h) {
	SYM(h, cudaGetDeviceCount);
	SYM(h, cudaSetDevice);
	SYM(h, cudaMalloc);
	SYM(h, cudaFree);
	SYM(h, cudaMemcpy);
	SYM(h, cudaMemset);
	SYM(h, cudaGetErrorString);
	SYM(h, cudaDeviceGetPCIBusId);
	SYM(h, cudaDeviceGetByPCIBusId);
	SYM(h, cudaRuntimeGetVersion);
	SYM(h, cudaDriverGetVersion);
	SYM(h, cudaStreamCreate);
	SYM(h, cudaStreamDestroy);
	SYM(h, cudaStreamQuery);
	SYM(h, cudaStreamSynchronize);
	SYM(h, cudaEventCreate);
	SYM(h, cudaEventDestroy);
	SYM(h, cudaEventRecord);
	SYM(h, cudaEventElapsedTime);
	SYM(h, cudaStreamBeginCapture);
	SYM(h, cudaStreamEndCapture);
	SYM(h, cudaGraphInstantiateWithFlags);
	SYM(h, cudaGraphLaunch);
	SYM(h, cudaGraphExecDestroy);
	SYM(h, cudaGraphDestroy);
	// CUDA 12 renamed the struct-filling call; the old name stays for ABI
	// compatibility with older structs, so prefer the _v2 symbol.
	*(void**)(&p_cudaGetDeviceProperties) = dlsym(h, "cudaGetDeviceProperties_v2");
	if (!p_cudaGetDeviceProperties) SYM(h, cudaGetDeviceProperties);
}

static void rb_bind_libcuda(void* h) {
	SYM(h, cuInit);
	SYM(h, cuGetErrorString);
	SYM(h, cuPointerSetAttribute);
	SYM(h, cuMemGetHandleForAddressRange);
}

static int rb_has_events(void) { return p_cudaEventCreate && p_cudaEventDestroy && p_cudaEventRecord && p_cudaEventElapsedTime; }
static int rb_has_graphs(void) {
	return p_cudaStreamBeginCapture && p_cudaStreamEndCapture && p_cudaGraphInstantiateWithFlags && p_cudaGraphLaunch && p_cudaGraphExecDestroy && p_cudaGraphDestroy;
}
static int rb_has_dmabuf(void) { return p_cuMemGetHandleForAddressRange != NULL; }

static const char* rb_errstr(int c) {
	const char* s = p_cudaGetErrorString ? p_cudaGetErrorString(c) : NULL;
	return s ? s : "unknown CUDA error";
}
static const char* rb_cu_errstr(int c) {
	const char* s = NULL;
	if (CALL(cuGetErrorString, c, &s) != 0 || !s) return "unknown CUDA driver error";
	return s;
}

// The calls on a device make it current first, in the same C call (dev < 0:
// the thread's current device, untouched). *which says which call failed:
// 1 cudaSetDevice, 2 the call itself.
static int rb_on(int dev, int* which) {
	*which = 1;
	int r = dev < 0 ? 0 : CALL(cudaSetDevice, dev);
	if (!r) *which = 2;
	return r;
}
// Driver calls need the device's primary context current on this thread:
// cudaSetDevice makes it so from CUDA 12 on, and cudaFree(NULL), the
// runtime's idiom for it, does on older runtimes too.
static int rb_ctx(int dev, int* which) {
	int r = rb_on(dev, which);
	if (r) return r;
	r = CALL(cudaFree, NULL);
	if (r) *which = 1;
	return r;
}
static int rb_malloc(int dev, uintptr_t* p, size_t n, int* which) {
	void* q = NULL;
	int r = rb_on(dev, which);
	if (!r) r = CALL(cudaMalloc, &q, n);
	*p = (uintptr_t)q;
	return r;
}
static int rb_free(int dev, uintptr_t p, int* which) {
	int r = rb_on(dev, which);
	return r ? r : CALL(cudaFree, (void*)p);
}
// cudaMemcpyKind: 1 host to device, 2 device to host.
static int rb_h2d(int dev, uintptr_t dst, const void* src, size_t n, int* which) {
	int r = rb_on(dev, which);
	return r ? r : CALL(cudaMemcpy, (void*)dst, src, n, 1);
}
static int rb_d2h(int dev, void* dst, uintptr_t src, size_t n, int* which) {
	int r = rb_on(dev, which);
	return r ? r : CALL(cudaMemcpy, dst, (const void*)src, n, 2);
}
static int rb_memset(int dev, uintptr_t p, int v, size_t n, int* which) {
	int r = rb_on(dev, which);
	return r ? r : CALL(cudaMemset, (void*)p, v, n);
}
#define RB_DMA_BUF_FD 1 // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
static int rb_dmabuf(int dev, uintptr_t p, size_t n, int* fd, int* which) {
	*fd = -1;
	int r = rb_ctx(dev, which);
	return r ? r : CALL(cuMemGetHandleForAddressRange, fd, p, n, RB_DMA_BUF_FD, 0);
}
#define RB_SYNC_MEMOPS 6 // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
static int rb_sync_memops(int dev, uintptr_t p, int* which) {
	unsigned int one = 1;
	int r = rb_ctx(dev, which);
	return r ? r : CALL(cuPointerSetAttribute, &one, RB_SYNC_MEMOPS, p);
}

static int rb_count(int* n) { return CALL(cudaGetDeviceCount, n); }
static int rb_set(int d) { return CALL(cudaSetDevice, d); }
static int rb_by_bus(int* d, const char* id) { return CALL(cudaDeviceGetByPCIBusId, d, id); }
static int rb_bus(char* buf, int len, int dev) { return CALL(cudaDeviceGetPCIBusId, buf, len, dev); }
// cudaDeviceProp begins with char name[256] in every CUDA version; the rest
// of the struct changes, so a generous buffer is passed and only the name read.
static int rb_name(int dev, char* out, int len) {
	if (!p_cudaGetDeviceProperties) { strncpy(out, "unknown", len - 1); return 0; }
	char* buf = calloc(1, 1 << 14);
	int r = p_cudaGetDeviceProperties(buf, dev);
	if (r == 0) strncpy(out, buf, len - 1);
	free(buf);
	return r;
}
static int rb_rtver(int* v) { return CALL(cudaRuntimeGetVersion, v); }
static int rb_drver(int* v) { return CALL(cudaDriverGetVersion, v); }
static int rb_cu_init(void) { return CALL(cuInit, 0); }

static int rb_stream_create(uintptr_t* s) { void* x = NULL; int r = CALL(cudaStreamCreate, &x); *s = (uintptr_t)x; return r; }
static int rb_stream_destroy(uintptr_t s) { return CALL(cudaStreamDestroy, (void*)s); }
static int rb_stream_query(uintptr_t s) { return CALL(cudaStreamQuery, (void*)s); }
static int rb_stream_sync(uintptr_t s) { return CALL(cudaStreamSynchronize, (void*)s); }
static int rb_event_create(uintptr_t* e) { void* x = NULL; int r = CALL(cudaEventCreate, &x); *e = (uintptr_t)x; return r; }
static int rb_event_destroy(uintptr_t e) { return CALL(cudaEventDestroy, (void*)e); }
static int rb_event_record(uintptr_t e, uintptr_t s) { return CALL(cudaEventRecord, (void*)e, (void*)s); }
static int rb_event_elapsed(float* ms, uintptr_t a, uintptr_t b) { return CALL(cudaEventElapsedTime, ms, (void*)a, (void*)b); }
// cudaStreamCaptureModeThreadLocal (1), as nccl-tests captures.
static int rb_begin_capture(uintptr_t s) { return CALL(cudaStreamBeginCapture, (void*)s, 1); }
static int rb_end_capture(uintptr_t s, uintptr_t* g) { void* x = NULL; int r = CALL(cudaStreamEndCapture, (void*)s, &x); *g = (uintptr_t)x; return r; }
static int rb_graph_instantiate(uintptr_t* e, uintptr_t g) { void* x = NULL; int r = CALL(cudaGraphInstantiateWithFlags, &x, (void*)g, 0); *e = (uintptr_t)x; return r; }
static int rb_graph_launch(uintptr_t e, uintptr_t s) { return CALL(cudaGraphLaunch, (void*)e, (void*)s); }
static int rb_graph_exec_destroy(uintptr_t e) { return CALL(cudaGraphExecDestroy, (void*)e); }
static int rb_graph_destroy(uintptr_t g) { return CALL(cudaGraphDestroy, (void*)g); }
*/
import "C"

import (
	"time"
	"unsafe"

	"github.com/rdmabench/rdmabench/internal/dlopen"
)

// Bind binds the runtime's entry points on h (a dlopen handle) and returns
// the name of the first of Base and need that h lacks, or "": then nothing
// was bound and what was bound before stays.
func Bind(h unsafe.Pointer, need ...string) (missing string) {
	if m := firstMissing(h, append(append([]string{}, Base...), need...)); m != "" {
		return m
	}
	C.rb_bind_cudart(h)
	return ""
}

// BindDriver binds the driver's (libcuda) entry points on h, as Bind does.
// The driver calls need the runtime bound too (they make the device
// current with it).
func BindDriver(h unsafe.Pointer) (missing string) {
	if m := firstMissing(h, driverCalls); m != "" {
		return m
	}
	C.rb_bind_libcuda(h)
	return ""
}

func firstMissing(h unsafe.Pointer, names []string) string {
	for _, n := range names {
		if !dlopen.Has(h, n) {
			return n
		}
	}
	return ""
}

// HasEvents: the runtime has the four event calls (EventCreate and on).
func HasEvents() bool { return C.rb_has_events() != 0 }

// HasGraphs: the runtime has stream capture and the graph calls.
func HasGraphs() bool { return C.rb_has_graphs() != 0 }

// HasDmabuf: the driver exports device memory as dma-buf (CUDA >= 11.7).
func HasDmabuf() bool { return C.rb_has_dmabuf() != 0 }

// unbound is CodeUnbound in C's type.
const unbound = C.int(CodeUnbound)

const unboundText = "not in the loaded CUDA library"

// What a device call's which says failed: cudaSetDevice (or, before a
// driver call, cudaFree(NULL)), or the call itself.
const (
	whichSetDevice C.int = 1
	whichCall      C.int = 2
)

func errText(r C.int) string {
	if r == unbound {
		return unboundText
	}
	return C.GoString(C.rb_errstr(r))
}

// check is the error of a runtime call, nil when r is 0.
func check(call string, dev Device, r C.int) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Device: int(dev), Code: int(r), Text: errText(r)}
}

// on is the error of a call on a device.
func (d Device) on(call string, r, which C.int) error {
	if which == whichSetDevice {
		call = "cudaSetDevice"
	}
	return check(call, d, r)
}

// drv is on's for a driver call.
func (d Device) drv(call string, r, which C.int) error {
	if r == 0 || which == whichSetDevice {
		return d.on(call, r, which)
	}
	text := unboundText
	if r != unbound {
		text = C.GoString(C.rb_cu_errstr(r))
	}
	return &Error{Call: call, Device: int(d), Code: int(r), Text: text, Driver: true}
}

// ---- Calls that take no device or name it themselves.

func DeviceCount() (int, error) {
	var n C.int
	err := check("cudaGetDeviceCount", Current, C.rb_count(&n))
	return int(n), err
}

// SetDevice makes d the calling thread's current device.
func SetDevice(d int) error { return check("cudaSetDevice", Current, C.rb_set(C.int(d))) }

// DeviceByBusID is the device at a PCI bus id ("0000:3b:00.0").
func DeviceByBusID(id string) (int, error) {
	cs := C.CString(id)
	defer C.free(unsafe.Pointer(cs))
	var d C.int
	err := check("cudaDeviceGetByPCIBusId("+id+")", Current, C.rb_by_bus(&d, cs))
	return int(d), err
}

// PCIBusID is dev's PCI bus id as the runtime writes it ("0000:3B:00.0").
func PCIBusID(dev int) (string, error) {
	var buf [64]C.char
	if err := check("cudaDeviceGetPCIBusId", Device(dev), C.rb_bus(&buf[0], C.int(len(buf)), C.int(dev))); err != nil {
		return "", err
	}
	return C.GoString(&buf[0]), nil
}

// DeviceName is dev's product name; "unknown" when the runtime lacks
// cudaGetDeviceProperties.
func DeviceName(dev int) (string, error) {
	var buf [256]C.char
	err := check("cudaGetDeviceProperties", Device(dev), C.rb_name(C.int(dev), &buf[0], C.int(len(buf))))
	return C.GoString(&buf[0]), err
}

// RuntimeVersion is cudaRuntimeGetVersion's code (12040 for 12.4), 0 when
// unknown; DriverVersion is cudaDriverGetVersion's.
func RuntimeVersion() int {
	var v C.int
	if C.rb_rtver(&v) != 0 {
		return 0
	}
	return int(v)
}

func DriverVersion() int {
	var v C.int
	if C.rb_drver(&v) != 0 {
		return 0
	}
	return int(v)
}

// DriverInit is cuInit(0).
func DriverInit() error {
	return Current.drv("cuInit", C.rb_cu_init(), whichCall)
}

// ---- Calls on a device (Current: the thread's own).

func (d Device) Malloc(n int) (uintptr, error) {
	var p C.uintptr_t
	var which C.int
	r := C.rb_malloc(C.int(d), &p, C.size_t(n), &which)
	return uintptr(p), d.on("cudaMalloc", r, which)
}

func (d Device) Free(p uintptr) error {
	var which C.int
	return d.on("cudaFree", C.rb_free(C.int(d), C.uintptr_t(p), &which), which)
}

// MemcpyH2D and MemcpyD2H copy between Go memory (passed as a pointer
// argument, so cgo keeps it in place for the call) and device memory;
// synchronous. An empty slice copies nothing.
func (d Device) MemcpyH2D(dst uintptr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	var which C.int
	r := C.rb_h2d(C.int(d), C.uintptr_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), &which)
	return d.on("cudaMemcpy(host to device)", r, which)
}

func (d Device) MemcpyD2H(dst []byte, src uintptr) error {
	if len(dst) == 0 {
		return nil
	}
	var which C.int
	r := C.rb_d2h(C.int(d), unsafe.Pointer(&dst[0]), C.uintptr_t(src), C.size_t(len(dst)), &which)
	return d.on("cudaMemcpy(device to host)", r, which)
}

func (d Device) Memset(p uintptr, v byte, n int) error {
	var which C.int
	return d.on("cudaMemset", C.rb_memset(C.int(d), C.uintptr_t(p), C.int(v), C.size_t(n), &which), which)
}

// DmabufFD exports [p, p+n) as a dma-buf (cuMemGetHandleForAddressRange);
// the caller owns the descriptor. d may not be Current: the driver call
// needs the device's primary context made current.
func (d Device) DmabufFD(p uintptr, n int) (int, error) {
	var fd, which C.int
	r := C.rb_dmabuf(C.int(d), C.uintptr_t(p), C.size_t(n), &fd, &which)
	return int(fd), d.drv("cuMemGetHandleForAddressRange(DMA_BUF_FD)", r, which)
}

// SyncMemops sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the allocation at p.
func (d Device) SyncMemops(p uintptr) error {
	var which C.int
	return d.drv("cuPointerSetAttribute(SYNC_MEMOPS)", C.rb_sync_memops(C.int(d), C.uintptr_t(p), &which), which)
}

// ---- Streams, events and graphs, on the thread's current device, each
// in the order of its life: create, use, destroy.

func StreamCreate() (uintptr, error) {
	var s C.uintptr_t
	err := check("cudaStreamCreate", Current, C.rb_stream_create(&s))
	return uintptr(s), err
}

// StreamDone polls a stream without blocking (cudaStreamQuery).
func StreamDone(s uintptr) (bool, error) {
	r := C.rb_stream_query(C.uintptr_t(s))
	if r == CudaErrorNotReady {
		return false, nil
	}
	return r == 0, check("cudaStreamQuery", Current, r)
}

func StreamSynchronize(s uintptr) error {
	return check("cudaStreamSynchronize", Current, C.rb_stream_sync(C.uintptr_t(s)))
}

func StreamDestroy(s uintptr) error {
	return check("cudaStreamDestroy", Current, C.rb_stream_destroy(C.uintptr_t(s)))
}

func EventCreate() (uintptr, error) {
	var e C.uintptr_t
	err := check("cudaEventCreate", Current, C.rb_event_create(&e))
	return uintptr(e), err
}

func EventRecord(e, s uintptr) error {
	return check("cudaEventRecord", Current, C.rb_event_record(C.uintptr_t(e), C.uintptr_t(s)))
}

// EventElapsed is the time from a to b, both completed.
func EventElapsed(a, b uintptr) (time.Duration, error) {
	var ms C.float
	if err := check("cudaEventElapsedTime", Current, C.rb_event_elapsed(&ms, C.uintptr_t(a), C.uintptr_t(b))); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

func EventDestroy(e uintptr) error {
	return check("cudaEventDestroy", Current, C.rb_event_destroy(C.uintptr_t(e)))
}

// StreamBeginCapture records s's work into a graph (thread-local capture
// mode, as nccl-tests captures) instead of running it.
func StreamBeginCapture(s uintptr) error {
	return check("cudaStreamBeginCapture", Current, C.rb_begin_capture(C.uintptr_t(s)))
}

func StreamEndCapture(s uintptr) (graph uintptr, err error) {
	var g C.uintptr_t
	err = check("cudaStreamEndCapture", Current, C.rb_end_capture(C.uintptr_t(s), &g))
	return uintptr(g), err
}

// GraphInstantiate makes a graph executable (cudaGraphInstantiateWithFlags).
func GraphInstantiate(g uintptr) (exec uintptr, err error) {
	var e C.uintptr_t
	err = check("cudaGraphInstantiateWithFlags", Current, C.rb_graph_instantiate(&e, C.uintptr_t(g)))
	return uintptr(e), err
}

func GraphLaunch(exec, s uintptr) error {
	return check("cudaGraphLaunch", Current, C.rb_graph_launch(C.uintptr_t(exec), C.uintptr_t(s)))
}

func GraphExecDestroy(exec uintptr) error {
	return check("cudaGraphExecDestroy", Current, C.rb_graph_exec_destroy(C.uintptr_t(exec)))
}

func GraphDestroy(g uintptr) error {
	return check("cudaGraphDestroy", Current, C.rb_graph_destroy(C.uintptr_t(g)))
}
