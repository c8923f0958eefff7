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
