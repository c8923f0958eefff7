// Package cuda loads the CUDA runtime and driver at run time (dlopen) for the
// verbs tests' GPU buffers (--use-cuda): cudaMalloc'd memory, cudaMemcpy to
// fill and check it, and the driver's dma-buf export for ibv_reg_dmabuf_mr.
// Nothing of CUDA is needed to build; a missing library is an error when a
// GPU buffer is asked for, not at start-up. This package finds the libraries;
// internal/cudart binds and calls them. cuda/testdata/fakecuda is a CPU
// stand-in for tests (see Fake).
package cuda

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rdmabench/rdmabench/internal/cudart"
	"github.com/rdmabench/rdmabench/internal/dlopen"
	"github.com/rdmabench/rdmabench/internal/nvlib"
	"github.com/rdmabench/rdmabench/plan"
)

// Error is a failed CUDA runtime or driver call (Device -1: not about one
// device; Driver: a driver API (cu*) code, not a runtime (cuda*) one).
type Error = cudart.Error

// NotSupported reports whether a driver call failed with
// CUDA_ERROR_NOT_SUPPORTED (801): the dma-buf export is not available (no
// open kernel modules, or a kernel without dma-buf support).
func NotSupported(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Driver && e.Code == 801
}

// EnvLibDir names a directory (or a libcudart file) to load the libraries
// from before the system's: how tests point rdmabench at the stand-in.
const EnvLibDir = "RDMABENCH_CUDA_LIB"

var (
	cudartNames  = nvlib.CudartNames
	libcudaNames = []string{"libcuda.so.1", "libcuda.so"}
)

// Lib is the loaded runtime (and driver, when found). One per process:
// internal/cudart keeps the function pointers in globals, shared with any
// other user of the runtime in the process.
type Lib struct {
	CudartPath  string
	LibcudaPath string // "" when the driver library was not found
	// DriverErr says why the driver API is unusable ("" when it is);
	// dma-buf registration then is too.
	DriverErr string
	// Fake is set for rdmabench's CPU stand-in: nothing measured with it is
	// a GPU measurement.
	Fake    bool
	Version int // cudaRuntimeGetVersion, 0 when unknown
}

var (
	loadOnce sync.Once
	loaded   *Lib
	loadErr  error
)

// Load opens the CUDA runtime and driver once per process.
func Load() (*Lib, error) {
	loadOnce.Do(func() { loaded, loadErr = load(os.Getenv(EnvLibDir)) })
	return loaded, loadErr
}

// candidates are the paths tried for one library: the explicit directory's
// (or file's directory's) copies first, then the bare sonames (ld.so's
// path), then pip's wheel folders (nvlib, as ncclbench searches).
func candidates(explicit string, names, wheelDirs []string) []string {
	var out []string
	if explicit != "" {
		out = nvlib.Named(explicit, names, true)
	}
	return append(out, nvlib.Candidates("", names, nvlib.PythonSitePackages(), wheelDirs)...)
}

func load(explicit string) (*Lib, error) {
	// A runtime newer than the driver gives way to an older soname, as for
	// ncclbench (nvlib.OpenCudart).
	h, path, err := cudart.Open(candidates(explicit, cudartNames, nvlib.CudartWheelDirs), cudart.BusIDCalls...)
	if h == nil {
		msg := "cannot load the CUDA runtime (" + strings.Join(cudartNames, ", ") + ")"
		if d := dlopen.Detail(err); d != "" {
			msg += ": " + d
		}
		return nil, fmt.Errorf("%s; install the CUDA runtime or point %s at the directory that holds it", msg, EnvLibDir)
	}
	l := &Lib{CudartPath: path, Fake: dlopen.Has(h, "rdmabench_fake_cuda"), Version: cudart.RuntimeVersion()}
	dh, dpath, derr := dlopen.First(candidates(explicit, libcudaNames, nil))
	switch {
	case dh == nil:
		l.DriverErr = "the CUDA driver library (libcuda.so.1) was not found"
		if d := dlopen.Detail(derr); d != "" {
			l.DriverErr += ": " + d
		}
	case cudart.BindDriver(dh) != "":
		l.DriverErr = dpath + " lacks the driver calls rdmabench needs"
	default:
		l.LibcudaPath = dpath
		if err := cudart.DriverInit(); err != nil {
			l.DriverErr = err.Error()
		} else if !cudart.HasDmabuf() {
			l.DriverErr = "the CUDA driver has no cuMemGetHandleForAddressRange (CUDA 11.7 or later exports dma-buf)"
		}
	}
	return l, nil
}

