// Package nvlib finds NVIDIA's libraries for both run-time loaders (nccl/
// for ncclbench, cuda/ for --use-cuda): NCCL and the CUDA runtime as the
// system loader, tarballs and pip's wheels install them, with one rule for
// a CUDA runtime the driver is too old for.
package nvlib

import (
	"errors"
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

// CudartNames are the CUDA runtime's sonames, newest first.
var CudartNames = []string{"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"}

// Where pip's NVIDIA wheels put the libraries, under site-packages: CUDA 13
// wheels share nvidia/cu13/lib.
var (
	NCCLWheelDirs   = []string{"nvidia/nccl/lib", "nvidia/cu13/lib"}
	CudartWheelDirs = []string{"nvidia/cu13/lib", "nvidia/cuda_runtime/lib"}
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

// Named is what an explicit library path names: each of names in it when it
// is a directory; when it is a file, the file, then (siblings) each of
// names beside it.
func Named(explicit string, names []string, siblings bool) []string {
	dir, out := explicit, []string(nil)
	if st, err := os.Stat(explicit); err != nil || !st.IsDir() {
		if out, dir = []string{explicit}, filepath.Dir(explicit); !siblings {
			return out
		}
	}
	for _, n := range names {
		out = append(out, filepath.Join(dir, n))
	}
	return out
}

// Candidates returns, in search order, the paths to try for one library:
// what explicit names, else the bare names (LD_LIBRARY_PATH and the system
// loader), then every wheel folder of every site-packages root.
func Candidates(explicit string, names []string, roots []string, wheelDirs []string) []string {
	if explicit != "" {
		return Named(explicit, names, false)
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

// Describe says where Candidates looked, for a one-line error.
func Describe(explicit, flag string, roots []string, wheelDirs []string) []string {
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

// CudaErrorInsufficientDriver: the runtime is newer than the driver.
const CudaErrorInsufficientDriver = 35

// OpenCudart loads the first CUDA runtime of paths that works with this
// machine's driver: bind binds the loader's entry points on a handle (and
// names a missing one), driverTooOld asks the bound runtime whether the
// driver is older than it (cudaErrorInsufficientDriver). A runtime the
// driver is too old for (a CUDA 13 wheel on a CUDA 12 driver) gives way to
// a later one of another soname (libcudart.so.12); it is kept only when
// there is nothing else, and then cudaGetDeviceCount reports the driver.
// The error is dlopen's: *dlopen.Error, *dlopen.MissingSymbolError or
// dlopen.ErrNotFound.
func OpenCudart(paths []string, bind func(unsafe.Pointer) string, driverTooOld func() bool) (unsafe.Pointer, string, error) {
	var tooNew string
	var why error = dlopen.ErrNotFound
	for len(paths) > 0 {
		h, p, err := dlopen.First(paths)
		if h == nil {
			if !errors.Is(err, dlopen.ErrNotFound) {
				why = err
			}
			break
		}
		if m := bind(h); m != "" {
			dlopen.Close(h)
			why = &dlopen.MissingSymbolError{Lib: p, Symbol: m}
		} else if tooNew == "" && driverTooOld() {
			dlopen.Close(h)
			tooNew = p
		} else {
			return h, p, nil
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
		h, p, err := dlopen.First([]string{tooNew})
		if h != nil && bind(h) == "" {
			return h, p, nil
		}
		why = err
		if err == nil { // it loaded again but no longer binds: say nothing more
			why = dlopen.ErrNotFound
		}
	}
	return nil, "", why
}
