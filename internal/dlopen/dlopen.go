// Package dlopen loads shared libraries at run time for the run-time
// loaders (nccl/, cuda/): nothing is linked at build time, so the binary
// builds and runs without CUDA or NCCL installed. The entry points are
// bound on the handle in C: the CUDA runtime's and driver's once, for both
// loaders, by internal/cudart; NCCL's by nccl/.
package dlopen

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

// The dlerror text is copied in the same call: it lives in a per-thread
// buffer that the next dl* call on this thread overwrites.
static void* rb_dlopen(const char* path, char* err, size_t n) {
	void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char* e = dlerror();
		strncpy(err, e ? e : "dlopen failed", n - 1);
		err[n - 1] = 0;
	}
	return h;
}
static int rb_dlhas(void* h, const char* name) { return h && dlsym(h, name) != NULL; }
static void rb_dlclose(void* h) { if (h) dlclose(h); }
*/
import "C"

import (
	"os"
	"strings"
	"unsafe"
)

// Open loads the library at path (a file name is searched as dlopen does);
// on failure the handle is nil and the string says why.
func Open(path string) (unsafe.Pointer, string) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	const n = 512
	buf := (*C.char)(C.calloc(n, 1))
	defer C.free(unsafe.Pointer(buf))
	h := C.rb_dlopen(cs, buf, n)
	if h == nil {
		return nil, C.GoString(buf)
	}
	return h, ""
}

// Close unloads a handle from Open; nil is ignored.
func Close(h unsafe.Pointer) { C.rb_dlclose(h) }

// Has says whether the library exports name.
func Has(h unsafe.Pointer, name string) bool {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.rb_dlhas(h, cs) != 0
}

// First opens the first of paths that loads, skipping paths with a slash
// that do not exist. It returns the handle and the path, or nil and the
// most useful reason: a file that exists but fails to load is worth
// reporting; "not found" for a bare name is what the caller's summary
// already says.
func First(paths []string) (h unsafe.Pointer, path, detail string) {
	for _, p := range paths {
		if strings.Contains(p, "/") {
			if _, err := os.Stat(p); err != nil {
				continue
			}
		}
		h, e := Open(p)
		if h != nil {
			return h, p, ""
		}
		if strings.Contains(p, "/") || !strings.Contains(e, "No such file") {
			detail = e
		}
	}
	return nil, "", detail
}
