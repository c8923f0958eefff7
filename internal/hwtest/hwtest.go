// Package hwtest is what tests that need an RDMA device share: the rule
// that they skip without one except where make test demands one, and the
// leak check that ends a test binary.
package hwtest

import (
	"fmt"
	"os"
	"runtime"
	"testing"

	"github.com/rdmabench/rdmabench/cuda"
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
// what the tests built). A run that passed fails when a
// verbs object was left open or a GPU buffer not freed.
func Main(m *testing.M, cleanups ...func()) {
	runtime.LockOSThread()
	code := m.Run()
	for _, c := range cleanups {
		c() // before os.Exit, which skips deferred calls
	}
	if leaks := verbs.LeakReport(); leaks != "" && code == 0 {
		fmt.Fprintln(os.Stderr, "leak check:", leaks)
		code = 1
	}
	if n := cuda.LiveBuffers(); n != 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "leak check: %d GPU buffers not freed\n", n)
		code = 1
	}
	os.Exit(code)
}
