// Package fakelib builds rdmabench's CPU stand-in for NCCL and the CUDA
// runtime (nccl/testdata/fakenccl) for tests. Numbers measured with it are
// never GPU measurements; the library exports rdmabench_fake_nccl so
// ncclbench can say so.
package fakelib

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Source is the path of fakenccl.c.
func Source() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "fakenccl", "fakenccl.c")
}

// Build compiles the library into dir as libnccl.so.2 and returns its path.
func Build(dir string) (string, error) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	out := filepath.Join(dir, "libnccl.so.2")
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O2", "-o", out, Source(), "-lpthread")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the fake NCCL library: %v\n%s", err, b)
	}
	return out, nil
}
