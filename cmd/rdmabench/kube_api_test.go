package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/kubetest"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
)

// The chart installed into a real API server (internal/kubetest: etcd,
// kube-apiserver, the controller manager and the scheduler) on two Nodes
// named as the two-node rxe target's hosts, each with its address there.
const (
	kubeNS      = "rdmabench"
	kubeRelease = "rb"
)

var kubeNodes = map[string]string{"rxe-node1": node1Addr, "rxe-node2": node2Addr}

// chartPath is deploy/helm/rdmabench from this package's folder.
const chartPath = "../../deploy/helm/rdmabench"

// TestKubeOnRealAPIServer installs the chart, then checks what each
// object lets its pods do (kubectl auth can-i), runs health as its
// service account to set and clear the node condition and the taint, and
// runs the Indexed Job's pods with exactly the environment the Job
// controller put on them.
func TestKubeOnRealAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("a real control plane: about a minute")
	}
	c := kubetest.Start(t)
	for name := range kubeNodes {
		c.AddNode(t, name, nil, nil)
	}
	mustKube(t)(c.Helm(t, append([]string{"install", kubeRelease, chartPath, "--namespace", kubeNS, "--create-namespace"}, kubeChartValues(false)...)...))
	out := mustKube(t)(c.Kubectl(t, "get", "serviceaccounts,roles,rolebindings,services,secrets,daemonsets,jobs", "-n", kubeNS, "-o", "name"))
	out += mustKube(t)(c.Kubectl(t, "get", "clusterroles,clusterrolebindings", "-o", "name", "-l", "app.kubernetes.io/instance="+kubeRelease))
	t.Logf("objects the chart made:\n%s", out)
	for _, want := range []string{"daemonset.apps/rb-rdmabench-agent", "daemonset.apps/rb-rdmabench-health", "job.batch/rb-rdmabench-mesh",
		"service/rb-rdmabench-agent", "service/rb-rdmabench-mesh", "role.rbac.authorization.k8s.io/rb-rdmabench-agent"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("the chart made no %s", want)
		}
	}
	t.Run("rbac", func(t *testing.T) { checkKubeRBAC(t, c, false) })
	t.Run("condition", func(t *testing.T) { checkNodeCondition(t, c) })
	t.Run("taint", func(t *testing.T) { checkNodeTaint(t, c) })
	t.Run("every", func(t *testing.T) { checkHealthEvery(t, c) })
	t.Run("mesh", func(t *testing.T) { runKubeMesh(t, c) })
}

// kubeChartValues: no device plugin on these Nodes, and the mesh the
// zero-cost NIC's fabric measures quickly.
func kubeChartValues(taint bool) []string {
	extra, _ := json.Marshal(fabricMeshArgs)
	return []string{"--set", "rdma.resourceName=", "--set", "mesh.enabled=true", "--set", "mesh.size=2",
		"--set", fmt.Sprintf("health.taint=%v", taint), "--set-json", "mesh.extraArgs=" + string(extra)}
}

func mustKube(t *testing.T) func(string, error) string {
	return func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return out
	}
}

// checkKubeRBAC asks the API server what health's and the agent's service
// accounts may do: exactly what they need.
func checkKubeRBAC(t *testing.T, c *kubetest.Cluster, taint bool) {
	health := "system:serviceaccount:" + kubeNS + ":rb-rdmabench-health"
	agent := "system:serviceaccount:" + kubeNS + ":rb-rdmabench-agent"
	cases := []struct {
		as   string
		args []string
		want bool
	}{
		{health, []string{"get", "nodes"}, true},
		{health, []string{"patch", "nodes", "--subresource=status"}, true},
		{health, []string{"patch", "nodes"}, taint},
		{health, []string{"update", "nodes", "--subresource=status"}, false},
		{health, []string{"delete", "nodes"}, false},
		{health, []string{"list", "nodes"}, false},
		{health, []string{"get", "secrets", "-n", kubeNS}, false},
		{health, []string{"list", "pods", "-A"}, false},
		{agent, []string{"list", "endpointslices.discovery.k8s.io", "-n", kubeNS}, true},
		{agent, []string{"watch", "endpointslices.discovery.k8s.io", "-n", kubeNS}, true},
		{agent, []string{"list", "endpointslices.discovery.k8s.io", "-n", "default"}, false},
		{agent, []string{"get", "nodes"}, false},
		{agent, []string{"get", "secrets", "-n", kubeNS}, false},
	}
	for _, tc := range cases {
		out, _ := c.Kubectl(t, append([]string{"auth", "can-i", "--as", tc.as}, tc.args...)...)
		if got := strings.TrimSpace(out) == "yes"; got != tc.want {
			t.Errorf("%s may %v: %q, want %v", tc.as, tc.args, strings.TrimSpace(out), tc.want)
		}
	}
}

