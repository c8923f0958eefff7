// Package fakecuda builds rdmabench's CPU stand-in for the CUDA runtime and
// driver (cuda/testdata/fakecuda) for tests. Nothing measured with it is a
// GPU measurement; the library exports rdmabench_fake_cuda so rdmabench can
// say so.
package fakecuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Source is the path of fakecuda.c.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "fakecuda", "fakecuda.c")
}

// Build compiles the library into dir as libcudart.so.12, links
// libcuda.so.1 to it (one file serves the runtime and the driver), and
// returns dir: the value for RDMABENCH_CUDA_LIB.
func Build(dir string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	out := filepath.Join(dir, "libcudart.so.12")
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", out, Source(), "-lpthread")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the fake CUDA library: %v\n%s", err, b)
	}
	drv := filepath.Join(dir, "libcuda.so.1")
	os.Remove(drv)
	if err := os.Symlink("libcudart.so.12", drv); err != nil {
		return "", err
	}
	return dir, nil
}
