package fakebuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// FakeVerbsCFlags are the flags the zero-cost NIC is built with here, a
// new slice each call (callers append to it): a warning fails the build,
// as its own tests (csrc/fakeverbs/fvtest) want.
func FakeVerbsCFlags() []string {
	return []string{"-O2", "-g", "-Wall", "-Wextra", "-Wno-unused-parameter", "-Werror"}
}

// FakeVerbs compiles the zero-cost NIC (csrc/fakeverbs) into dir as
// libibverbs.so.1, as the Makefile's fakeverbs target does, and returns
// dir: a process started with LD_LIBRARY_PATH=dir sees the device fake0.
func FakeVerbs(dir string) (string, error) {
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "..", "csrc", "fakeverbs")
	all, err := filepath.Glob(filepath.Join(src, "*.c"))
	if err != nil || len(all) == 0 {
		return "", fmt.Errorf("the zero-cost NIC's sources are not in %s", src)
	}
	var lib []string
	for _, f := range all {
		if b := filepath.Base(f); b != "bare.c" && b != "check.c" {
			lib = append(lib, f)
		}
	}
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	args := append(append([]string{"-shared", "-fPIC"}, FakeVerbsCFlags()...), "-fvisibility=hidden",
		"-Wl,--version-script="+filepath.Join(src, "libibverbs.map"), "-Wl,-soname,libibverbs.so.1", "-Wl,-z,now",
		"-o", filepath.Join(dir, "libibverbs.so.1"))
	args = append(append(args, lib...), "-lpthread")
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the zero-cost NIC: %s %s: %v\n%s", cc, strings.Join(args, " "), err, out)
	}
	return dir, nil
}
