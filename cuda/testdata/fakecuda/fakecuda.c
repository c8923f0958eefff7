// fakecuda: rdmabench's CPU stand-in for the CUDA runtime and driver, for
// tests on machines without a GPU. Device memory is host memory, but as
// hostile as the real thing where it matters:
//  - cudaMalloc returns an address the CPU may use only until the buffer
//    gets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (rdmabench sets it right after
//    registering the buffer); from then on the address is PROT_NONE, so a
//    CPU read or write of "device memory" on the hot path faults, as it
//    would on a GPU. The NIC keeps working: the pages stay pinned by the
//    registration, and cudaMemcpy copies through a second mapping of the
//    same memfd that only this library knows.
//  - cudaMemcpy checks that the device side of a copy lies inside one
//    allocation (cudaErrorInvalidValue otherwise).
//  - cuMemGetHandleForAddressRange hands out a dup of the allocation's
//    memfd: a real file descriptor, but not a dma-buf, so
//    ibv_reg_dmabuf_mr fails on it as it does on a driver without dma-buf
//    (rxe), and the fallback to peer memory runs.
// FAKECUDA_DEVICES sets the device count (default 2); FAKECUDA_NO_DMABUF=1
// makes the export fail with CUDA_ERROR_NOT_SUPPORTED (an old driver).
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int rdmabench_fake_cuda = 1;

struct alloc {
	uintptr_t view;  // what cudaMalloc returned
	char *alias;     // the library's own mapping of the same pages
	size_t size, mapped;
	int fd, dev;
	struct alloc *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct alloc *allocs;
static __thread int current = 0;

static int ndev(void) {
	const char *s = getenv("FAKECUDA_DEVICES");
	int n = s ? atoi(s) : 2;
	return n < 0 ? 0 : n;
}

// find returns the allocation holding [p, p+n), or NULL; mu held.
static struct alloc *find(uintptr_t p, size_t n) {
	for (struct alloc *a = allocs; a; a = a->next)
		if (p >= a->view && p - a->view <= a->size && n <= a->size - (p - a->view))
			return a;
	return NULL;
}

const char *cudaGetErrorString(int e) {
	switch (e) {
	case 0: return "no error";
	case 1: return "invalid argument";
	case 2: return "out of memory";
	case 100: return "no CUDA-capable device is detected";
	case 101: return "invalid device ordinal";
	}
	return "unknown error";
}

int cudaRuntimeGetVersion(int *v) { *v = 12040; return 0; }
int cudaGetDeviceCount(int *n) {
	*n = ndev();
	return *n ? 0 : 100;
}
int cudaSetDevice(int d) {
	if (d < 0 || d >= ndev())
		return ndev() ? 101 : 100;
	current = d;
	return 0;
}
int cudaDeviceGetPCIBusId(char *buf, int len, int d) {
	if (d < 0 || d >= ndev())
		return 101;
	snprintf(buf, len, "0000:%02X:00.0", 0x10 + d);
	return 0;
}
int cudaDeviceGetByPCIBusId(int *d, const char *id) {
	unsigned dom = 0, bus, dv, fn;
	if (sscanf(id, "%x:%x:%x.%x", &dom, &bus, &dv, &fn) != 4) {
		dom = 0;
		if (sscanf(id, "%x:%x.%x", &bus, &dv, &fn) != 3)
			return 1;
	}
	int i = (int)bus - 0x10;
	if (dom != 0 || dv != 0 || fn != 0 || i < 0 || i >= ndev())
		return 101;
	*d = i;
	return 0;
}

int cudaMalloc(void **p, size_t size) {
	if (!p || !size)
		return 1;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), mapped = (size + pg - 1) / pg * pg;
	int fd = memfd_create("fakecuda", MFD_CLOEXEC);
	if (fd < 0)
		return 2;
	if (ftruncate(fd, (off_t)mapped) != 0) {
		close(fd);
		return 2;
	}
	char *alias = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	void *view = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (alias == MAP_FAILED || view == MAP_FAILED) {
		if (alias != MAP_FAILED) munmap(alias, mapped);
		if (view != MAP_FAILED) munmap(view, mapped);
		close(fd);
		return 2;
	}
	struct alloc *a = calloc(1, sizeof *a);
	a->view = (uintptr_t)view, a->alias = alias, a->size = size, a->mapped = mapped, a->fd = fd, a->dev = current;
	pthread_mutex_lock(&mu);
	a->next = allocs, allocs = a;
	pthread_mutex_unlock(&mu);
	*p = view;
	return 0;
}

int cudaFree(void *p) {
	if (!p)
		return 0;
	pthread_mutex_lock(&mu);
	struct alloc **pp = &allocs;
	while (*pp && (*pp)->view != (uintptr_t)p)
		pp = &(*pp)->next;
	struct alloc *a = *pp;
	if (a)
		*pp = a->next;
	pthread_mutex_unlock(&mu);
	if (!a)
		return 1;
	munmap((void *)a->view, a->mapped);
	munmap(a->alias, a->mapped);
	close(a->fd);
	free(a);
	return 0;
}

// cudaMemcpy: kind 1 host to device, 2 device to host, 3 device to device.
int cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
	if (!n)
		return 0;
	pthread_mutex_lock(&mu);
	struct alloc *d = kind == 1 || kind == 3 ? find((uintptr_t)dst, n) : NULL;
	struct alloc *s = kind == 2 || kind == 3 ? find((uintptr_t)src, n) : NULL;
	int ok = (kind == 1 && d) || (kind == 2 && s) || (kind == 3 && d && s);
	char *to = d ? d->alias + ((uintptr_t)dst - d->view) : dst;
	const char *from = s ? s->alias + ((uintptr_t)src - s->view) : src;
	pthread_mutex_unlock(&mu);
	if (!ok)
		return 1;
	memmove(to, from, n);
	return 0;
}

// Driver API.
int cuInit(unsigned flags) { (void)flags; return 0; }
int cuGetErrorString(int e, const char **s) {
	switch (e) {
	case 0: *s = "no error"; return 0;
	case 1: *s = "invalid argument"; return 0;
	case 801: *s = "operation not supported"; return 0;
	}
	*s = "unknown error";
	return 0;
}

int cuMemGetHandleForAddressRange(void *handle, uintptr_t p, size_t n, int type, unsigned long long flags) {
	if (getenv("FAKECUDA_NO_DMABUF") && atoi(getenv("FAKECUDA_NO_DMABUF")))
		return 801;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	if (type != 1 || flags || p % pg)
		return 1;
	pthread_mutex_lock(&mu);
	struct alloc *a = find(p, n);
	int fd = a ? dup(a->fd) : -1;
	pthread_mutex_unlock(&mu);
	if (fd < 0)
		return 1;
	*(int *)handle = fd;
	return 0;
}

// CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (6): from now on the CPU may not touch
// the buffer through its device address.
int cuPointerSetAttribute(const void *value, int attr, uintptr_t p) {
	(void)value;
	if (attr != 6)
		return 1;
	pthread_mutex_lock(&mu);
	struct alloc *a = find(p, 1);
	int rc = a && mprotect((void *)a->view, a->mapped, PROT_NONE) == 0 ? 0 : 1;
	pthread_mutex_unlock(&mu);
	return rc;
}
