package cuda

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/rdmabench/rdmabench/internal/leakcheck"

	"github.com/rdmabench/rdmabench/cuda/fakecuda"
)

// TestMain points the loader at the CPU stand-in before anything loads.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		panic(err)
	}
	if _, err := fakecuda.Build(dir); err != nil {
		panic(err)
	}
	os.Setenv(EnvLibDir, dir)
	code := leakcheck.Run(m, func() string {
		if n := LiveBuffers(); n != 0 {
			return fmt.Sprintf("%d GPU buffers not freed", n)
		}
		return ""
	})
	os.RemoveAll(dir)
	os.Exit(code)
}

func TestDevice(t *testing.T) {
	l, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if !l.Fake || l.DriverErr != "" {
		t.Fatalf("stand-in not recognised: %+v", l)
	}
	for _, tc := range []struct {
		spec, bus string
		dev       int
		err       string
	}{
		{"0", "0000:10:00.0", 0, ""},
		{"1", "0000:11:00.0", 1, ""},
		{"0000:11:00.0", "0000:11:00.0", 1, ""},
		{"11:00.0", "0000:11:00.0", 1, ""},
		{"2", "", 0, "this machine has 2 GPU(s)"},
		{"0000:3b:00.0", "", 0, "invalid device ordinal"},
		{"x", "", 0, "want a device index"},
	} {
		dev, bus, err := l.Device(tc.spec)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Device(%q) = %v, want error with %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil || dev != tc.dev || bus != tc.bus {
			t.Errorf("Device(%q) = %d, %q, %v; want %d, %q", tc.spec, dev, bus, err, tc.dev, tc.bus)
		}
	}
}

func TestBufferCopiesAndExport(t *testing.T) {
	l, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	before := LiveBuffers()
	b, err := l.Alloc(1, 3*4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if LiveBuffers() != before+1 {
		t.Errorf("%d live buffers after Alloc, want %d", LiveBuffers(), before+1)
	}
	in := bytes.Repeat([]byte("gpu!"), 1000)
	if err := b.CopyIn(100, in); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(in))
	if err := b.CopyOut(out, 100); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(in, out) {
		t.Fatal("copy round trip differs")
	}
	if err := b.CopyIn(3*4096-1, []byte("xy")); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("copy past the end: %v", err)
	}
	fd, err := b.DmabufFD()
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	if err := b.SyncMemops(); err != nil {
		t.Fatal(err)
	}
	// Copies still work once the CPU mapping is gone.
	if err := b.CopyOut(out, 100); err != nil || !bytes.Equal(in, out) {
		t.Fatalf("copy after SYNC_MEMOPS: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.CopyIn(0, in); err == nil {
		t.Fatal("copy into a freed buffer succeeded")
	}
	if err := b.Close(); err != nil || LiveBuffers() != before {
		t.Errorf("second Close: %v; %d live buffers, want %d", err, LiveBuffers(), before)
	}
}

// TestCPUTouchFaults proves the stand-in as hostile as a GPU: once the
// buffer is set up for RDMA, a plain CPU read of it kills the process.
func TestCPUTouchFaults(t *testing.T) {
	if os.Getenv("FAKECUDA_TOUCH") == "1" {
		l, err := Load()
		if err != nil {
			os.Exit(3)
		}
		b, err := l.Alloc(0, 4096)
		if err != nil || b.SyncMemops() != nil {
			os.Exit(3)
		}
		p := b.Ptr()
		println(*(*byte)(unsafe.Add(nil, p))) // the fault is the test
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCPUTouchFaults$")
	cmd.Env = append(os.Environ(), "FAKECUDA_TOUCH=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "fault") {
		t.Fatalf("CPU read of sealed device memory did not fault: %v\n%s", err, out)
	}
}

func TestNoDmabufExport(t *testing.T) {
	t.Setenv("FAKECUDA_NO_DMABUF", "1")
	l, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Alloc(0, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.DmabufFD(); !NotSupported(err) {
		t.Fatalf("export with FAKECUDA_NO_DMABUF: %v", err)
	}
}

// TestLoadMissing: without a runtime the error names what was looked for and
// how to point rdmabench at one. It stays the file's last test: where a real
// runtime exists, load binds it in place of the stand-in.
func TestLoadMissing(t *testing.T) {
	l, err := load(t.TempDir())
	if err == nil {
		t.Skipf("this machine has a CUDA runtime (%s)", l.CudartPath)
	}
	for _, w := range []string{"cannot load the CUDA runtime", "libcudart.so.12", EnvLibDir} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
}
