package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// containerd is the kubelet's runtime: Debian's containerd with its root,
// state and socket in the test's directories.
type containerd struct {
	proc    *proc
	socket  string
	root    string // the test's directory: everything mounted is below it
	sockDir string // short, for the sockets' 108-byte limit
	// hadKubepods: a kubelet's cgroups were there before this one's.
	hadKubepods bool
}

// containerdConfig is containerd 1.6's config (version 2) for a test.
// restrict_oom_score_adj: the kubelet gives pod sandboxes oom_score_adj
// -998, and without CAP_SYS_RESOURCE (absent from this host's bounding
// set) runc cannot lower its own, so no pod would start. The CNI
// configuration names no real plugin: containerd reports the network
// ready once it has one, and hostNetwork pods, the only kind a test
// runs, never call it.
const containerdConfig = `version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[ttrpc]
  address = %[4]q
[debug]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = %[6]q
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = %[7]q
    bin_dir = %[8]q
`

const cniConfig = `{"cniVersion": "0.4.0", "name": "kubetest-host-network-only",
 "plugins": [{"type": "kubetest-no-such-plugin"}]}
`

// startContainerd starts containerd for c's kubelet and waits for its
// socket. sandboxImage is the pods' pause image, imported afterwards.
func (c *Cluster) startContainerd(t testing.TB, bin, sandboxImage string) *containerd {
	t.Helper()
	sockDir, err := os.MkdirTemp("", "kt-ctrd-")
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	d := filepath.Join(c.dir, "containerd")
	cd := &containerd{socket: filepath.Join(sockDir, "c.sock"), root: c.dir, sockDir: sockDir,
		hadKubepods: len(kubepodsCgroups()) > 0}
	if cd.hadKubepods {
		t.Logf("kubetest: kubepods cgroups are here already (another kubelet's?): they stay after the test")
	}
	for _, sub := range []string{"root", "state", "opt", "cni", "cni-bin"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatalf("kubetest: %v", err)
		}
	}
	cfg := fmt.Sprintf(containerdConfig, filepath.Join(d, "root"), filepath.Join(d, "state"),
		cd.socket, filepath.Join(sockDir, "t.sock"), filepath.Join(d, "opt"), sandboxImage,
		filepath.Join(d, "cni"), filepath.Join(d, "cni-bin"))
	err = os.WriteFile(filepath.Join(d, "config.toml"), []byte(cfg), 0o644)
	if err == nil {
		err = os.WriteFile(filepath.Join(d, "cni", "10-kubetest.conflist"), []byte(cniConfig), 0o644)
	}
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	cd.proc = c.start(t, "containerd", bin, "--config", filepath.Join(d, "config.toml"), "--log-level", "info")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := cd.ctr("version"); err == nil {
			return cd
		} else if ended, _ := cd.proc.exited(); ended || time.Now().After(deadline) {
			t.Fatalf("kubetest: containerd did not answer on %s: %v", cd.socket, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ctr runs `ctr -n k8s.io` (the CRI's namespace) against this containerd.
func (cd *containerd) ctr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", cd.socket, "-n", "k8s.io"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// clean kills every task the kubelet left (the kubelet stops no pod when
// it ends) while containerd still runs, so that their shims unmount
// their root filesystems.
func (cd *containerd) clean(t testing.TB) {
	out, err := cd.ctr("tasks", "ls", "-q")
	if err != nil {
		t.Logf("kubetest: ctr tasks ls: %v %s", err, out)
		return
	}
	for _, id := range strings.Fields(out) {
		// "not found": containerd's CRI deletes a task itself once it
		// has seen it exit, which may be between ls and rm.
		if out, err := cd.ctr("tasks", "rm", "-f", id); err != nil && !strings.Contains(out, "not found") {
			t.Logf("kubetest: ctr tasks rm -f %s: %v %s", id, err, out)
		}
	}
}

// reap is what clean could not do, once containerd has ended: it kills
// the shims started for this containerd (they outlive it by design) and
// unmounts anything still mounted below the test's directory.
func (cd *containerd) reap(t testing.TB) {
	for _, pid := range shims(cd.socket) {
		t.Logf("kubetest: killing containerd-shim %d", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, m := range mountsUnder(cd.root) {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
			t.Errorf("kubetest: umount %s: %v", m, err)
		}
	}
	if !cd.hadKubepods {
		removeCgroups(t)
	}
}

// kubepodsCgroups are the kubelet's top cgroups (kubepods) in every
// hierarchy, cgroup v1's and v2's.
func kubepodsCgroups() []string {
	tops, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if _, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil {
		tops = append(tops, "/sys/fs/cgroup/kubepods")
	}
	return tops
}

// removeCgroups removes the kubelet's cgroups (kubepods, its QoS classes
// and the pods in them) once their processes are gone: only one plane
// runs on a host at a time (testenv.HoldCPUs), and StartKubelet calls
// this only where no kubepods was there before it (a host that is a
// real node keeps its kubelet's).
func removeCgroups(t testing.TB) {
	for _, top := range kubepodsCgroups() {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- { // children before parents
			if err := syscall.Rmdir(dirs[i]); err != nil {
				t.Logf("kubetest: rmdir %s: %v", dirs[i], err)
			}
		}
	}
}

// shims are the processes whose command line names socket: the shims
// are started with `-address SOCKET`.
func shims(socket string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.Contains(args[0], "containerd-shim") && bytes.Contains(b, []byte("\x00"+socket+"\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder lists the mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		// mountinfo escapes space, tab, newline and backslash as octal.
		p, err := strconv.Unquote(`"` + strings.ReplaceAll(f[4], `"`, `\"`) + `"`)
		if err != nil {
			p = f[4]
		}
		if strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}
