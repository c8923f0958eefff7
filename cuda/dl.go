package cuda

// The C side holds one function pointer per CUDA entry point, filled by
// dlsym, and trampolines that select the device and call through them in
// one cgo call: the runtime's current device is per OS thread, and a
// goroutine may move between threads from one cgo call to the next.
// Nothing is linked at build time (the nccl package's pattern).

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void *rb_cudart, *rb_libcuda;

static int (*p_cudaGetDeviceCount)(int*);
static int (*p_cudaSetDevice)(int);
static int (*p_cudaMalloc)(void**, size_t);
static int (*p_cudaFree)(void*);
static int (*p_cudaMemcpy)(void*, const void*, size_t, int);
static const char* (*p_cudaGetErrorString)(int);
static int (*p_cudaDeviceGetPCIBusId)(char*, int, int);
static int (*p_cudaDeviceGetByPCIBusId)(int*, const char*);
static int (*p_cudaRuntimeGetVersion)(int*);

static int (*p_cuInit)(unsigned);
static int (*p_cuMemGetHandleForAddressRange)(void*, uintptr_t, size_t, int, unsigned long long);
static int (*p_cuPointerSetAttribute)(const void*, int, uintptr_t);
static int (*p_cuGetErrorString)(int, const char**);

#define SYM(h, name, req) do { *(void**)(&p_##name) = dlsym(h, #name); if (!p_##name && req) return #name; } while (0)

static const char* rb_bind_cudart(void* h) {
	rb_cudart = h;
	SYM(h, cudaGetDeviceCount, 1);
	SYM(h, cudaSetDevice, 1);
	SYM(h, cudaMalloc, 1);
	SYM(h, cudaFree, 1);
	SYM(h, cudaMemcpy, 1);
	SYM(h, cudaGetErrorString, 1);
	SYM(h, cudaDeviceGetPCIBusId, 1);
	SYM(h, cudaDeviceGetByPCIBusId, 1);
	SYM(h, cudaRuntimeGetVersion, 0);
	return NULL;
}

// The driver is optional: without it (or without the dma-buf export, CUDA
// < 11.7) only peer-memory registration is possible.
static const char* rb_bind_libcuda(void* h) {
	rb_libcuda = h;
	SYM(h, cuInit, 1);
	SYM(h, cuGetErrorString, 1);
	SYM(h, cuPointerSetAttribute, 1);
	SYM(h, cuMemGetHandleForAddressRange, 0);
	return NULL;
}

static int rb_has_dmabuf(void) { return p_cuMemGetHandleForAddressRange != NULL; }

static int rb_count(int* n) { return p_cudaGetDeviceCount(n); }
static int rb_by_bus(int* d, const char* id) { return p_cudaDeviceGetByPCIBusId(d, id); }
static int rb_bus(char* buf, int len, int dev) { return p_cudaDeviceGetPCIBusId(buf, len, dev); }
static const char* rb_errstr(int c) { return p_cudaGetErrorString(c); }
static int rb_rtver(int* v) { return p_cudaRuntimeGetVersion ? p_cudaRuntimeGetVersion(v) : -1; }

// Each call returns 0, or the CUDA error code; *which says which call failed
// (1 cudaSetDevice, 2 the call itself).
static int rb_malloc(int dev, uintptr_t* p, size_t n, int* which) {
	int r = p_cudaSetDevice(dev);
	if (r) { *which = 1; return r; }
	*which = 2;
	void* q = NULL;
	r = p_cudaMalloc(&q, n);
	*p = (uintptr_t)q;
	return r;
}
static int rb_free(int dev, uintptr_t p, int* which) {
	int r = p_cudaSetDevice(dev);
	if (r) { *which = 1; return r; }
	*which = 2;
	return p_cudaFree((void*)p);
}
// cudaMemcpyKind: 1 host to device, 2 device to host.
static int rb_h2d(int dev, uintptr_t dst, const void* src, size_t n, int* which) {
	int r = p_cudaSetDevice(dev);
	if (r) { *which = 1; return r; }
	*which = 2;
	return p_cudaMemcpy((void*)dst, src, n, 1);
}
static int rb_d2h(int dev, void* dst, uintptr_t src, size_t n, int* which) {
	int r = p_cudaSetDevice(dev);
	if (r) { *which = 1; return r; }
	*which = 2;
	return p_cudaMemcpy(dst, (const void*)src, n, 2);
}

// Driver calls need the device's primary context current on this thread:
// cudaSetDevice makes it so from CUDA 12 on, and cudaFree(NULL), the
// runtime's idiom for it, does on older runtimes too.
static int rb_current(int dev) {
	int r = p_cudaSetDevice(dev);
	return r ? r : p_cudaFree(NULL);
}
static int rb_cu_init(void) { return p_cuInit(0); }
static const char* rb_cu_errstr(int c) {
	const char* s = NULL;
	if (p_cuGetErrorString(c, &s) != 0 || !s) return "unknown CUDA driver error";
	return s;
}
#define RB_DMA_BUF_FD 1 // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD
static int rb_dmabuf(int dev, uintptr_t p, size_t n, int* fd, int* which) {
	int r = rb_current(dev);
	if (r) { *which = 1; return r; }
	*which = 2;
	*fd = -1;
	return p_cuMemGetHandleForAddressRange(fd, p, n, RB_DMA_BUF_FD, 0);
}
#define RB_SYNC_MEMOPS 6 // CU_POINTER_ATTRIBUTE_SYNC_MEMOPS
static int rb_sync_memops(int dev, uintptr_t p, int* which) {
	int r = rb_current(dev);
	if (r) { *which = 1; return r; }
	*which = 2;
	unsigned int one = 1;
	return p_cuPointerSetAttribute(&one, RB_SYNC_MEMOPS, p);
}
*/
import "C"