// nodeCondition is the node's RDMAUnhealthy condition as the API has it.
type nodeCondition struct {
	Type, Status, Reason, Message         string
	LastHeartbeatTime, LastTransitionTime time.Time
}

type nodeObject struct {
	Spec struct {
		Taints []struct{ Key, Value, Effect string }
	}
	Status struct{ Conditions []nodeCondition }
}

func getNode(t *testing.T, c *kubetest.Cluster, name string) nodeObject {
	t.Helper()
	var n nodeObject
	if err := json.Unmarshal([]byte(mustKube(t)(c.Kubectl(t, "get", "node", name, "-o", "json"))), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n nodeObject) condition(typ string) *nodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// healthAs runs health on the rxe capture as the chart's health service
// account; bad names a wrong GID in the job's environment (fault RB121).
func healthAs(t *testing.T, kubeconfig string, bad bool, extra ...string) (int, string) {
	t.Helper()
	args := []string{"--no-bw", "--node-condition", "--node-name", "rxe-node1", "--kubeconfig", kubeconfig}
	if bad {
		args = append(args, "--env-file", writeFile(t, "job.sh", "export NCCL_IB_GID_INDEX=0\n"))
	}
	code, _, errOut := runHealthTest(t, nil, rxeArgs(append(args, extra...)...)...)
	return code, errOut
}

func checkNodeCondition(t *testing.T, c *kubetest.Cluster) {
	kc := c.ServiceAccountKubeconfig(t, kubeNS, "rb-rdmabench-health")
	code, errOut := healthAs(t, kc, true)
	n := getNode(t, c, "rxe-node1")
	set := n.condition("RDMAUnhealthy")
	if code != 1 || set == nil || set.Status != "True" || set.Reason != "RB121" || !strings.HasPrefix(set.Message, "rdmabench: RB121 ") {
		t.Fatalf("unhealthy: exit %d, condition %+v\n%s", code, set, errOut)
	}
	if n.condition("Ready") == nil {
		t.Errorf("the Node's Ready condition was lost: %+v", n.Status.Conditions)
	}
	t.Logf("set: %s=%s reason %s message %q", set.Type, set.Status, set.Reason, set.Message)
	time.Sleep(1100 * time.Millisecond) // the API's times are whole seconds
	code, errOut = healthAs(t, kc, false)
	cleared := getNode(t, c, "rxe-node1").condition("RDMAUnhealthy")
	if code != 0 || cleared == nil || cleared.Status != "False" || cleared.Reason != "RDMAHealthy" || !cleared.LastTransitionTime.After(set.LastTransitionTime) {
		t.Fatalf("healthy: exit %d, condition %+v (set at %v)\n%s", code, cleared, set.LastTransitionTime, errOut)
	}
	t.Logf("cleared: %s=%s reason %s at %v", cleared.Type, cleared.Status, cleared.Reason, cleared.LastTransitionTime)
	if other := getNode(t, c, "rxe-node2").condition("RDMAUnhealthy"); other != nil {
		t.Errorf("health of rxe-node1 wrote rxe-node2's condition: %+v", other)
	}
}

func checkNodeTaint(t *testing.T, c *kubetest.Cluster) {
	kc := c.ServiceAccountKubeconfig(t, kubeNS, "rb-rdmabench-health")
	code, errOut := healthAs(t, kc, true, "--taint")
	if code != 3 || !strings.Contains(errOut, "forbidden") || strings.Count(errOut, "\n") > 2 {
		t.Errorf("--taint without the chart's health.taint: exit %d, want 3 and the API's refusal\n%s", code, errOut)
	}
	mustKube(t)(c.Helm(t, append([]string{"upgrade", kubeRelease, chartPath, "--namespace", kubeNS}, kubeChartValues(true)...)...))
	checkKubeRBAC(t, c, true)
	taint := func() string {
		for _, tt := range getNode(t, c, "rxe-node1").Spec.Taints {
			if tt.Key == "rdmabench.io/rdma-unhealthy" && tt.Effect == "NoSchedule" {
				return tt.Value
			}
		}
		return ""
	}
	if code, errOut := healthAs(t, kc, true, "--taint"); code != 1 || taint() != "RB121" {
		t.Errorf("unhealthy with --taint: exit %d, taint %q, want RB121\n%s", code, taint(), errOut)
	}
	if code, errOut := healthAs(t, kc, false, "--taint"); code != 0 || taint() != "" {
		t.Errorf("healthy with --taint: exit %d, taint %q, want none\n%s", code, taint(), errOut)
	}
}

// kubePod is one of the Job's pods as the kubelet would start it: its
// node, command and environment, read back from the API.
type kubePod struct {
	Name, Node string
	Argv       []string
	Env        map[string]string
}

// runKubeMesh waits for the Job controller's pods and the scheduler's
// binding, posts each pod Running at its node's address, runs each pod's
// command as a process with the environment the API gives it (on the
// zero-cost NIC's fabric, a NIC a node), and posts the outcome: the Job
// completes. $RDMABENCH_KUBE_PODS gets the pods for the two-node rxe
// target's TestTwoNodeKubePods.
func runKubeMesh(t *testing.T, c *kubetest.Cluster) {
	pods := kubeMeshPods(t, c)
	if f := os.Getenv("RDMABENCH_KUBE_PODS"); f != "" {
		b, _ := json.MarshalIndent(pods, "", "  ")
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lib, dir := fakeLib(t), t.TempDir()
	fabric := filepath.Join(dir, "fabric")
	if err := os.WriteFile(fabric, []byte(fabricDefault), 0o644); err != nil {
		t.Fatal(err)
	}
	mr := &meshRun{save: filepath.Join(dir, "mesh.json"), start: time.Now()}
	for _, p := range pods {
		// What the cluster's DNS and the node's NIC would give the pod.
		extra := []string{"RDMABENCH_RESOLVE=" + kubeRankZeroName(pods) + "=127.0.0.1",
			"LD_LIBRARY_PATH=" + lib, "FAKEVERBS_FABRIC=" + fabric, "FAKEVERBS_HOST=" + p.Node, "FAKEVERBS_NAME=mlx5_0"}
		startPod(t, mr, p, extra)
	}
	codes := mr.wait(t, 3*time.Minute)
	m := mr.doc(t)
	checkFullMesh(t, m, len(pods), "Kubernetes Indexed Job", codes[0])
	for i, p := range pods {
		if codes[i] != 0 {
			t.Errorf("pod %s: exit %d: %s", p.Name, codes[i], tail(mr.err[i].String(), 5))
		}
		c.MarkPodDone(t, kubeNS, p.Name, "mesh", codes[i])
	}
	c.WaitFor(t, "the Job complete", time.Minute, func() (bool, error) {
		out, err := c.Kubectl(t, "get", "job", "rb-rdmabench-mesh", "-n", kubeNS, "-o", `jsonpath={.status.conditions[?(@.type=="Complete")].status}`)
		return strings.TrimSpace(out) == "True", err
	})
	t.Logf("Indexed Job's %d pods on %s and %s: the mesh in %v, exit %v; the Job Complete", len(pods), pods[0].Node, pods[1].Node, time.Since(mr.start).Round(time.Second), codes)
}

func kubeRankZeroName(pods []kubePod) string {
	return pods[0].Env["HOSTNAME"] + "." + pods[0].Env["RDMABENCH_SUBDOMAIN"]
}

// startPod starts p's command as this test binary with p's environment and
// nothing of the test's own but PATH and extra; --save is the test's.
func startPod(t *testing.T, mr *meshRun, p kubePod, extra []string) {
	t.Helper()
	if len(p.Argv) == 0 || p.Argv[0] != "mesh" {
		t.Fatalf("pod %s runs %q, want the image's rdmabench with mesh", p.Name, p.Argv)
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "RDMABENCH_RUN_MAIN=1"}
	for k, v := range p.Env {
		env = append(env, k+"="+v)
	}
	startCmdEnv(t, mr, os.Args[0], append(slices.Clone(p.Argv), "--save", mr.save), append(env, extra...))
}

// kubeMeshPods waits until the Job controller made the pods and the
// scheduler bound them, one a node, posts each Running at its node's
// address, and reads back each pod's command and environment, rank 0
// first.
func kubeMeshPods(t *testing.T, c *kubetest.Cluster) []kubePod {
	var list struct {
		Items []json.RawMessage
	}
	c.WaitFor(t, "the Job's 2 pods bound to nodes", time.Minute, func() (bool, error) {
		out, err := c.Kubectl(t, "get", "pods", "-n", kubeNS, "-l", "job-name=rb-rdmabench-mesh", "-o", "json")
		if err != nil {
			return false, err
		}
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			return false, err
		}
		bound := 0
		for _, raw := range list.Items {
			if node := podNode(raw); node != "" {
				bound++
			}
		}
		return bound == 2 && len(list.Items) == 2, nil
	})
	pods := make([]kubePod, 0, len(list.Items))
	for _, raw := range list.Items {
		var meta struct {
			Metadata struct{ Name string }
		}
		json.Unmarshal(raw, &meta)
		node := podNode(raw)
		addr, ok := kubeNodes[node]
		if !ok {
			t.Fatalf("pod %s bound to %q, not one of the Nodes", meta.Metadata.Name, node)
		}
		c.MarkPodRunning(t, kubeNS, meta.Metadata.Name, addr, addr) // hostNetwork: the node's address
		pod := []byte(mustKube(t)(c.Kubectl(t, "get", "pod", meta.Metadata.Name, "-n", kubeNS, "-o", "json")))
		env, err := kubetest.ContainerEnv(pod, "mesh", c.Objects(t))
		if err != nil {
			t.Fatal(err)
		}
		argv, err := kubetest.PodCommand(pod, "mesh", c.Objects(t))
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, kubePod{Name: meta.Metadata.Name, Node: node, Argv: argv, Env: env})
	}
	slices.SortFunc(pods, func(a, b kubePod) int {
		return strings.Compare(a.Env["JOB_COMPLETION_INDEX"], b.Env["JOB_COMPLETION_INDEX"])
	})
	if pods[0].Node == pods[1].Node {
		t.Errorf("both ranks on %s: the chart asks for one a node", pods[0].Node)
	}
	for i, p := range pods {
		want := fmt.Sprintf("rb-rdmabench-mesh-%d", i)
		if p.Env["JOB_COMPLETION_INDEX"] != fmt.Sprint(i) || p.Env["HOSTNAME"] != want || p.Env["RDMABENCH_WORLD_SIZE"] != "2" || p.Env["RDMABENCH_TOKEN"] == "" {
			t.Errorf("pod %s's environment: %v", p.Name, p.Env)
		}
		t.Logf("pod %s on %s: %q with %d variables", p.Name, p.Node, p.Argv, len(p.Env))
	}
	return pods
}

