// Package fakebuild compiles the C stand-ins tests load in place of NCCL
// and CUDA (nccl/fakelib, cuda/fakecuda) into shared libraries, one way for
// both: $CC (gcc by default), position-independent, with pthreads.
package fakebuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Source is the path of a stand-in's C file, relative to the file of the
// caller (its package's folder).
func Source(rel ...string) string {
	_, file, _, _ := runtime.Caller(1)
	return filepath.Join(append([]string{filepath.Dir(file)}, rel...)...)
}

// Shared compiles src into the shared library out; what names it in the
// error ("the fake NCCL library").
func Shared(what, src, out string) error {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	cmd := exec.Command(cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", out, src, "-lpthread")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", what, err, b)
	}
	return nil
}
