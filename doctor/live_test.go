package doctor

import (
	"os"
	"strings"
	"testing"
)

// TestLiveRxe runs doctor on the real /sys, /proc and /dev of the rxe target
// (make test runs it there, inside the qemu guest).
func TestLiveRxe(t *testing.T) {
	if _, err := os.Stat("/sys/class/infiniband/rxe0"); err != nil {
		t.Skip("needs an RDMA device (rxe0); runs on the rxe target in make test")
	}
	r, err := Run(Options{SysRoot: "/sys", ProcRoot: "/proc", DevRoot: "/dev"})
	if err != nil {
		t.Fatal(err)
	}
	assertFinding(t, r, want{"rdma.devices", "host", Pass, "rxe0"})
	assertFinding(t, r, want{"port.state", "rxe0:1", Pass, "ACTIVE"})
	g := r.Find("gid.roce_v2", "rxe0:1")
	if len(g) != 1 || g[0].Status != Pass {
		t.Fatalf("gid.roce_v2 = %+v, want one PASS", g)
	}
	// The target configures 198.18.0.1 on veth0: the kernel lists the
	// link-local GID first and the IPv4 one at index 1.
	assertFinding(t, r, want{"gid.roce_v2", "rxe0:1", Pass, "index 1 "})

	r, err = Run(Options{SysRoot: "/sys", ProcRoot: "/proc", DevRoot: "/dev",
		Env: map[string]string{"NCCL_IB_GID_INDEX": "0"}})
	if err != nil {
		t.Fatal(err)
	}
	f := r.Find("nccl.gid_index", "rxe0:1")
	if len(f) != 1 || f[0].Status != Fail || !strings.Contains(f[0].Remedy, "NCCL_IB_GID_INDEX=1 ") {
		t.Errorf("with NCCL_IB_GID_INDEX=0: %+v, want a FAIL naming index 1", f)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Logf("doctor on the live rxe target:\n%s", text.String())
}