func podNode(raw json.RawMessage) string {
	var p struct {
		Spec struct{ NodeName string }
	}
	json.Unmarshal(raw, &p)
	return p.Spec.NodeName
}

// TestTwoNodeKubePods runs the Indexed Job's pods as TestKubeOnRealAPIServer
// read them back from the real API server ($RDMABENCH_KUBE_PODS) on the
// two-node rxe target, in the kubelet's place: each pod on the host its
// Node names (rxe-node1 here, rxe-node2 through rxe-node 2) with exactly
// its environment, and rank 0's name resolved to its node's address as
// the cluster's DNS would.
func TestTwoNodeKubePods(t *testing.T) {
	needTwoNodes(t)
	f := os.Getenv("RDMABENCH_KUBE_PODS")
	if f == "" {
		if os.Getenv("RDMABENCH_REQUIRE_TWO_NODES") == "1" {
			t.Fatal("RDMABENCH_KUBE_PODS is unset: make rxe-test-two-node sets it to what TestKubeOnRealAPIServer wrote")
		}
		t.Skip("needs RDMABENCH_KUBE_PODS, written by TestKubeOnRealAPIServer (make rxe-test-two-node)")
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatalf("%v (TestKubeOnRealAPIServer writes it on the host)", err)
	}
	var pods []kubePod
	if err := json.Unmarshal(b, &pods); err != nil || len(pods) != 2 {
		t.Fatalf("%s: %d pods, %v", f, len(pods), err)
	}
	ensureLink(t)
	save := fmt.Sprintf("/tmp/kube-mesh-%d.json", os.Getpid())
	mr := &meshRun{save: save, start: time.Now()}
	resolve := "RDMABENCH_RESOLVE=" + kubeRankZeroName(pods) + "=" + kubeNodes[pods[0].Node]
	var remote []string
	for _, p := range pods {
		switch p.Node {
		case "rxe-node1":
			startPod(t, mr, p, []string{resolve})
		case "rxe-node2":
			remote = append(remote, startPodOnNode2(t, p, save, resolve))
		default:
			t.Fatalf("pod %s on %q: not a host of the two-node target", p.Name, p.Node)
		}
	}
	codes := mr.wait(t, 5*time.Minute)
	if pods[0].Node == "rxe-node2" { // rank 0 saved the mesh there
		waitGoneOnNode2(t, remote[0])
		out, code := onNode2(t, "cat", save)
		if code != 0 || os.WriteFile(save, []byte(out), 0o644) != nil {
			t.Fatalf("rank 0's --save on rxe-node2: exit %d", code)
		}
	}
	m := mr.doc(t)
	checkFullMesh(t, m, 2, "Kubernetes Indexed Job", codes[0])
	t.Logf("2 pods on 2 rxe hosts: %v; %.3f Gb/s, %.1f us; ranks on %s and %s", time.Since(mr.start).Round(time.Second), m.MedianBW, m.MedianLat, m.Ranks[0].Host, m.Ranks[1].Host)
	for _, pid := range remote {
		waitGoneOnNode2(t, pid)
	}
}

