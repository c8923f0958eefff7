// Package fakecuda builds rdmabench's CPU stand-in for the CUDA runtime and
// driver (cuda/testdata/fakecuda) for tests. Nothing measured with it is a
// GPU measurement; the library exports rdmabench_fake_cuda so rdmabench can
// say so.
package fakecuda

import (
	"os"
	"path/filepath"

	"github.com/rdmabench/rdmabench/internal/fakebuild"
)

// Source is the path of fakecuda.c.
func Source() string { return fakebuild.Source("..", "testdata", "fakecuda", "fakecuda.c") }

// Build compiles the library into dir as libcudart.so.12, links
// libcuda.so.1 to it (one file serves the runtime and the driver), and
// returns dir: the value for RDMABENCH_CUDA_LIB.
func Build(dir string) (string, error) {
	if err := fakebuild.Shared("the fake CUDA library", Source(), filepath.Join(dir, "libcudart.so.12")); err != nil {
		return "", err
	}
	drv := filepath.Join(dir, "libcuda.so.1")
	os.Remove(drv)
	if err := os.Symlink("libcudart.so.12", drv); err != nil {
		return "", err
	}
	return dir, nil
}
