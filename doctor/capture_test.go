package doctor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCaptureRoundTrip runs capture.sh over each materialized fixture as if
// it were a live host and checks that doctor finds the same on the capture:
// the script copies everything doctor reads.
func TestCaptureRoundTrip(t *testing.T) {
	if os.Getenv("RDMABENCH_REQUIRE_HW") == "1" {
		// bash under TCG emulation takes minutes over these trees; they are
		// files, and make unit ran this on the host. TestCaptureLive captures
		// the live device here instead.
		t.Skip("host-side test (ran in make unit); TestCaptureLive covers capture.sh on the rxe target")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "capture.sh"))
	if err != nil {
		t.Fatal(err)
	}
	live := map[string]func(t *testing.T) string{}
	for _, fixture := range []string{"rxe", "roce-wrong-gid", "pcie-downgrade"} {
		live[fixture] = func(t *testing.T) string { return materialize(t, fixture) }
	}
	// The generated hosts have the real layout: PCI functions nested under
	// their bridges, class/ entries as links into devices/.
	for _, c := range layoutCases {
		live[c.name] = func(t *testing.T) string {
			root := t.TempDir()
			if err := c.tree("node01").Write(root); err != nil {
				t.Fatal(err)
			}
			return root
		}
	}
	for name, makeLive := range live {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			live := makeLive(t)
			captured := t.TempDir()
			cmd := exec.Command(bash, script, captured)
			cmd.Env = append(os.Environ(), "SYS="+filepath.Join(live, "sys"), "PROC="+filepath.Join(live, "proc"), "DEV="+filepath.Join(live, "dev"), "ETC="+filepath.Join(live, "etc"))
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("capture.sh: %v\n%s", err, out)
			}
			replay := t.TempDir()
			if err := copyTree(captured, replay); err != nil { // %3A → ':'
				t.Fatal(err)
			}
			env := map[string]string{"NCCL_IB_GID_INDEX": "0", "NCCL_IB_HCA": "mlx5_0,mlx5_4,rxe0,mlx4", "NCCL_SOCKET_IFNAME": "eth0"}
			if got, want := reportText(t, replay, env), reportText(t, live, env); got != want {
				t.Errorf("doctor differs on the capture:\n--- capture\n%s\n--- original\n%s", got, want)
			}
		})
	}
}

// reportText runs doctor over root/{sys,proc,dev} and shows root as "".
func reportText(t *testing.T, root string, env map[string]string) string {
	t.Helper()
	r, err := Run(Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"),
		DevRoot: filepath.Join(root, "dev"), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(b.String(), root, "")
}

// TestCaptureLive captures this host with capture.sh and checks that doctor
// finds the same on the capture as on the live host: what an operator
// sends us is what doctor saw. It needs an RDMA device (the rxe target).
func TestCaptureLive(t *testing.T) {
	dev := requireDevice(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal("needs bash")
	}
	script, err := filepath.Abs(filepath.Join("testdata", "capture.sh"))
	if err != nil {
		t.Fatal(err)
	}
	captured := t.TempDir()
	if out, err := exec.Command(bash, script, captured).CombinedOutput(); err != nil {
		t.Fatalf("capture.sh: %v\n%s", err, out)
	}
	replay := t.TempDir()
	if err := copyTree(captured, replay); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NCCL_IB_GID_INDEX": "0", "NCCL_IB_HCA": dev}
	live, err := Run(Options{SysRoot: "/sys", ProcRoot: "/proc", DevRoot: "/dev", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Run(Options{SysRoot: filepath.Join(replay, "sys"), ProcRoot: filepath.Join(replay, "proc"), DevRoot: filepath.Join(replay, "dev"), Env: env})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.Find("port.state", dev+":1")) != 1 {
		t.Fatalf("live report has no port.state for %s", dev)
	}
	// Sources name the roots, which differ; everything else must not.
	strip := func(r *Report) []string {
		var out []string
		for _, f := range r.Findings {
			out = append(out, strings.Join([]string{string(f.Status), f.Check, f.Subject, f.Value}, " | "))
		}
		return out
	}
	if a, b := strings.Join(strip(got), "\n"), strings.Join(strip(live), "\n"); a != b {
		t.Errorf("doctor differs on the capture of this host:\n--- capture\n%s\n--- live\n%s", a, b)
	}
	if live.Facts.Hostname == "" || got.Facts.Hostname != live.Facts.Hostname || got.Facts.Kernel != live.Facts.Kernel {
		t.Errorf("host facts: capture %q %q, live %q %q", got.Facts.Hostname, got.Facts.Kernel, live.Facts.Hostname, live.Facts.Kernel)
	}
}
