// Package nccl loads NCCL and the CUDA runtime at run time (dlopen) and
// exposes the few calls ncclbench needs. No CUDA headers or libraries are
// needed to build; a missing library is an error at Open, not at start-up.
package nccl

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/rdmabench/rdmabench/internal/dlopen"
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

// CudaError is a failed CUDA runtime call.
type CudaError struct {
	Call string
	Code int
	Text string
}

func (e *CudaError) Error() string {
	return fmt.Sprintf("%s: %s (cudaError %d)", e.Call, e.Text, e.Code)
}

// NoDevice reports whether err means "there is no usable GPU".
func NoDevice(err error) bool {
	ce, ok := err.(*CudaError)
	// 100 no device, 35 insufficient driver, 34 stub library, 999 unknown
	// (typically no driver loaded), 3 initialization error.
	return ok && (ce.Code == 100 || ce.Code == 35 || ce.Code == 34 || ce.Code == 3 || ce.Code == 999)
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
// because the C side keeps the function pointers in globals.
type Lib struct {
	NCCLPath   string
	CudartPath string
	// Fake is true when the library is rdmabench's CPU test library: numbers
	// from it are not GPU measurements.
	Fake        bool
	Version     int
	HasAlltoAll bool // native ncclAlltoAll (NCCL >= 2.28)
	HasEvents   bool // CUDA events, for per-iteration times (-I 1)
	// HasNonblocking: ncclCommInitRankConfig with blocking=0 (NCCL >= 2.14).
	HasNonblocking bool
	handles        []unsafe.Pointer
}

// LoadError says which library could not be loaded and where we looked.
type LoadError struct {
	What     string // "NCCL" or "the CUDA runtime"
	Names    string
	Searched []string
	Detail   string // dlerror of the most relevant failure
	Hint     string
}

func (e *LoadError) Error() string {
	s := fmt.Sprintf("cannot load %s: %s not found (searched: %s)", e.What, e.Names, strings.Join(e.Searched, ", "))
	if e.Detail != "" {
		s += "; " + e.Detail
	}
	if e.Hint != "" {
		s += "; " + e.Hint
	}
	return s
}

var cudartNames = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}

// Where pip's NVIDIA wheels put the libraries, under site-packages: CUDA 13
// wheels share nvidia/cu13/lib.
var (
	ncclWheelDirs   = []string{"nvidia/nccl/lib", "nvidia/cu13/lib"}
	cudartWheelDirs = []string{"nvidia/cu13/lib", "nvidia/cuda_runtime/lib"}
)

