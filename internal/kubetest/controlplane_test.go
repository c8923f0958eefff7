package kubetest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

var capture = flag.String("capture", "", "write rank 0's Pod, as the API returned it, to this file")

// The objects TestControlPlane applies: an Indexed Job of 3 ranks, each
// asking for one RDMA device of the shared device plugin's resource, with
// its headless Service, and a DaemonSet on the RDMA nodes.
const meshManifests = `
apiVersion: v1
kind: Service
metadata: {name: mesh, namespace: kubetest}
spec:
  clusterIP: None
  selector: {job-name: mesh}
  ports: [{name: rdzv, port: 7000}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: mesh, namespace: kubetest}
spec:
  completions: 3
  parallelism: 3
  completionMode: Indexed
  template:
    spec:
      subdomain: mesh
      restartPolicy: Never
      containers:
      - name: rank
        image: rdmabench:kubetest
        command: [rdmabench, mesh]
        args: [--listen, "$(POD_IP):7000", --name, "$(HOSTNAME)"]
        env:
        - {name: RDMABENCH_WORLD_SIZE, value: "3"}
        - {name: RDMABENCH_SUBDOMAIN, value: mesh}
        - name: NODE_NAME
          valueFrom: {fieldRef: {fieldPath: spec.nodeName}}
        - name: POD_IP
          valueFrom: {fieldRef: {fieldPath: status.podIP}}
        resources:
          limits: {rdma/rdma_shared_device_a: "1"}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kubetest}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      hostNetwork: true
      nodeSelector: {rdmabench.io/rdma: "true"}
      containers:
      - {name: agent, image: rdmabench:kubetest, command: [rdmabench, agent]}
`

// TestControlPlane starts the plane, adds two nodes with 1 and 2 RDMA
// devices, and runs an Indexed Job of 3 ranks and a DaemonSet through
// the real controllers and scheduler.
func TestControlPlane(t *testing.T) {
	start := time.Now()
	c := Start(t)
	c.AddNode(t, "node-a", map[string]string{"rdma/rdma_shared_device_a": "1"}, map[string]string{"rdmabench.io/rdma": "true"})
	c.AddNode(t, "node-b", map[string]string{"rdma/rdma_shared_device_a": "2"}, map[string]string{"rdmabench.io/rdma": "true"})
	c.Apply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubetest}\n")
	// A pod needs its namespace's default ServiceAccount; the Job
	// controller would back off for seconds if it came late.
	sa := c.WaitFor(t, "ServiceAccount kubetest/default", time.Minute, func() (bool, error) {
		_, err := c.Kubectl(t, "get", "serviceaccount", "default", "--namespace=kubetest")
		return err == nil, err
	})
	t.Logf("the namespace's default ServiceAccount there %v after it was applied", sa.Round(time.Millisecond))
	c.Apply(t, meshManifests)
	applied := time.Now()
	var pods []pod
	took := c.WaitFor(t, "the Job's 3 pods bound", 2*time.Minute, func() (bool, error) {
		var err error
		pods, err = c.pods(t, "job-name=mesh")
		if err == nil && (len(pods) != 3 || !allBound(pods)) {
			err = fmt.Errorf("%d pods, %d bound", len(pods), bound(pods))
		}
		return err == nil, err
	})
	t.Logf("3 pods created and bound %v after the Job was applied (%v after Start began)",
		took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	checkRanks(t, pods)
	checkRDMASpread(t, pods)
	t.Run("PodEnv", func(t *testing.T) { checkPodEnv(t, c, pods) })
	t.Run("DaemonSet", func(t *testing.T) { checkDaemonSet(t, c) })
	t.Run("ServiceAccount", func(t *testing.T) { checkServiceAccount(t, c) })
	t.Logf("all checks %v after the Job was applied", time.Since(applied).Round(time.Millisecond))
}

// pod is a Pod as kubectl returned it, whole, and the fields the test reads.
type pod struct {
	raw      json.RawMessage
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		NodeName   string `json:"nodeName"`
		Hostname   string `json:"hostname"`
		Subdomain  string `json:"subdomain"`
		Containers []struct {
			Env []json.RawMessage `json:"env"`
		} `json:"containers"`
	} `json:"spec"`
}

