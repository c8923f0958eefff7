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
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"
)

// Error is a library that exists (or a bare name the loader searched for)
// and did not load: Reason is dlerror's text, which names the path.
type Error struct {
	Path   string
	Reason string
}

func (e *Error) Error() string { return e.Reason }

// ErrNotFound is First's error when no path named an existing file and
// every bare name was simply absent: the caller's summary says it already.
var ErrNotFound = errors.New("library not found")

// MissingSymbolError is a library that loaded without an entry point the
// loader requires.
type MissingSymbolError struct {
	Lib    string // the path it was loaded from
	Symbol string
}

func (e *MissingSymbolError) Error() string {
	return fmt.Sprintf("cannot use %s: symbol %s missing", e.Lib, e.Symbol)
}

// Detail is what a loader's one line adds for err after its own summary:
// nothing for ErrNotFound (or nil), else err's text.
func Detail(err error) string {
	if err == nil || errors.Is(err, ErrNotFound) {
		return ""
	}
	return err.Error()
}

// Open loads the library at path (a file name is searched as dlopen does);
// on failure the handle is nil and the *Error says why.
func Open(path string) (unsafe.Pointer, error) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	const n = 512
	buf := (*C.char)(C.calloc(n, 1))
	defer C.free(unsafe.Pointer(buf))
	h := C.rb_dlopen(cs, buf, n)
	if h == nil {
		return nil, &Error{Path: path, Reason: C.GoString(buf)}
	}
	return h, nil
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
// reporting (*Error); ErrNotFound when each was only absent.
func First(paths []string) (h unsafe.Pointer, path string, err error) {
	err = ErrNotFound
	for _, p := range paths {
		if strings.Contains(p, "/") {
			if _, serr := os.Stat(p); serr != nil {
				continue
			}
		}
		h, oerr := Open(p)
		if h != nil {
			return h, p, nil
		}
		if strings.Contains(p, "/") || !strings.Contains(oerr.Error(), "No such file") {
			err = oerr
		}
	}
	return nil, "", err
}
