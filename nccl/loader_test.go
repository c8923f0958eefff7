package nccl

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/leakcheck"

	"github.com/rdmabench/rdmabench/internal/dlopen"
	"github.com/rdmabench/rdmabench/nccl/fakelib"
)

var fakePath string

func TestMain(m *testing.M) {
	if os.Getenv("NCCL_TEST_USE_AFTER_ABORT") != "" {
		useAfterAbort(os.Getenv("NCCL_TEST_USE_AFTER_ABORT"))
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "nccltest-")
	if err != nil {
		panic(err)
	}
	fakePath, err = fakelib.Build(dir)
	if err != nil {
		os.RemoveAll(dir)
		panic(err)
	}
	code := leakcheck.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestOpenMissing(t *testing.T) {
	t.Setenv("LD_LIBRARY_PATH", t.TempDir())
	_, err := Open(Options{NCCLLib: filepath.Join(t.TempDir(), "nope.so"), PythonRoots: []string{}})
	if err == nil {
		t.Fatal("Open succeeded with a missing library")
	}
	msg := err.Error()
	for _, want := range []string{"cannot load NCCL", "libnccl.so.2 not found", "--nccl-lib"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error is not one line: %q", msg)
	}
	var le *LoadError
	if !errors.As(err, &le) || le.What != "NCCL" || !errors.Is(err, dlopen.ErrNotFound) {
		t.Errorf("error %#v, want a *LoadError for NCCL wrapping dlopen.ErrNotFound", err)
	}
}

func TestVersionString(t *testing.T) {
	for code, want := range map[int]string{22901: "2.29.1", 21805: "2.18.5", 2804: "2.8.4", 21203: "2.12.3"} {
		if got := VersionString(code); got != want {
			t.Errorf("VersionString(%d) = %s, want %s", code, got, want)
		}
	}
}

// TestFakeLibrary loads the test library through the real loader, from a
// python-wheel style folder, and runs a one-rank all-reduce.
func TestFakeLibrary(t *testing.T) {
	root := t.TempDir()
	wheel := filepath.Join(root, "nvidia", "nccl", "lib")
	if err := os.MkdirAll(wheel, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(fakePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wheel, "libnccl.so.2"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LD_LIBRARY_PATH", t.TempDir())
	// Streams start each operation 100 ms after it was queued, so the
	// check below that they are not done yet cannot lose a race.
	t.Setenv("RDMABENCH_FAKE_NCCL_LATENCY_US", "100000")
	l, err := Open(Options{PythonRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	if !l.Fake {
		t.Error("fake library not recognised")
	}
	if !strings.HasPrefix(l.NCCLPath, root) {
		t.Errorf("loaded %s, want the copy under %s", l.NCCLPath, root)
	}
	if l.Version != 22901 || !l.HasAlltoAll {
		t.Errorf("version %d alltoall %v", l.Version, l.HasAlltoAll)
	}
	n, err := l.DeviceCount()
	if err != nil || n < 1 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	name, _ := l.DeviceName(0)
	if name != "fake-cpu" {
		t.Errorf("device name %q", name)
	}
	id, err := l.GetUniqueID()
	if err != nil {
		t.Fatal(err)
	}
	if !l.HasNonblocking {
		t.Fatal("ncclCommInitRankConfig not found")
	}
	comms, err := l.CommInitRanks(2, id, []int{0, 1}, []int{0, 1}, true)
	if err != nil {
		t.Fatal(err)
	}
	// Non-blocking: the communicators are ready when they stop saying
	// ncclInProgress.
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range comms {
		for err := l.CommAsyncError(c); err != nil; err = l.CommAsyncError(c) {
			if !InProgress(err) || time.Now().After(deadline) {
				t.Fatalf("init: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	const count = 4
	var streams []Stream
	var bufs []DevPtr
	for i := range comms {
		s, _ := l.StreamCreate()
		p, err := l.Malloc(count * 4)
		if err != nil {
			t.Fatal(err)
		}
		in := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, byte(10 * (i + 1)), 0, 0, 0}
		if err := l.MemcpyH2D(p, in); err != nil {
			t.Fatal(err)
		}
		streams, bufs = append(streams, s), append(bufs, p)
	}
	// Events around rank 0's operation complete with it: not before (the
	// stream starts it 100 ms after it was queued), and about 100 ms apart.
	if !l.HasEvents {
		t.Fatal("no CUDA events")
	}
	evA, errA := l.EventCreate()
	evB, errB := l.EventCreate()
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if err := l.EventRecord(evA, streams[0]); err != nil {
		t.Fatal(err)
	}
	if err := l.GroupStart(); err != nil {
		t.Fatal(err)
	}
	for i, c := range comms {
		if err := l.AllReduce(bufs[i], bufs[i], count, Int32, Sum, c, streams[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.GroupEnd(); err != nil {
		t.Fatal(err)
	}
	if err := l.EventRecord(evB, streams[0]); err != nil {
		t.Fatal(err)
	}
	// The stand-in completes streams asynchronously, as a GPU does.
	if done, _ := l.StreamDone(streams[0]); done {
		t.Error("the stream finished inside ncclGroupEnd")
	}
	if d, err := l.EventElapsed(evA, evB); err == nil {
		t.Errorf("events elapsed %v before their stream got there", d)
	}
	for i := range comms {
		for {
			done, err := l.StreamDone(streams[i])
			if err != nil || time.Now().After(deadline) {
				t.Fatalf("stream not done: %v", err)
			}
			if done {
				break
			}
			time.Sleep(100 * time.Microsecond)
		}
		out := make([]byte, count*4)
		if err := l.MemcpyD2H(out, bufs[i]); err != nil {
			t.Fatal(err)
		}
		if out[0] != 2 || out[4] != 4 || out[8] != 6 || out[12] != 30 {
			t.Errorf("rank %d: all-reduce gave %v", i, out)
		}
	}
	// The operation starts 100 ms after it was queued, but evA is stamped
	// when the stream's thread gets to it, as a GPU does: on a busy host
	// that is a few ms after the operation was queued (96.5 ms apart once,
	// from a fresh clone's make test), so the bound is half the latency.
	if d, err := l.EventElapsed(evA, evB); err != nil || d < 50*time.Millisecond || d > 5*time.Second {
		t.Errorf("events around one operation: %v, %v; want about 100 ms (the operation's latency)", d, err)
	}
	if err := l.EventDestroy(evA); err != nil {
		t.Error(err)
	}
	l.EventDestroy(evB)
	// Errors carry NCCL's text.
	err = l.AllReduce(bufs[0], bufs[0], count, 99, Sum, comms[0], streams[0])
	if e := (*Error)(nil); !errors.As(err, &e) || e.Code != 4 || !strings.Contains(e.Error(), "invalid argument") {
		t.Errorf("bad datatype gave %v", err)
	}
	for _, c := range comms {
		if err := l.CommDestroy(c); err != nil {
			t.Error(err)
		}
	}
}

// stubCudart builds a CUDA runtime whose cudaGetDeviceCount returns rc
// (with n devices when rc is 0) as dir/name.
func stubCudart(t *testing.T, dir, name string, rc, n int) string {
	t.Helper()
	src := filepath.Join(dir, "stub.c")
	code := fmt.Sprintf(`#include <stddef.h>
int cudaGetDeviceCount(int *n) { *n = %d; return %d; }
int cudaSetDevice(int d) { return 0; }
int cudaMalloc(void **p, size_t n) { return 2; }
int cudaFree(void *p) { return 0; }
int cudaMemcpy(void *d, const void *s, size_t n, int k) { return 0; }
int cudaMemset(void *d, int v, size_t n) { return 0; }
int cudaStreamCreate(void **s) { return 0; }
int cudaStreamDestroy(void *s) { return 0; }
int cudaStreamQuery(void *s) { return 0; }
int cudaStreamSynchronize(void *s) { return 0; }
const char *cudaGetErrorString(int e) { return e == 35 ? "CUDA driver version is insufficient for CUDA runtime version" : "no error"; }
`, n, rc)
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	if b, err := exec.Command("gcc", "-shared", "-fPIC", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

// A CUDA 13 runtime on a CUDA 12 driver (cudaErrorInsufficientDriver) gives
// way to libcudart.so.12 before anyone says there is no GPU; alone, it is
// kept and the driver error is what DeviceCount reports.
func TestCudartDriverFallback(t *testing.T) {
	d13, d13b, d12 := t.TempDir(), t.TempDir(), t.TempDir()
	new1 := stubCudart(t, d13, "libcudart.so.13", cudaErrorInsufficientDriver, 0)
	new2 := stubCudart(t, d13b, "libcudart.so.13", cudaErrorInsufficientDriver, 0)
	old := stubCudart(t, d12, "libcudart.so.12", 0, 3)

	h, p, err := openCudart([]string{new1, new2, old})
	if h == nil || p != old {
		t.Fatalf("loaded %q (%v), want %s", p, err, old)
	}
	if n, err := (&Lib{}).DeviceCount(); n != 3 || err != nil {
		t.Errorf("DeviceCount = %d, %v", n, err)
	}
	dlopen.Close(h)

	h, p, _ = openCudart([]string{new1, filepath.Join(d12, "missing.so.12")})
	if h == nil || p != new1 {
		t.Fatalf("loaded %q, want the CUDA 13 runtime when it is all there is", p)
	}
	_, err = (&Lib{}).DeviceCount()
	if !NoDevice(err) || !strings.Contains(err.Error(), "insufficient") {
		t.Errorf("DeviceCount error %v", err)
	}
	dlopen.Close(h)
}

// useAfterAbort creates a one-rank communicator with the stand-in at lib,
// aborts it, then asks it for its error, as a thread that did not know of
// the abort would.
func useAfterAbort(lib string) {
	l, err := Open(Options{NCCLLib: lib, PythonRoots: []string{}})
	if err != nil {
		panic(err)
	}
	id, _ := l.GetUniqueID()
	comms, err := l.CommInitRanks(1, id, []int{0}, []int{0}, false)
	if err != nil {
		panic(err)
	}
	l.CommAbort(comms[0])
	l.CommAsyncError(comms[0])
}

// The stand-in frees a communicator in ncclCommAbort as NCCL does: any
// later use crashes, so a test catches it.
func TestStandInUseAfterAbortCrashes(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "NCCL_TEST_USE_AFTER_ABORT="+fakePath)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SIGSEGV") {
		t.Errorf("a call after ncclCommAbort did not crash: %v\n%s", err, out)
	}
}
