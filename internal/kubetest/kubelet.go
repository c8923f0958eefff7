package kubetest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
)

// kubeletReadyWithin bounds the kubelet's start to a Ready Node: about
// 10 s idle here.
const kubeletReadyWithin = 90 * time.Second

// sandboxImage is the pods' pause image, made from the host's sleep.
const sandboxImage = "kubetest.local/pause:1"

// runtimeBinaries are what the kubelet's containerd runs.
var runtimeBinaries = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr"}

// StartKubelet runs a real kubelet as Node name, with containerd as its
// runtime, both stopped with the test; it returns once the Node is Ready.
// Pods must use hostNetwork: there is no CNI plugin.
//
// The API server reaches a kubelet (kubectl logs, exec) by its Node's
// Hostname address, which is name: the kubelet serves on 127.0.0.1 only
// and refuses a loopback node IP, and its InternalIP is the host's own.
// So name "localhost" is the one that `kubectl logs` works with.
func (c *Cluster) StartKubelet(t testing.TB, name string) {
	t.Helper()
	kubelet, ctrdBin := c.findKubeletTools(t)
	ctrd := c.startContainerd(t, ctrdBin, sandboxImage)
	c.ctrd = ctrd
	pause, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("kubetest: the pause image: %v", err)
	}
	files := BinaryFiles(t, pause, "/pause")
	c.ImportImage(t, sandboxImage, files, Image{Entrypoint: []string{"/pause", "infinity"}, Env: []string{LibraryPath(files)}})
	dir := filepath.Join(c.dir, "kubelet-"+name)
	kubeconfig, config := c.kubeletFiles(t, dir, name, ctrd.socket)
	start := time.Now()
	p := c.start(t, "kubelet", kubelet, "--config="+config, "--kubeconfig="+kubeconfig,
		"--root-dir="+filepath.Join(dir, "root"), "--cert-dir="+filepath.Join(dir, "pki"),
		"--hostname-override="+name, "--v=1")
	// Runs before Cluster.stop: the kubelet ends first, then its
	// containers, then containerd, then whatever they left.
	t.Cleanup(func() {
		p.stop()
		ctrd.clean(t)
		ctrd.proc.stop()
		ctrd.reap(t)
		removeContainerLogLinks(t, filepath.Join(dir, "pod-logs"))
	})
	c.WaitFor(t, "Node "+name+" Ready", kubeletReadyWithin, func() (bool, error) {
		out, err := c.Kubectl(t, "get", "node", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
		return strings.TrimSpace(out) == "True", err
	})
	// The node lifecycle controller, left out, would lift the taint the
	// TaintNodesByCondition admission plugin gave the new Node.
	if _, err := c.Kubectl(t, "taint", "node", name, "node.kubernetes.io/not-ready:NoSchedule-"); err != nil &&
		!strings.Contains(err.Error(), "not found") {
		t.Fatalf("kubetest: %v", err)
	}
	t.Logf("kubetest: kubelet's Node %s Ready after %v", name, time.Since(start).Round(time.Millisecond))
}

// findKubeletTools is the kubelet's and containerd's paths, or skips t
// when the host lacks them or cannot make cgroups.
func (c *Cluster) findKubeletTools(t testing.TB) (kubelet, ctrd string) {
	t.Helper()
	kubelet = filepath.Join(c.Tools, "kubelet")
	if _, err := os.Stat(kubelet); err != nil {
		t.Skipf("kubetest: no kubelet in %s; run ci/kube-tools.sh %s", c.Tools, c.Tools)
	}
	for _, b := range runtimeBinaries {
		if _, err := exec.LookPath(b); err != nil {
			t.Skipf("kubetest: no %s in PATH; ci/deps.sh installs containerd and runc", b)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("kubetest: a kubelet needs root (mounts, cgroups)")
	}
	probe := filepath.Join(cgroupMemory(), "kubetest-probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil {
		t.Skipf("kubetest: the cgroup file system is not writable: %v", err)
	}
	_ = os.Remove(probe)
	ctrd, _ = exec.LookPath("containerd")
	return kubelet, ctrd
}

// cgroupMemory is the memory controller's directory: cgroup v1's, else
// the v2 hierarchy's root.
func cgroupMemory() string {
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err == nil {
		return "/sys/fs/cgroup/memory"
	}
	return "/sys/fs/cgroup"
}

// kubeletFiles writes the kubelet's kubeconfig (a client certificate of
// user system:node:NAME in group system:nodes, which the Node authorizer
// and the NodeRestriction admission plugin expect) and its
// KubeletConfiguration, and returns their paths.
func (c *Cluster) kubeletFiles(t testing.TB, dir, name, socket string) (kubeconfig, config string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	kp, err := c.pki.ca.sign(dir, "node", certSpec{cn: "system:node:" + name, orgs: []string{"system:nodes"}})
	var u userInfo
	if err == nil {
		u, err = certUser(kp)
	}
	kubeconfig = filepath.Join(dir, "kubelet.kubeconfig")
	if err == nil {
		err = writeKubeconfig(kubeconfig, c.Server, c.pki.ca.certPEM, "system:node:"+name, u, "")
	}
	if err != nil {
		t.Fatalf("kubetest: kubelet kubeconfig: %v", err)
	}
	port, _ := strconv.Atoi(testport.Free(t))
	b, err := json.MarshalIndent(kubeletConfig(port, c.pki.ca.certFile, socket, filepath.Join(dir, "pod-logs")), "", "  ")
	config = filepath.Join(dir, "kubelet.json")
	if err == nil {
		err = os.WriteFile(config, b, 0o644)
	}
	if err != nil {
		t.Fatalf("kubetest: kubelet config: %v", err)
	}
	return kubeconfig, config
}

// kubeletConfig is the KubeletConfiguration: cgroupfs (there is no
// systemd here), serving on 127.0.0.1 to clients with a certificate
// from the plane's CA (the API server's, for logs and exec), no image
// garbage collection (the imported images cannot be pulled again), and
// eviction thresholds a busy test host stays clear of.
func kubeletConfig(port int, caFile, socket, podLogs string) map[string]any {
	return map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		// The kubelet refuses cgroup v1, this host's, unless told.
		"failCgroupV1": false,
		"cgroupDriver": "cgroupfs",
		"failSwapOn":   false,
		"address":      "127.0.0.1", "port": port, "readOnlyPort": 0, "healthzPort": 0,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": false},
			"x509":      map[string]any{"clientCAFile": caFile},
		},
		"authorization":               map[string]any{"mode": "AlwaysAllow"},
		"containerRuntimeEndpoint":    "unix://" + socket,
		"podLogsDir":                  podLogs,
		"resolvConf":                  "",
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard": map[string]string{"memory.available": "1Mi", "nodefs.available": "1%",
			"imagefs.available": "1%", "nodefs.inodesFree": "1%"},
	}
}

// removeContainerLogLinks removes the links the kubelet made in
// /var/log/containers (a path it does not let one change) to its logs
// under podLogs.
func removeContainerLogLinks(t testing.TB, podLogs string) {
	const dir = "/var/log/containers"
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, podLogs+"/") {
			if err := os.Remove(p); err != nil {
				t.Logf("kubetest: %v", err)
			}
		}
	}
}
