// Package fakelib builds rdmabench's CPU stand-in for NCCL and the CUDA
// runtime (nccl/testdata/fakenccl) for tests. Numbers measured with it are
// never GPU measurements; the library exports rdmabench_fake_nccl so
// ncclbench can say so.
package fakelib

import (
	"path/filepath"

	"github.com/rdmabench/rdmabench/internal/fakebuild"
)

// Source is the path of fakenccl.c.
func Source() string { return fakebuild.Source("..", "testdata", "fakenccl", "fakenccl.c") }

// Build compiles the library into dir as libnccl.so.2 and returns its path.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, "libnccl.so.2")
	return out, fakebuild.Shared("the fake NCCL library", Source(), out)
}
