package kubetest

import (
	"encoding/json"
	"maps"
	"net"
	"testing"
	"time"
)

// nodeDefaults are the capacity a Node gets for what AddNode's caller
// leaves out: enough for any test's pods.
var nodeDefaults = map[string]string{"cpu": "8", "memory": "16Gi", "pods": "110"}

// AddNode creates Node name with labels and posts the status a kubelet
// would: Ready=True, and capacity and allocatable from capacity (cpu,
// memory, pods, extended resources such as rdma/rdma_shared_device_a),
// defaults for cpu, memory and pods. The scheduler then binds pods to it.
// Nothing refreshes the heartbeat; no controller here reads it.
func (c *Cluster) AddNode(t testing.TB, name string, capacity, labels map[string]string) {
	t.Helper()
	labels = maps.Clone(labels) // the caller's map stays as it was
	if labels == nil {
		labels = map[string]string{}
	}
	labels["kubernetes.io/hostname"] = name
	labels["kubernetes.io/os"] = "linux"
	node := map[string]any{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "labels": labels},
	}
	b, err := json.Marshal(node)
	if err != nil {
		t.Fatal(err)
	}
	c.Apply(t, string(b))
	res := maps.Clone(nodeDefaults)
	maps.Copy(res, capacity)
	now := time.Now().UTC().Format(time.RFC3339)
	status := map[string]any{"status": map[string]any{
		"capacity":    res,
		"allocatable": res,
		"conditions": []map[string]string{{
			"type": "Ready", "status": "True", "reason": "KubeletReady",
			"message":           "kubetest: no kubelet; the test posted this status",
			"lastHeartbeatTime": now, "lastTransitionTime": now,
		}},
		"addresses": []map[string]string{{"type": "Hostname", "address": name}},
	}}
	c.patchStatus(t, "node", name, "", status)
	// The TaintNodesByCondition admission plugin gives a new Node the
	// node.kubernetes.io/not-ready:NoSchedule taint; the node lifecycle
	// controller, left out here, would lift it once the node is Ready.
	if _, err := c.Kubectl(t, "patch", "node", name, "--type=merge", "-p", `{"spec":{"taints":null}}`); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
}

// MarkPodRunning posts the status a kubelet would once the pod's
// containers run: phase Running, Ready, podIP and hostIP. The
// EndpointSlice controller then lists the pod under its Services, and
// PodEnv can resolve status.podIP. EndpointSlices refuse loopback
// addresses, so podIP must not be in 127.0.0.0/8 (198.18.0.0/15 is
// accepted and never routed).
func (c *Cluster) MarkPodRunning(t testing.TB, namespace, pod, podIP, hostIP string) {
	t.Helper()
	if ip := net.ParseIP(podIP); ip != nil && ip.IsLoopback() {
		t.Logf("kubetest: pod %s/%s gets loopback IP %s: no Service's EndpointSlice will list it "+
			"(\"may not be in the loopback range\"); 198.18.0.0/15 is accepted", namespace, pod, podIP)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(typ string) map[string]string {
		return map[string]string{"type": typ, "status": "True", "lastTransitionTime": now}
	}
	status := map[string]any{"status": map[string]any{
		"phase":      "Running",
		"podIP":      podIP,
		"podIPs":     []map[string]string{{"ip": podIP}},
		"hostIP":     hostIP,
		"hostIPs":    []map[string]string{{"ip": hostIP}},
		"startTime":  now,
		"conditions": []map[string]string{cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")},
	}}
	c.patchStatus(t, "pod", pod, namespace, status)
}

// patchStatus merges status into the object's status subresource.
func (c *Cluster) patchStatus(t testing.TB, kind, name, namespace string, status map[string]any) {
	t.Helper()
	b, err := json.Marshal(status)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"patch", kind, name, "--subresource=status", "--type=merge", "-p", string(b)}
	if namespace != "" {
		args = append(args, "--namespace="+namespace)
	}
	if _, err := c.Kubectl(t, args...); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
}