import (
	"unsafe"
)

func bindCudart(h unsafe.Pointer) string {
	if m := C.rb_bind_cudart(h); m != nil {
		return C.GoString(m)
	}
	return ""
}

func bindLibcuda(h unsafe.Pointer) string {
	if m := C.rb_bind_libcuda(h); m != nil {
		return C.GoString(m)
	}
	return ""
}

func hasDmabuf() bool { return C.rb_has_dmabuf() != 0 }

// rtErr builds the error of a runtime call; which 1 means cudaSetDevice failed.
func rtErr(call string, dev int, r C.int, which C.int) error {
	if r == 0 {
		return nil
	}
	if which == 1 {
		call = "cudaSetDevice"
	}
	return &Error{Call: call, Device: dev, Code: int(r), Text: C.GoString(C.rb_errstr(r))}
}

func drvErr(call string, dev int, r C.int, which C.int) error {
	if r == 0 {
		return nil
	}
	if which == 1 {
		return rtErr(call, dev, r, which)
	}
	return &Error{Call: call, Device: dev, Code: int(r), Text: C.GoString(C.rb_cu_errstr(r)), Driver: true}
}

func deviceCount() (int, error) {
	var n C.int
	if r := C.rb_count(&n); r != 0 {
		return 0, &Error{Call: "cudaGetDeviceCount", Device: -1, Code: int(r), Text: C.GoString(C.rb_errstr(r))}
	}
	return int(n), nil
}

func deviceByBusID(id string) (int, error) {
	cs := C.CString(id)
	defer C.free(unsafe.Pointer(cs))
	var d C.int
	if r := C.rb_by_bus(&d, cs); r != 0 {
		return 0, &Error{Call: "cudaDeviceGetByPCIBusId(" + id + ")", Device: -1, Code: int(r), Text: C.GoString(C.rb_errstr(r))}
	}
	return int(d), nil
}

func busID(dev int) (string, error) {
	var buf [64]C.char
	if r := C.rb_bus(&buf[0], C.int(len(buf)), C.int(dev)); r != 0 {
		return "", &Error{Call: "cudaDeviceGetPCIBusId", Device: dev, Code: int(r), Text: C.GoString(C.rb_errstr(r))}
	}
	return C.GoString(&buf[0]), nil
}

func runtimeVersion() int {
	var v C.int
	if C.rb_rtver(&v) != 0 {
		return 0
	}
	return int(v)
}

func cuInit() error {
	if r := C.rb_cu_init(); r != 0 {
		return &Error{Call: "cuInit", Device: -1, Code: int(r), Text: C.GoString(C.rb_cu_errstr(r)), Driver: true}
	}
	return nil
}

func malloc(dev, n int) (uintptr, error) {
	var p C.uintptr_t
	var which C.int
	r := C.rb_malloc(C.int(dev), &p, C.size_t(n), &which)
	return uintptr(p), rtErr("cudaMalloc", dev, r, which)
}

func free(dev int, p uintptr) error {
	var which C.int
	return rtErr("cudaFree", dev, C.rb_free(C.int(dev), C.uintptr_t(p), &which), which)
}

// memcpyH2D and memcpyD2H copy between Go memory (passed as a pointer
// argument, so cgo keeps it in place for the call) and device memory.
func memcpyH2D(dev int, dst uintptr, src []byte) error {
	var which C.int
	r := C.rb_h2d(C.int(dev), C.uintptr_t(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), &which)
	return rtErr("cudaMemcpy(host to device)", dev, r, which)
}

func memcpyD2H(dev int, dst []byte, src uintptr) error {
	var which C.int
	r := C.rb_d2h(C.int(dev), unsafe.Pointer(&dst[0]), C.uintptr_t(src), C.size_t(len(dst)), &which)
	return rtErr("cudaMemcpy(device to host)", dev, r, which)
}

func dmabufFD(dev int, p uintptr, n int) (int, error) {
	var fd, which C.int
	r := C.rb_dmabuf(C.int(dev), C.uintptr_t(p), C.size_t(n), &fd, &which)
	return int(fd), drvErr("cuMemGetHandleForAddressRange(DMA_BUF_FD)", dev, r, which)
}

func syncMemops(dev int, p uintptr) error {
	var which C.int
	return drvErr("cuPointerSetAttribute(SYNC_MEMOPS)", dev, C.rb_sync_memops(C.int(dev), C.uintptr_t(p), &which), which)
}
