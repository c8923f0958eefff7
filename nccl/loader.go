// Package nccl loads NCCL and the CUDA runtime at run time (dlopen) and
// exposes the few calls ncclbench needs. No CUDA headers or libraries are
// needed to build; a missing library is an error at Open, not at start-up.
package nccl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/rdmabench/rdmabench/internal/cudart"
	"github.com/rdmabench/rdmabench/internal/dlopen"
	"github.com/rdmabench/rdmabench/internal/nvlib"
)

// UniqueID is ncclUniqueId: 128 opaque bytes created by rank 0.
type UniqueID [128]byte

type (
	Comm   uintptr // ncclComm_t
	Stream uintptr // cudaStream_t
	DevPtr uintptr // device memory
)

// NCCL data type and reduction op values from nccl.h. Values were only ever
// appended, so they are stable across NCCL 2.x.
const (
	Int8 = iota
	Uint8
	Int32
	Uint32
	Int64
	Uint64
	Float16
	Float32
	Float64
	Bfloat16
)

const (
	Sum = iota
	Prod
	Max
	Min
	Avg
)

// Error is a failed NCCL call.
type Error struct {
	Call   string
	Code   int
	Text   string
	Detail string // ncclGetLastError, when the library has it
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (ncclResult %d)", e.Call, e.Text, e.Code)
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// CudaError is a failed CUDA runtime call: internal/cudart's Error, the
// one type for it (cuda.Error is the same), so errors.As with either holds.
type CudaError = cudart.Error

// NoDevice reports whether err means "there is no usable GPU".
func NoDevice(err error) bool {
	var ce *CudaError
	// 100 no device, 35 insufficient driver, 34 stub library, 999 unknown
	// (typically no driver loaded), 3 initialization error.
	return errors.As(err, &ce) && (ce.Code == 100 || ce.Code == 35 || ce.Code == 34 || ce.Code == 3 || ce.Code == 999)
}

// Options says where to look for the libraries.
type Options struct {
	NCCLLib   string // --nccl-lib: a file or a directory
	CudartLib string // --cudart-lib: a file or a directory
	// PythonRoots overrides the site-packages directories searched for the
	// NVIDIA wheels (tests); nil means the usual locations.
	PythonRoots []string
}

// Lib is the loaded pair of libraries. Only one can be loaded per process
// because the C side keeps the function pointers in globals (NCCL's here,
// the CUDA runtime's in internal/cudart, shared with any other user of the
// runtime in the process).
type Lib struct {
	NCCLPath   string
	CudartPath string
	// Fake is true when the library is rdmabench's CPU test library: numbers
	// from it are not GPU measurements.
	Fake        bool
	Version     int
	HasAlltoAll bool // native ncclAlltoAll (NCCL >= 2.28)
	HasEvents   bool // CUDA events, for per-iteration times (-I 1)
	HasGraphs   bool // CUDA graph capture and launch (-G)
	// HasNonblocking: ncclCommInitRankConfig with blocking=0 (NCCL >= 2.14).
	HasNonblocking bool
	handles        []unsafe.Pointer
}

// LoadError says which library could not be loaded and where we looked.
type LoadError struct {
	What     string // "NCCL" or "the CUDA runtime"
	Names    string
	Searched []string
	Err      error // why: dlopen's *Error, *MissingSymbolError or ErrNotFound
	Hint     string
}

func (e *LoadError) Unwrap() error { return e.Err }

func (e *LoadError) Error() string {
	s := fmt.Sprintf("cannot load %s: %s not found (searched: %s)", e.What, e.Names, strings.Join(e.Searched, ", "))
	if d := dlopen.Detail(e.Err); d != "" {
		s += "; " + d
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

// cudaErrorInsufficientDriver: the runtime is newer than the driver.
const cudaErrorInsufficientDriver = nvlib.CudaErrorInsufficientDriver

// openCudart loads and binds the first CUDA runtime of paths that works
// with this machine's driver (cudart.Open).
func openCudart(paths []string) (unsafe.Pointer, string, error) {
	return cudart.Open(paths, cudart.StreamCalls...)
}

// Open finds and loads NCCL, then the CUDA runtime.
func Open(o Options) (*Lib, error) {
	roots := o.PythonRoots
	if roots == nil {
		roots = nvlib.PythonSitePackages()
	}
	ncclNames := []string{"libnccl.so.2"}
	h, path, err := dlopen.First(nvlib.Candidates(o.NCCLLib, ncclNames, roots, nvlib.NCCLWheelDirs))
	if h == nil {
		return nil, &LoadError{What: "NCCL", Names: "libnccl.so.2", Searched: nvlib.Describe(o.NCCLLib, "--nccl-lib", roots, nvlib.NCCLWheelDirs), Err: err, Hint: "install NCCL (e.g. pip install nvidia-nccl-cu12) or pass --nccl-lib"}
	}
	l := &Lib{NCCLPath: resolve(path), handles: []unsafe.Pointer{h}}
	if m := bindNCCL(h); m != "" {
		l.Close()
		return nil, fmt.Errorf("cannot use NCCL at %s: symbol %s missing (NCCL 2.x required)", path, m)
	}
	l.Fake = dlopen.Has(h, "rdmabench_fake_nccl")
	if l.Fake {
		// The test library carries its own CUDA runtime stand-in.
		l.CudartPath = l.NCCLPath
		if m := cudart.Bind(h, cudart.StreamCalls...); m != "" {
			l.Close()
			return nil, fmt.Errorf("test library %s lacks %s", path, m)
		}
	} else {
		cands := nvlib.Candidates(o.CudartLib, nvlib.CudartNames, roots, nvlib.CudartWheelDirs)
		if o.CudartLib == "" {
			// Next to NCCL first: a wheel or tarball install keeps them together.
			var near []string
			for _, n := range nvlib.CudartNames {
				near = append(near, filepath.Join(filepath.Dir(l.NCCLPath), n))
			}
			cands = append(near, cands...)
		}
		ch, cpath, cerr := openCudart(cands)
		if ch == nil {
			l.Close()
			return nil, &LoadError{What: "the CUDA runtime", Names: "libcudart.so.13/.12/.11.0", Searched: nvlib.Describe(o.CudartLib, "--cudart-lib", roots, nvlib.CudartWheelDirs), Err: cerr, Hint: "install the CUDA runtime (e.g. pip install nvidia-cuda-runtime-cu12) or pass --cudart-lib"}
		}
		l.handles = append(l.handles, ch)
		l.CudartPath = resolve(cpath)
	}
	v, err := ncclVersion()
	if err != nil {
		l.Close()
		return nil, err
	}
	l.Version = v
	// ncclAlltoAll exists in some forks under the same name with other
	// semantics; trust it only from NCCL 2.28 on.
	l.HasAlltoAll = hasAlltoAll() && v >= 22800
	l.HasEvents = cudart.HasEvents()
	l.HasGraphs = cudart.HasGraphs()
	l.HasNonblocking = hasConfig() && v >= 21400
	return l, nil
}

// resolve turns a bare soname into the file the loader picked, for reports.
func resolve(p string) string {
	if strings.Contains(p, "/") {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	if maps, err := os.ReadFile("/proc/self/maps"); err == nil {
		for _, line := range strings.Split(string(maps), "\n") {
			if i := strings.Index(line, "/"); i >= 0 && filepath.Base(line[i:]) == p {
				return line[i:]
			}
		}
		for _, line := range strings.Split(string(maps), "\n") {
			if i := strings.Index(line, "/"); i >= 0 && strings.HasPrefix(filepath.Base(line[i:]), strings.TrimSuffix(p, filepath.Ext(p))) {
				return line[i:]
			}
		}
	}
	return p
}

// Close unloads the libraries. Only for error paths and tests: NCCL keeps
// threads alive, so a process that used it should just exit.
func (l *Lib) Close() {
	for i := len(l.handles) - 1; i >= 0; i-- {
		dlopen.Close(l.handles[i])
	}
	l.handles = nil
}

// CudaVersionString turns cudaRuntimeGetVersion's code into "12.4".
func CudaVersionString(code int) string {
	return fmt.Sprintf("%d.%d", code/1000, code%1000/10)
}

// VersionString turns NCCL's version code into "2.21.5".
func VersionString(code int) string {
	if code >= 10000 {
		return fmt.Sprintf("%d.%d.%d", code/10000, code/100%100, code%100)
	}
	// Before 2.9 the code was major*1000 + minor*100 + patch.
	return fmt.Sprintf("%d.%d.%d", code/1000, code/100%10, code%100)
}
