// Package cudart is the one binding of the CUDA runtime (libcudart) for both
// run-time loaders, cuda/ (rdmabench --use-cuda) and nccl/ (ncclbench), and
// of the CUDA driver (libcuda) calls cuda/ needs: dlsym'd function pointers,
// typed wrappers and an Error that carries cudaGetErrorString's text. The
// loaders find the libraries (internal/nvlib, internal/dlopen) and hand the
// handles to Bind and BindDriver; nothing is linked at build time.
//
// Only one runtime is bound per process: the C side keeps the function
// pointers in globals, so a later Bind replaces what an earlier one bound,
// for every user of this package (a process that loaded both cuda/ and
// nccl/ would share the last runtime bound). The driver's pointers are
// separate and follow the same rule.
//
// The current device is per OS thread, and a goroutine may move between
// threads from one cgo call to the next: a Device's methods make it current
// and make their call in one C call. Current stands for the calling
// thread's device, for callers that pin their thread and call SetDevice
// themselves (ncclbench).
package cudart

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/rdmabench/rdmabench/internal/nvlib"
)

// Error is a failed CUDA runtime or driver call.
type Error struct {
	Call   string
	Device int // -1: not about one device (or the thread's current one)
	Code   int
	Text   string
	Driver bool // a driver API (cu*) code, not a runtime (cuda*) one
}

func (e *Error) Error() string {
	kind := "cudaError"
	if e.Driver {
		kind = "CUresult"
	}
	if e.Device >= 0 {
		return fmt.Sprintf("%s on GPU %d: %s (%s %d)", e.Call, e.Device, e.Text, kind, e.Code)
	}
	return fmt.Sprintf("%s: %s (%s %d)", e.Call, e.Text, kind, e.Code)
}

// CodeUnbound is the code of a call the bound library does not export (or
// of any call before Bind): nothing jumps through a missing pointer.
const CodeUnbound = -1

// Base are the runtime calls Bind always requires.
var Base = []string{"cudaGetDeviceCount", "cudaSetDevice", "cudaMalloc", "cudaFree", "cudaMemcpy", "cudaGetErrorString"}

// What a loader may require of Bind beyond Base: BusIDCalls map devices to
// PCI bus ids both ways (cuda/); StreamCalls are memset and the streams
// ncclbench queues its work on (nccl/). Everything else is optional: see
// HasEvents, HasGraphs, and the wrappers' comments.
var (
	BusIDCalls  = []string{"cudaDeviceGetPCIBusId", "cudaDeviceGetByPCIBusId"}
	StreamCalls = []string{"cudaMemset", "cudaStreamCreate", "cudaStreamDestroy", "cudaStreamQuery", "cudaStreamSynchronize"}
)

// driverCalls are the driver calls BindDriver requires;
// cuMemGetHandleForAddressRange (CUDA 11.7) is optional: HasDmabuf.
var driverCalls = []string{"cuInit", "cuGetErrorString", "cuPointerSetAttribute"}

// Device is a GPU index for the calls that must run with it current.
type Device int

// Current is the calling thread's current device (SetDevice).
const Current Device = -1

// CudaErrorNotReady: an asynchronous operation has not completed yet.
const CudaErrorNotReady = 600

// Open loads and binds the first CUDA runtime of paths that works with this
// machine's driver (nvlib.OpenCudart: one that is too new gives way to an
// older soname), requiring need of it as Bind does. It returns the handle
// and its path, or nil and why (nvlib.OpenCudart's errors).
func Open(paths []string, need ...string) (h unsafe.Pointer, path string, err error) {
	return nvlib.OpenCudart(paths, func(h unsafe.Pointer) string { return Bind(h, need...) }, driverTooOld)
}

// driverTooOld says whether the bound runtime is newer than the driver.
func driverTooOld() bool {
	_, err := DeviceCount()
	var e *Error
	return errors.As(err, &e) && e.Code == nvlib.CudaErrorInsufficientDriver
}