// Device resolves a --use-cuda value to a device index and its PCI bus id.
func (l *Lib) Device(spec string) (int, string, error) {
	if err := plan.ValidGPU(spec); err != nil {
		return 0, "", err
	}
	n, err := cudart.DeviceCount()
	if err != nil {
		return 0, "", err
	}
	dev, ierr := strconv.Atoi(spec)
	if ierr != nil {
		if dev, err = cudart.DeviceByBusID(spec); err != nil {
			return 0, "", err
		}
	} else if dev >= n {
		return 0, "", fmt.Errorf("GPU %d: this machine has %d GPU(s) (0..%d)", dev, n, n-1)
	}
	bus, err := cudart.PCIBusID(dev)
	if err != nil {
		return 0, "", err
	}
	return dev, strings.ToLower(bus), nil
}

// Buffer is device memory from cudaMalloc. The CPU never reads or writes it
// directly: CopyIn and CopyOut go through cudaMemcpy.
type Buffer struct {
	mu     sync.Mutex
	lib    *Lib
	dev    int
	ptr    uintptr
	size   int
	closed bool
}

// Alloc allocates size bytes on GPU dev.
func (l *Lib) Alloc(dev, size int) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("allocate GPU memory: size %d must be positive", size)
	}
	p, err := cudart.Device(dev).Malloc(size)
	if err != nil {
		return nil, fmt.Errorf("allocate %d bytes of GPU memory: %w", size, err)
	}
	live.Add(1)
	return &Buffer{lib: l, dev: dev, ptr: p, size: size}, nil
}

// live counts the buffers allocated and not yet freed, for leak checks.
var live atomic.Int64

// LiveBuffers is how many GPU buffers are allocated and not freed: zero once
// a test has cleaned up (internal/hwtest checks it with the verbs objects).
func LiveBuffers() int64 { return live.Load() }

// Ptr is the device address, as work requests and ibv_reg_mr take it.
func (b *Buffer) Ptr() uintptr { return b.ptr }

// Len is the size in bytes.
func (b *Buffer) Len() int { return b.size }

// Device is the GPU index.
func (b *Buffer) Device() int { return b.dev }

func (b *Buffer) check(off, n int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("GPU buffer is freed")
	}
	if off < 0 || n < 0 || off+n > b.size {
		return fmt.Errorf("range [%d, %d) outside a %d-byte GPU buffer", off, off+n, b.size)
	}
	return nil
}

// CopyIn copies src to offset off of the buffer (cudaMemcpy, synchronous).
func (b *Buffer) CopyIn(off int, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if err := b.check(off, len(src)); err != nil {
		return err
	}
	return cudart.Device(b.dev).MemcpyH2D(b.ptr+uintptr(off), src)
}

// CopyOut copies len(dst) bytes from offset off of the buffer.
func (b *Buffer) CopyOut(dst []byte, off int) error {
	if len(dst) == 0 {
		return nil
	}
	if err := b.check(off, len(dst)); err != nil {
		return err
	}
	return cudart.Device(b.dev).MemcpyD2H(dst, b.ptr+uintptr(off))
}

// DmabufFD exports the whole buffer as a dma-buf (the driver's
// cuMemGetHandleForAddressRange); the caller owns the descriptor.
func (b *Buffer) DmabufFD() (int, error) {
	if b.lib.DriverErr != "" {
		return -1, fmt.Errorf("no dma-buf export: %s", b.lib.DriverErr)
	}
	if err := b.check(0, b.size); err != nil {
		return -1, err
	}
	return cudart.Device(b.dev).DmabufFD(b.ptr, b.size)
}

// SyncMemops sets CU_POINTER_ATTRIBUTE_SYNC_MEMOPS on the buffer, so that
// CUDA copies to and from it are ordered with RDMA traffic (as GPUDirect
// RDMA requires; perftest does the same). Without the driver library it is
// skipped: the runtime's synchronous cudaMemcpy is then all there is.
func (b *Buffer) SyncMemops() error {
	if b.lib.LibcudaPath == "" {
		return nil
	}
	if err := b.check(0, b.size); err != nil {
		return err
	}
	return cudart.Device(b.dev).SyncMemops(b.ptr)
}

// Close frees the memory; idempotent. Deregister every MR on it first.
func (b *Buffer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	live.Add(-1)
	return cudart.Device(b.dev).Free(b.ptr)
}