// startPodOnNode2 starts p on rxe-node2 with exactly its environment.
func startPodOnNode2(t *testing.T, p kubePod, save, resolve string) string {
	t.Helper()
	cmd := []string{"--bg", "env", "-i", "PATH=" + os.Getenv("PATH"), "RDMABENCH_RUN_MAIN=1", resolve}
	for k, v := range p.Env {
		cmd = append(cmd, k+"="+v)
	}
	cmd = append(append(append(cmd, os.Args[0]), p.Argv...), "--save", save)
	out, code := onNode2(t, cmd...)
	pid := strings.TrimSpace(out)
	if code != 0 || pid == "" {
		t.Fatalf("starting pod %s on rxe-node2: exit %d: %s", p.Name, code, out)
	}
	t.Cleanup(func() { onNode2(t, "kill", "-9", pid) })
	return pid
}

func waitGoneOnNode2(t *testing.T, pid string) {
	t.Helper()
	for end := time.Now().Add(60 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if _, code := onNode2(t, "kill", "-0", pid); code != 0 {
			return
		}
	}
	t.Errorf("pod process %s on rxe-node2 still running a minute after its mesh", pid)
}

// checkHealthEvery runs health as the DaemonSet's pod does (--every, a
// process of its own): the heartbeat moves each check, and SIGTERM ends
// it at once with the last verdict's exit status.
func checkHealthEvery(t *testing.T, c *kubetest.Cluster) {
	kc := c.ServiceAccountKubeconfig(t, kubeNS, "rb-rdmabench-health")
	args := append([]string{"health"}, rxeArgs("--no-bw", "--node-condition", "--node-name", "rxe-node2", "--kubeconfig", kc, "--every", "1s")...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "RDMABENCH_RUN_MAIN=1")
	var errOut syncbuf.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	beats := map[time.Time]bool{}
	c.WaitFor(t, "three heartbeats of rxe-node2's condition", time.Minute, func() (bool, error) {
		if cond := getNode(t, c, "rxe-node2").condition("RDMAUnhealthy"); cond != nil && cond.Status == "False" {
			beats[cond.LastHeartbeatTime] = true
		}
		return len(beats) >= 3, nil
	})
	sent := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if took := time.Since(sent); err != nil || took > 3*time.Second {
		t.Errorf("after SIGTERM: %v in %v, want exit 0 within 3 s\n%s", err, took, errOut.String())
	}
	if n := strings.Count(errOut.String(), "condition RDMAUnhealthy=False reason RDMAHealthy"); n < 3 {
		t.Errorf("%d condition lines, want one a check:\n%s", n, errOut.String())
	}
}
