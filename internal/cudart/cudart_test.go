package cudart

import (
	"bytes"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/rdmabench/rdmabench/cuda/fakecuda"
	"github.com/rdmabench/rdmabench/internal/dlopen"
	"github.com/rdmabench/rdmabench/nccl/fakelib"
)

func open(t *testing.T, path string) unsafe.Pointer {
	t.Helper()
	h, err := dlopen.Open(path)
	if h == nil {
		t.Fatal(err)
	}
	return h
}

func wantErr(t *testing.T, err error, call string, dev, code int, text string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Call != call || e.Device != dev || e.Code != code || e.Text != text || e.Driver {
		t.Errorf("error %#v, want %s on %d: %s (%d)", err, call, dev, text, code)
	}
}

// TestBind binds the two stand-ins in turn, as cuda/ and nccl/ do: the
// rdmabench one (runtime and driver in one file, no streams) and the
// ncclbench one (a runtime with streams, events and graphs, no bus id
// lookup). The pointers are globals, so the steps run in order.
func TestBind(t *testing.T) {
	dir := t.TempDir()
	if _, err := fakecuda.Build(dir); err != nil {
		t.Fatal(err)
	}
	ncclPath, err := fakelib.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	cuda := open(t, filepath.Join(dir, "libcudart.so.12"))
	nccl := open(t, ncclPath)

	if m := Bind(cuda, StreamCalls...); m != "cudaMemset" {
		t.Fatalf("Bind(fakecuda, StreamCalls) = %q, want cudaMemset missing", m)
	}
	if m := Bind(cuda, BusIDCalls...); m != "" {
		t.Fatalf("Bind(fakecuda) lacks %s", m)
	}
	if n, err := DeviceCount(); n != 2 || err != nil {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	if v := RuntimeVersion(); v != 12040 {
		t.Errorf("RuntimeVersion = %d", v)
	}
	if id, err := PCIBusID(1); id != "0000:11:00.0" || err != nil {
		t.Errorf("PCIBusID(1) = %q, %v", id, err)
	}
	_, err = DeviceByBusID("0000:3b:00.0")
	wantErr(t, err, "cudaDeviceGetByPCIBusId(0000:3b:00.0)", -1, 101, "invalid device ordinal")
	if err != nil && err.Error() != "cudaDeviceGetByPCIBusId(0000:3b:00.0): invalid device ordinal (cudaError 101)" {
		t.Errorf("message %q", err)
	}
	// A device call whose cudaSetDevice fails names that call, and the GPU.
	_, err = Device(5).Malloc(64)
	wantErr(t, err, "cudaSetDevice", 5, 101, "invalid device ordinal")
	if err != nil && err.Error() != "cudaSetDevice on GPU 5: invalid device ordinal (cudaError 101)" {
		t.Errorf("message %q", err)
	}
	// What the library lacks answers CodeUnbound, without a call.
	_, err = StreamCreate()
	wantErr(t, err, "cudaStreamCreate", -1, CodeUnbound, "not in the loaded CUDA library")
	if HasEvents() || HasGraphs() {
		t.Error("fakecuda has no events or graphs")
	}
	if name, err := DeviceName(0); name != "unknown" || err != nil {
		t.Errorf("DeviceName without cudaGetDeviceProperties = %q, %v", name, err)
	}

	if m := BindDriver(cuda); m != "" {
		t.Fatalf("BindDriver(fakecuda) lacks %s", m)
	}
	if err := DriverInit(); err != nil || !HasDmabuf() {
		t.Fatalf("DriverInit: %v; dma-buf %v", err, HasDmabuf())
	}
	d := Device(1)
	p, err := d.Malloc(8192)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := d.DmabufFD(p, 8192)
	if err != nil || fd < 0 {
		t.Fatalf("DmabufFD = %d, %v", fd, err)
	}
	syscall.Close(fd)
	if err := d.SyncMemops(p); err != nil {
		t.Fatal(err)
	}
	in := bytes.Repeat([]byte("cudart"), 1000)
	out := make([]byte, len(in))
	if err := d.MemcpyH2D(p+100, in); err != nil {
		t.Fatal(err)
	}
	if err := d.MemcpyD2H(out, p+100); err != nil || !bytes.Equal(in, out) {
		t.Fatalf("copy round trip: %v", err)
	}
	err = d.MemcpyH2D(p+8000, in)
	wantErr(t, err, "cudaMemcpy(host to device)", 1, 1, "invalid argument")
	if err := d.Free(p); err != nil {
		t.Fatal(err)
	}

	// The NCCL stand-in's runtime replaces the first one whole: what it
	// lacks is unbound, not left over.
	if m := Bind(nccl, StreamCalls...); m != "" {
		t.Fatalf("Bind(fakenccl) lacks %s", m)
	}
	if !HasEvents() || !HasGraphs() {
		t.Error("fakenccl's events and graphs not bound")
	}
	if name, err := DeviceName(0); name != "fake-cpu" || err != nil {
		t.Errorf("DeviceName = %q, %v", name, err)
	}
	_, err = DeviceByBusID("0000:10:00.0")
	wantErr(t, err, "cudaDeviceGetByPCIBusId(0000:10:00.0)", -1, CodeUnbound, "not in the loaded CUDA library")
	if err := SetDevice(3); err != nil {
		t.Fatal(err)
	}
	s, err := StreamCreate()
	if err != nil {
		t.Fatal(err)
	}
	q, err := Current.Malloc(16)
	if err != nil {
		t.Fatal(err)
	}
	if err := Current.Memset(q, 7, 16); err != nil {
		t.Fatal(err)
	}
	if err := StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	if done, err := StreamDone(s); !done || err != nil {
		t.Errorf("StreamDone after synchronize = %v, %v", done, err)
	}
	if err := Current.MemcpyD2H(out[:16], q); err != nil || !bytes.Equal(out[:16], bytes.Repeat([]byte{7}, 16)) {
		t.Errorf("memset then copy: %v %v", out[:16], err)
	}
	Current.Free(q)
	StreamDestroy(s)

	// A failed Bind leaves the runtime bound before it.
	if m := Bind(cuda, StreamCalls...); m == "" {
		t.Fatal("fakecuda bound with stream calls")
	}
	if !HasEvents() {
		t.Error("a failed Bind unbound the runtime before it")
	}
}