// pythonVersion reads the minor version from a path with "python3.N" in it
// (-1 when there is none), so that 3.10 sorts after 3.9.
func pythonVersion(path string) int {
	for _, part := range strings.Split(path, string(filepath.Separator)) {
		if v, ok := strings.CutPrefix(part, "python3."); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// PythonSitePackages lists the site-packages folders where pip puts the
// nvidia-nccl-cu* and nvidia-cuda-runtime-cu* wheels.
func PythonSitePackages() []string {
	var pats []string
	home, _ := os.UserHomeDir()
	for _, pre := range []string{os.Getenv("VIRTUAL_ENV"), os.Getenv("CONDA_PREFIX"), "/usr", "/usr/local", "/opt/conda", home + "/.local", home + "/miniconda3", home + "/anaconda3"} {
		if pre == "" || pre == "/.local" {
			continue
		}
		for _, lib := range []string{"lib", "lib64"} {
			pats = append(pats, filepath.Join(pre, lib, "python3*", "site-packages"), filepath.Join(pre, lib, "python3*", "dist-packages"))
		}
	}
	if home != "" {
		pats = append(pats, filepath.Join(home, ".pyenv", "versions", "*", "lib", "python3*", "site-packages"))
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range pats {
		m, _ := filepath.Glob(p)
		sort.SliceStable(m, func(i, j int) bool { // newest python first
			if vi, vj := pythonVersion(m[i]), pythonVersion(m[j]); vi != vj {
				return vi > vj
			}
			return m[i] > m[j]
		})
		for _, d := range m {
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	return out
}

// candidates returns, in search order, the paths to try for one library:
// the bare names (LD_LIBRARY_PATH and the system loader), then every wheel
// folder of every site-packages root.
func candidates(explicit string, names []string, roots []string, wheelDirs []string) []string {
	if explicit != "" {
		if st, err := os.Stat(explicit); err == nil && st.IsDir() {
			var out []string
			for _, n := range names {
				out = append(out, filepath.Join(explicit, n))
			}
			return out
		}
		return []string{explicit}
	}
	out := append([]string{}, names...)
	for _, r := range roots {
		for _, w := range wheelDirs {
			for _, n := range names {
				out = append(out, filepath.Join(r, w, n))
			}
		}
	}
	return out
}

func describe(explicit, flag string, roots []string, wheelDirs []string) []string {
	if explicit != "" {
		return []string{flag + " " + explicit}
	}
	dirs := "{" + strings.Join(wheelDirs, ",") + "}"
	s := []string{"LD_LIBRARY_PATH and system paths"}
	for i, r := range roots {
		if i == 3 { // keep the message to one readable line
			s = append(s, fmt.Sprintf("%d more python site-packages/%s", len(roots)-3, dirs))
			break
		}
		s = append(s, filepath.Join(r, dirs))
	}
	if len(roots) == 0 {
		s = append(s, "python site-packages/"+dirs+" (none found)")
	}
	return s
}

// cudaErrorInsufficientDriver: the runtime is newer than the driver.
const cudaErrorInsufficientDriver = 35

// openCudart loads and binds the first CUDA runtime of paths that works
// with this machine's driver. A runtime the driver is too old for (a CUDA
// 13 wheel on a CUDA 12 driver says cudaErrorInsufficientDriver) gives way
// to a later one of another soname (libcudart.so.12); it is kept only when
// there is nothing else, and then cudaGetDeviceCount reports the driver.
func openCudart(paths []string) (unsafe.Pointer, string, string) {
	var tooNew, detail string
	for len(paths) > 0 {
		h, p, d := dlopen.First(paths)
		if h == nil {
			if d != "" {
				detail = d
			}
			break
		}
		if m := bindCudart(h); m != "" {
			dlopen.Close(h)
			detail = fmt.Sprintf("cannot use %s: symbol %s missing", p, m)
		} else if _, err := (&Lib{}).DeviceCount(); tooNew == "" && isCudaCode(err, cudaErrorInsufficientDriver) {
			dlopen.Close(h)
			tooNew = p
		} else {
			return h, p, ""
		}
		// Skip every other copy of the same soname.
		var rest []string
		for _, q := range paths[slices.Index(paths, p)+1:] {
			if filepath.Base(q) != filepath.Base(p) {
				rest = append(rest, q)
			}
		}
		paths = rest
	}
	if tooNew != "" {
		h, p, d := dlopen.First([]string{tooNew})
		if h != nil && bindCudart(h) == "" {
			return h, p, ""
		}
		detail = d
	}
	return nil, "", detail
}

func isCudaCode(err error, code int) bool {
	ce, ok := err.(*CudaError)
	return ok && ce.Code == code
}

// Open finds and loads NCCL, then the CUDA runtime.
func Open(o Options) (*Lib, error) {
	roots := o.PythonRoots
	if roots == nil {
		roots = PythonSitePackages()
	}
	ncclNames := []string{"libnccl.so.2"}
	h, path, detail := dlopen.First(candidates(o.NCCLLib, ncclNames, roots, ncclWheelDirs))
	if h == nil {
		return nil, &LoadError{What: "NCCL", Names: "libnccl.so.2", Searched: describe(o.NCCLLib, "--nccl-lib", roots, ncclWheelDirs), Detail: detail, Hint: "install NCCL (e.g. pip install nvidia-nccl-cu12) or pass --nccl-lib"}
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
		if m := bindCudart(h); m != "" {
			l.Close()
			return nil, fmt.Errorf("test library %s lacks %s", path, m)
		}
	} else {
		cands := candidates(o.CudartLib, cudartNames, roots, cudartWheelDirs)
		if o.CudartLib == "" {
			// Next to NCCL first: a wheel or tarball install keeps them together.
			var near []string
			for _, n := range cudartNames {
				near = append(near, filepath.Join(filepath.Dir(l.NCCLPath), n))
			}
			cands = append(near, cands...)
		}
		ch, cpath, cdetail := openCudart(cands)
		if ch == nil {
			l.Close()
			return nil, &LoadError{What: "the CUDA runtime", Names: "libcudart.so.13/.12/.11.0", Searched: describe(o.CudartLib, "--cudart-lib", roots, cudartWheelDirs), Detail: cdetail, Hint: "install the CUDA runtime (e.g. pip install nvidia-cuda-runtime-cu12) or pass --cudart-lib"}
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
	l.HasEvents = hasEvents()
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
