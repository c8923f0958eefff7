package doctor

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestLiveRxe runs doctor on the real /sys, /proc and /dev of the device
// named by $RDMABENCH_DEVICE (default rxe0). make test runs it on the rxe
// target, where RDMABENCH_REQUIRE_HW=1 turns a missing device into a failure.
func TestLiveRxe(t *testing.T) {
	dev := requireDevice(t)
	live := Options{SysRoot: "/sys", ProcRoot: "/proc", DevRoot: "/dev"}
	r, err := Run(live)
	if err != nil {
		t.Fatal(err)
	}
	logReport(t, r)
	port := dev + ":1"
	assertFinding(t, r, want{"rdma.devices", "host", Pass, dev})
	assertFinding(t, r, want{"port.state", port, Pass, "ACTIVE"})
	g := r.Find("gid.roce_v2", port)
	if len(g) == 0 && dev != "rxe0" {
		t.Logf("%s is not RoCE: no GID index to check", port)
		return
	}
	if len(g) != 1 || g[0].Status != Pass {
		t.Fatalf("gid.roce_v2 = %+v, want one PASS", g)
	}
	var idx int
	if _, err := fmt.Sscanf(g[0].Value, "index %d", &idx); err != nil {
		t.Fatalf("gid.roce_v2 value %q: %v", g[0].Value, err)
	}
	// The rxe target puts 198.18.0.1 on veth0: the kernel lists the
	// link-local GID at 0 and the IPv4 one at 1.
	if dev == "rxe0" && idx != 1 {
		t.Errorf("RoCE v2 IPv4 GID index %d, want 1: %s", idx, g[0].Value)
	}

	wrong := 0
	if idx == 0 {
		wrong = 1
	}
	live.Env = map[string]string{"NCCL_IB_GID_INDEX": fmt.Sprint(wrong)}
	r, err = Run(live)
	if err != nil {
		t.Fatal(err)
	}
	f := r.Find("nccl.gid_index", port)
	use := fmt.Sprintf("set NCCL_IB_GID_INDEX=%d ", idx)
	if len(f) != 1 || f[0].Status != Fail || !strings.Contains(f[0].Remedy, use) {
		t.Errorf("with NCCL_IB_GID_INDEX=%d: %+v, want a FAIL saying %q", wrong, f, use)
	}
	if !r.Failed() {
		t.Error("a wrong GID index does not fail the report")
	}
}

func logReport(t *testing.T, r *Report) {
	t.Helper()
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("doctor on this host:\n%s", text.String())
}

// requireDevice returns $RDMABENCH_DEVICE (default rxe0), skipping the test
// when the host has no such device, failing it on the rxe target
// (RDMABENCH_REQUIRE_HW=1).
func requireDevice(t *testing.T) string {
	t.Helper()
	dev := os.Getenv("RDMABENCH_DEVICE")
	if dev == "" {
		dev = "rxe0"
	}
	if _, err := os.Stat("/sys/class/infiniband/" + dev); err != nil {
		if os.Getenv("RDMABENCH_REQUIRE_HW") == "1" {
			t.Fatalf("RDMABENCH_REQUIRE_HW=1 but no %s: %v", dev, err)
		}
		t.Skip("needs an RDMA device (rxe0); runs on the rxe target in make test")
	}
	return dev
}
