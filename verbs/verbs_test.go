package verbs

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/rdmabench/rdmabench/internal/leakcheck"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// TestMain is the leak tracer: every test must close what it opened and
// stop what it started.
func TestMain(m *testing.M) { leakcheck.Main(m, LeakReport) }

func TestRateFromPort(t *testing.T) {
	tests := []struct {
		speed, width int
		rate         float64
		lanes        int
		name         string
	}{
		{64, 2, 200, 4, "HDR"},
		{32, 2, 100, 4, "EDR"},
		{128, 2, 400, 4, "NDR"},
		{1, 1, 2.5, 1, "SDR"},
		{4, 1, 10, 1, "QDR"},
		{16, 8, 168, 12, "FDR"},
		{0, 2, 0, 4, ""},
	}
	for _, tt := range tests {
		rate, lanes, name := RateFromPort(tt.speed, tt.width)
		if rate != tt.rate || lanes != tt.lanes || name != tt.name {
			t.Errorf("RateFromPort(%d, %d) = %v, %d, %q; want %v, %d, %q", tt.speed, tt.width, rate, lanes, name, tt.rate, tt.lanes, tt.name)
		}
	}
}

func TestMTUEnum(t *testing.T) {
	for _, m := range []MTU{256, 512, 1024, 2048, 4096} {
		e, err := m.enum()
		if err != nil || mtuFromEnum(e) != m {
			t.Errorf("MTU %d round trip: %v %v", m, e, err)
		}
	}
	if _, err := MTU(1500).enum(); err == nil {
		t.Error("MTU 1500 accepted")
	}
}

func TestResourceClosesChildrenFirst(t *testing.T) {
	var order []string
	mk := func(name string, parents ...*resource) *resource {
		r := &resource{}
		r.init("test-"+name, func() error { order = append(order, name); return nil }, parents...)
		return r
	}
	ctx := mk("ctx")
	cq := mk("cq", ctx)
	pd := mk("pd", ctx)
	mk("mr", pd)
	qp := mk("qp", pd, cq)
	if err := ctx.close(); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(order, " ")
	if got != "qp mr pd cq ctx" {
		t.Errorf("close order = %q, want %q", got, "qp mr pd cq ctx")
	}
	if err := qp.close(); err != nil || len(order) != 5 {
		t.Errorf("second close ran again: %v %v", err, order)
	}
}

func TestResourceErrorsJoined(t *testing.T) {
	parent := &resource{}
	parent.init("test-parent", func() error { return nil })
	child := &resource{}
	child.init("test-child", func() error { return &VerbError{Verb: "ibv_destroy_qp", Errno: syscall.EBUSY} }, parent)
	err := parent.close()
	if !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("err = %v, want EBUSY kept", err)
	}
	if !strings.Contains(err.Error(), "ibv_destroy_qp") {
		t.Errorf("error %q does not name the verb", err)
	}
}

func TestCompletionErrorIs(t *testing.T) {
	err := error(&CompletionError{Status: WCRemoteAccessErr, QPN: 7, Opcode: "RDMA_WRITE"})
	if !errors.Is(err, WCRemoteAccessErr) || errors.Is(err, WCRetryExcErr) {
		t.Errorf("errors.Is mismatch for %v", err)
	}
	if !strings.Contains(err.Error(), "remote access error") {
		t.Errorf("%q lacks ibv_wc_status_str text", err)
	}
}

func TestHostBufferPlacement(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    HostOptions
		err  string
	}{
		{"anywhere", HostOptions{Node: -1}, ""},
		{"node 0", HostOptions{Node: 0}, ""},
		{"missing node", HostOptions{Node: 1000}, "does not exist"},
		{"node out of range", HostOptions{Node: 5000}, "outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := AllocHostBuffer(3*4096+5, tc.o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			nodes, err := b.Nodes()
			if err != nil {
				t.Fatal(err)
			}
			if len(nodes) > 0 && tc.o.Node >= 0 && nodes[0].Node != tc.o.Node {
				t.Errorf("pages on %s, want node %d", FormatNodes(nodes), tc.o.Node)
			}
		})
	}
}

func TestFormatNodes(t *testing.T) {
	for _, tc := range []struct {
		in   []NodeShare
		want string
	}{
		{[]NodeShare{{0, 10}}, "0"},
		{[]NodeShare{{1, 3}, {0, 1}}, "1 (75%), 0 (25%)"},
	} {
		if got := FormatNodes(tc.in); got != tc.want {
			t.Errorf("FormatNodes(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestHugePagesNoneFree: without a pool the error says how to reserve one.
func TestHugePagesNoneFree(t *testing.T) {
	b, err := AllocHostBuffer(1, HostOptions{Node: -1, HugePages: true})
	if err == nil {
		b.Close()
		t.Skip("this host has free huge pages (TestHugePagesReserved covers them)")
	}
	if !errors.Is(err, ErrNoHugePages) || !strings.Contains(err.Error(), "nr_hugepages") {
		t.Fatalf("err %v", err)
	}
}

// ibv_get_device_list's ENOSYS (a kernel without RDMA) is ErrNoRDMA: one
// line that says what to do, still an ENOSYS to errors.Is.
func TestListErrNoRDMA(t *testing.T) {
	err := listErr(syscall.ENOSYS)
	if !errors.Is(err, ErrNoRDMA) || !errors.Is(err, syscall.ENOSYS) ||
		err.Error() != "no RDMA in this kernel (ibv_get_device_list: errno 38): load the RDMA modules (rdma_rxe/mlx5_ib) or run on the rxe target (docs/rxe.md)" {
		t.Errorf("ENOSYS: %v", err)
	}
	if err := listErr(syscall.EACCES); errors.Is(err, ErrNoRDMA) {
		t.Errorf("EACCES: %v is not ErrNoRDMA", err)
	}
}

// One sentinel for "no such device": errors.Is matches across verbs and
// rdmasys, whichever of them said it.
func TestErrNoDeviceIsRdmasys(t *testing.T) {
	if !errors.Is(fmt.Errorf("%w: %q", ErrNoDevice, "mlx5_9"), rdmasys.ErrNoDevice) {
		t.Fatal("verbs.ErrNoDevice does not match rdmasys.ErrNoDevice")
	}
	if !errors.Is(&noRDMAError{err: &VerbError{Verb: "ibv_get_device_list"}, noDevice: true}, rdmasys.ErrNoDevice) {
		t.Fatal("Open's no-RDMA error does not match rdmasys.ErrNoDevice")
	}
}
