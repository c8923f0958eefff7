// Package hwtest is what tests that need an RDMA device share: the rule
// that they skip without one except where make test demands one, and the
// leak check that ends a test binary.
package hwtest

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/cuda"
	"github.com/rdmabench/rdmabench/internal/leakcheck"
	"github.com/rdmabench/rdmabench/verbs"
)

// NeedRDMA skips without a device, except where make test demands one
// (RDMABENCH_REQUIRE_HW=1, on the rxe target), where it fails.
func NeedRDMA(t testing.TB) {
	t.Helper()
	if names, _ := verbs.DeviceNames(); len(names) > 0 {
		return
	}
	if os.Getenv("RDMABENCH_REQUIRE_HW") == "1" {
		t.Fatal("RDMABENCH_REQUIRE_HW=1 but no RDMA device found")
	}
	t.Skip("needs an RDMA device (e.g. rxe0); runs for real on the rxe target in make test")
}

// Main runs the tests as rdmabench runs: the main goroutine keeps the main
// thread, so no measurement loop runs on it, then runs cleanups (removing
// what the tests built). A run that passed fails when a goroutine the tests
// started, a verbs object, a C loop or a GPU buffer outlived them
// (internal/leakcheck).
func Main(m *testing.M, cleanups ...func()) {
	runtime.LockOSThread()
	code := leakcheck.Run(m, Native()...)
	for _, c := range cleanups {
		c() // before os.Exit, which skips deferred calls
	}
	os.Exit(code)
}

// Native is the leak checks of the native objects: verbs objects open, C
// loops running, GPU buffers not freed.
func Native() []leakcheck.Check {
	return []leakcheck.Check{verbs.LeakReport, CLoops, GPUBuffers}
}

// CLoops says how many C measurement loops are still running.
func CLoops() string {
	if n := csrc.Running(); n != 0 {
		return fmt.Sprintf("%d C loops running", n)
	}
	return ""
}

// GPUBuffers says how many GPU buffers are not freed.
func GPUBuffers() string {
	if n := cuda.LiveBuffers(); n != 0 {
		return fmt.Sprintf("%d GPU buffers not freed", n)
	}
	return ""
}