// pods lists the pods of namespace kubetest with the label selector.
func (c *Cluster) pods(t testing.TB, selector string) ([]pod, error) {
	out, err := c.Kubectl(t, "get", "pods", "--namespace=kubetest", "--selector="+selector, "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	pods := make([]pod, len(list.Items))
	for i, raw := range list.Items {
		pods[i].raw = raw
		if err := json.Unmarshal(raw, &pods[i]); err != nil {
			return nil, err
		}
	}
	return pods, nil
}

func allBound(pods []pod) bool { return bound(pods) == len(pods) }

func bound(pods []pod) int {
	n := 0
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n
}

// index is a Job pod's completion index, from the Job controller's
// annotation.
func (p pod) index(t *testing.T) string {
	idx, ok := p.Metadata.Annotations["batch.kubernetes.io/job-completion-index"]
	if !ok {
		t.Fatalf("pod %s: no job-completion-index annotation: %v", p.Metadata.Name, p.Metadata.Annotations)
	}
	return idx
}

// rank is the index as a number.
func (p pod) rank(t *testing.T) int {
	n, err := strconv.Atoi(p.index(t))
	if err != nil {
		t.Fatalf("pod %s: index: %v", p.Metadata.Name, err)
	}
	return n
}

// checkRanks checks what the Job controller put on each pod: one pod per
// index, in both the index annotation and the index label, hostname
// mesh-<index> in subdomain mesh, and JOB_COMPLETION_INDEX. v1.37.2's
// Job controller reads that from the label (indexed_job_utils.go,
// addCompletionIndexEnvVariable), where older ones read the annotation.
func checkRanks(t *testing.T, pods []pod) {
	const wantRef = `{"name":"JOB_COMPLETION_INDEX","valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels['batch.kubernetes.io/job-completion-index']"}}}`
	var idxs []string
	for _, p := range pods {
		idx := p.index(t)
		idxs = append(idxs, idx)
		if l := p.Metadata.Labels["batch.kubernetes.io/job-completion-index"]; l != idx {
			t.Errorf("pod %s: index label %q, annotation %q", p.Metadata.Name, l, idx)
		}
		if p.Spec.Hostname != "mesh-"+idx || p.Spec.Subdomain != "mesh" {
			t.Errorf("pod %s: hostname %q subdomain %q, want mesh-%s and mesh", p.Metadata.Name, p.Spec.Hostname, p.Spec.Subdomain, idx)
		}
		var env []string
		for _, e := range p.Spec.Containers[0].Env {
			var b bytes.Buffer
			if err := json.Compact(&b, e); err != nil {
				t.Fatal(err)
			}
			env = append(env, b.String())
		}
		if !slices.Contains(env, wantRef) {
			t.Errorf("pod %s: no %s in its env:\n%s", p.Metadata.Name, wantRef, strings.Join(env, "\n"))
		}
	}
	slices.Sort(idxs)
	if !slices.Equal(idxs, []string{"0", "1", "2"}) {
		t.Errorf("indexes %v, want 0, 1, 2", idxs)
	}
}

// checkRDMASpread checks that the scheduler counted the extended
// resource: node-a has one device and node-b two, for three ranks that
// take one each.
func checkRDMASpread(t *testing.T, pods []pod) {
	per := map[string]int{}
	for _, p := range pods {
		per[p.Spec.NodeName]++
	}
	if per["node-a"] != 1 || per["node-b"] != 2 {
		t.Errorf("pods per node %v, want node-a 1 and node-b 2 (their rdma/rdma_shared_device_a)", per)
	}
}

// writeCapture writes a pod for testdata when -capture is given.
func writeCapture(t *testing.T, raw json.RawMessage) {
	if *capture == "" {
		return
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err == nil {
		err = os.WriteFile(*capture, append(b, '\n'), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", *capture)
}

func ip(i int) string { return fmt.Sprintf("198.18.0.%d", 10+i) }
