package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/kubetest"
)

// kubeletNode is the Node the real kubelet registers. The API server
// reaches a kubelet by its Hostname address, the Node's name, and this
// one serves on 127.0.0.1 only: "localhost" is the name `kubectl logs`
// can dial (internal/kubetest's README says why no other).
const kubeletNode = "localhost"

// kubeletImage is the image the test makes of the rdmabench binary and
// imports into the kubelet's containerd: there is no registry.
const (
	kubeletRepo = "rdmabench.test/rdmabench"
	kubeletTag  = "kubelet"
)

// TestKubeletRunsHealthPod installs the chart's health DaemonSet into a
// cluster with a real kubelet: the kubelet runs the pod from the image
// made here (pullPolicy Never), with its projected service account
// token; health finds no RDMA device and writes the node condition
// through the chart's RBAC. Uninstalling stops the pod.
func TestKubeletRunsHealthPod(t *testing.T) {
	if testing.Short() {
		t.Skip("a control plane, containerd and a kubelet: about a minute")
	}
	c := kubetest.Start(t)
	begin := time.Now()
	c.StartKubelet(t, kubeletNode)
	bin := buildRdmabench(t)
	files := kubetest.BinaryFiles(t, bin, "/usr/bin/rdmabench")
	c.ImportImage(t, kubeletRepo+":"+kubeletTag, files, kubetest.Image{
		Entrypoint: []string{"/usr/bin/rdmabench"}, Env: []string{kubetest.LibraryPath(files)}})
	ready := time.Since(begin)

	installed := time.Now()
	mustKube(t)(c.Helm(t, append([]string{"install", "rbk", chartPath, "--namespace", kubeNS, "--create-namespace"},
		kubeletChartValues(t, c.Server)...)...))
	cond := waitNodeCondition(t, c)
	condAfter := time.Since(installed)
	pod := waitHealthPodRunning(t, c)
	logs := mustKube(t)(c.Kubectl(t, "logs", "-n", kubeNS, pod))
	want := wantHealthReason(t)
	if !want.MatchString(cond.Reason) || !strings.HasPrefix(cond.Message, "rdmabench: "+cond.Reason+" ") {
		t.Errorf("condition %+v: reason want %v, message starting with the reason", cond, want)
	}
	line := fmt.Sprintf("rdmabench health: node %s: condition RDMAUnhealthy=True reason %s\n", kubeletNode, cond.Reason)
	if !strings.Contains(logs, line) {
		t.Errorf("the pod's log (kubectl logs) has no %q:\n%s", line, logs)
	}
	t.Logf("kubelet and image ready %v; helm install to condition %v; condition %s=%s reason %s; log:\n%s",
		ready.Round(time.Millisecond), condAfter.Round(time.Millisecond), cond.Type, cond.Status, cond.Reason, logs)

	uninstalled := time.Now()
	mustKube(t)(c.Helm(t, "uninstall", "rbk", "--namespace", kubeNS, "--wait"))
	c.WaitFor(t, "the kubelet stops pod "+pod, 90*time.Second, func() (bool, error) {
		out, err := c.Kubectl(t, "get", "pods", "-n", kubeNS, "-o", "name")
		return err == nil && strings.TrimSpace(out) == "", err
	})
	t.Logf("helm uninstall to pod gone: %v", time.Since(uninstalled).Round(time.Millisecond))
}

// buildRdmabench builds this command for the image: the real binary, not
// the test's.
func buildRdmabench(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rdmabench")
	start := time.Now()
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("go build: %v", time.Since(start).Round(time.Millisecond))
	return bin
}

// kubeletChartValues: health alone, from the imported image, told where
// the API server is: the kubernetes Service's IP the kubelet gives the
// pod is not reachable (no kube-proxy).
func kubeletChartValues(t *testing.T, server string) []string {
	u, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	env, _ := json.Marshal([]map[string]string{
		{"name": "KUBERNETES_SERVICE_HOST", "value": u.Hostname()},
		{"name": "KUBERNETES_SERVICE_PORT", "value": u.Port()}})
	return []string{"--set", "agent.enabled=false", "--set", "mesh.enabled=false", "--set", "health.enabled=true",
		"--set", "rdma.resourceName=", "--set", "image.repository=" + kubeletRepo, "--set", "image.tag=" + kubeletTag,
		"--set", "image.pullPolicy=Never", "--set-json", "health.extraEnv=" + string(env)}
}

// wantHealthReason is the fault health finds in the pod: no RDMA device
// where the host has none, some RB code where it has.
func wantHealthReason(t *testing.T) *regexp.Regexp {
	if ents, _ := os.ReadDir("/sys/class/infiniband"); len(ents) > 0 {
		t.Logf("this host has RDMA devices (%d): any RB code will do", len(ents))
		return regexp.MustCompile(`^RB[0-9]{3}$`)
	}
	return regexp.MustCompile(`^RB101$`)
}

func waitNodeCondition(t *testing.T, c *kubetest.Cluster) nodeCondition {
	t.Helper()
	var cond nodeCondition
	c.WaitFor(t, "condition RDMAUnhealthy on Node "+kubeletNode, 90*time.Second, func() (bool, error) {
		n := getNode(t, c, kubeletNode)
		if got := n.condition("RDMAUnhealthy"); got != nil {
			cond = *got
			return got.Status == "True", nil
		}
		return false, nil
	})
	return cond
}

// waitHealthPodRunning is the health pod's name once the kubelet says it
// runs, on the kubelet's Node.
func waitHealthPodRunning(t *testing.T, c *kubetest.Cluster) string {
	t.Helper()
	var name string
	c.WaitFor(t, "the health pod Running", 90*time.Second, func() (bool, error) {
		out, err := c.Kubectl(t, "get", "pods", "-n", kubeNS, "-l", "app.kubernetes.io/component=health",
			"-o", `jsonpath={range .items[*]}{.metadata.name} {.spec.nodeName} {.status.phase}{"\n"}{end}`)
		f := strings.Fields(out)
		if err != nil || len(f) != 3 {
			return false, fmt.Errorf("pods: %q %v", out, err)
		}
		name = f[0]
		return f[1] == kubeletNode && f[2] == "Running", nil
	})
	return name
}
