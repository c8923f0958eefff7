// Package testenv is the set-up that tests on a stand-in share: building
// the zero-cost NIC once for a test binary, and running that binary again
// on it (a process picks its libibverbs when it starts, so a test that
// wants the stand-in must be a process started with LD_LIBRARY_PATH).
package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/rdmabench/rdmabench/internal/fakebuild"
	"github.com/rdmabench/rdmabench/internal/leakcheck"
)

// onFakeEnv marks the test binary run again on the zero-cost NIC.
const onFakeEnv = "RDMABENCH_TEST_ON_FAKEVERBS"

var (
	libOnce sync.Once
	libDir  string
	libErr  error
)

// FakeVerbsLib builds the zero-cost NIC (csrc/fakeverbs) once for the test
// binary and returns its directory, for LD_LIBRARY_PATH; RemoveFakeVerbs
// removes it at the end. Without cc or rdma-core's headers the error says
// which is missing.
func FakeVerbsLib() (string, error) {
	libOnce.Do(func() {
		if libErr = missingTools(); libErr != nil {
			return
		}
		if libDir, libErr = os.MkdirTemp("", "rdmabench-fakeverbs-"); libErr != nil {
			return
		}
		_, libErr = fakebuild.FakeVerbs(libDir)
	})
	return libDir, libErr
}

// FakeVerbsDir is FakeVerbsLib for a test: it skips where the tools to
// build the stand-in are missing and fails where the build does.
func FakeVerbsDir(t testing.TB) string {
	t.Helper()
	dir, err := FakeVerbsLib()
	var miss *missingError
	switch {
	case errors.As(err, &miss):
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	return dir
}

// RemoveFakeVerbs removes what FakeVerbsLib built, if anything.
func RemoveFakeVerbs() {
	if libDir != "" {
		os.RemoveAll(libDir)
	}
}

type missingError struct{ what string }

func (e *missingError) Error() string { return e.what + ": the zero-cost NIC cannot be built" }

func missingTools() error {
	if _, err := exec.LookPath("cc"); err != nil {
		return &missingError{"no C compiler (cc)"}
	}
	if _, err := os.Stat("/usr/include/infiniband/verbs.h"); err != nil {
		return &missingError{"no rdma-core headers (/usr/include/infiniband/verbs.h; apt-get install libibverbs-dev)"}
	}
	return nil
}

// OnFakeVerbs says whether this process runs on the zero-cost NIC (started
// by FakeVerbsMain).
func OnFakeVerbs() bool { return os.Getenv(onFakeEnv) == "1" }

var notOnFake string

// NeedFakeVerbs skips a test not running on the zero-cost NIC, saying why.
func NeedFakeVerbs(t testing.TB) {
	t.Helper()
	if !OnFakeVerbs() {
		t.Skip(notOnFake)
	}
}

// FakeVerbsMain is the TestMain of a package whose tests run on the
// zero-cost NIC: it builds the stand-in and runs the test binary again,
// with the same flags, on it (LD_LIBRARY_PATH), exiting as it exits. That
// run ends with the leak checks. Where the stand-in cannot be built the
// tests run here, and those that need it skip (NeedFakeVerbs) saying why.
func FakeVerbsMain(m *testing.M, checks ...leakcheck.Check) {
	if OnFakeVerbs() {
		leakcheck.Main(m, checks...)
	}
	dir, err := FakeVerbsLib()
	var miss *missingError
	switch {
	case errors.As(err, &miss):
		notOnFake = err.Error()
		leakcheck.Main(m, checks...)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir, onFakeEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	RemoveFakeVerbs()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "running the tests on the zero-cost NIC:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
