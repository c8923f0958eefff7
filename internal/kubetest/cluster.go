// Package kubetest starts a real Kubernetes control plane on 127.0.0.1
// for a test: Debian's etcd, and kube-apiserver, kube-controller-manager
// and kube-scheduler as ci/kube-tools.sh builds them, with certificates
// made here. A test adds Node objects (AddNode), the real scheduler
// binds pods to them, and a test that runs a pod's command runs it as a
// process with the environment PodEnv resolves from the Pod the API
// returns; or it starts a real kubelet and containerd (StartKubelet,
// ImportImage) that run hostNetwork pods.
//
// Everything is torn down with the test; the components' logs stay in
// the test's temporary directory until then and their tails are printed
// when the test failed.
package kubetest

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testenv"
)

// ToolsEnv names the directory of kube-apiserver, kube-controller-manager,
// kube-scheduler, kubectl and helm that ci/kube-tools.sh prints.
const ToolsEnv = "RDMABENCH_KUBE_TOOLS"

// ServiceCIDR is the range Services' cluster IPs come from. Nothing is
// ever sent there (there is no kube-proxy); it lies in 198.18.0.0/15,
// the benchmarking range, so that it cannot clash with a real network.
const ServiceCIDR = "198.19.0.0/24"

// readyWithin bounds the apiserver's start: about 20 s on an idle core
// here, several times that while a build shares the host's two.
const readyWithin = 90 * time.Second

// Cluster is a running control plane.
type Cluster struct {
	Kubeconfig string // the admin's (system:masters) kubeconfig
	Server     string // https://127.0.0.1:PORT
	Tools      string // the directory of the Kubernetes binaries

	// ReadyAfter is how long the apiserver took from its start to /readyz.
	ReadyAfter time.Duration

	dir   string
	pki   *pki
	procs []*proc
	ctrd  *containerd // StartKubelet's runtime, for ImportImage
}

// components are the binaries Start needs from the tools directory.
var components = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}

// Start starts a control plane for t and stops it when t ends. It skips
// t when the binaries or etcd are missing.
func Start(t testing.TB) *Cluster {
	t.Helper()
	tools, etcd := findTools(t)
	// The apiserver's start takes both of this host's cores for tens of
	// seconds; the timing-sensitive tests must not run beside it.
	testenv.HoldCPUs(t)
	c := &Cluster{Tools: tools, dir: t.TempDir()}
	// Registered after TempDir, so it runs before the directory goes.
	t.Cleanup(func() { c.stop(t) })
	var err error
	if c.pki, err = newPKI(c.dir, net.ParseIP("198.19.0.1")); err != nil {
		t.Fatalf("kubetest: certificates: %v", err)
	}
	etcdURL := c.startEtcd(t, etcd)
	c.startAPIServer(t, etcdURL)
	c.startControllers(t)
	return c
}

// findTools is the tools directory and etcd's path, or skips t.
func findTools(t testing.TB) (tools, etcd string) {
	t.Helper()
	tools = os.Getenv(ToolsEnv)
	if tools == "" {
		t.Skipf("kubetest: %s is unset; ci/kube-tools.sh builds the Kubernetes binaries and prints their directory", ToolsEnv)
	}
	for _, name := range components {
		if st, err := os.Stat(filepath.Join(tools, name)); err != nil || st.Mode()&0o111 == 0 {
			t.Skipf("kubetest: no %s in %s=%s; run ci/kube-tools.sh %s", name, ToolsEnv, tools, tools)
		}
	}
	etcd, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("kubetest: no etcd in PATH; install Debian's etcd-server (apt-get install etcd-server)")
	}
	return tools, etcd
}

// stop ends the components, last started first, and prints their logs'
// tails when t failed.
func (c *Cluster) stop(t testing.TB) {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	if t.Failed() {
		for _, p := range c.procs {
			t.Logf("kubetest: %s's log (%s), last lines:\n%s", p.name, p.log, p.tail())
		}
	}
}

// start starts one component and keeps it for stop.
func (c *Cluster) start(t testing.TB, name, bin string, args ...string) *proc {
	t.Helper()
	p, err := startProc(c.dir, name, bin, args...)
	if err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	c.procs = append(c.procs, p)
	return p
}

// dead is the first component that has ended, or nil: none of them ends
// by itself while the plane is up.
func (c *Cluster) dead() *proc {
	for _, p := range c.procs {
		if ended, _ := p.exited(); ended {
			return p
		}
	}
	return nil
}
