package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/internal/kubetest"
	"github.com/rdmabench/rdmabench/kube"
)

// TestPeersFromRealEndpointSlices: the chart's agent DaemonSet on a real
// API server, its pods posted Running at their nodes' addresses (the
// kubelet's part), and the EndpointSlice controller's slices read as the
// agent's service account: a node that joins is told by the watch and
// listed; a pod going away (terminating) is dropped.
func TestPeersFromRealEndpointSlices(t *testing.T) {
	if testing.Short() {
		t.Skip("a real control plane")
	}
	c := kubetest.Start(t)
	nodes := map[string]string{"node1": "198.18.0.1", "node2": "198.18.0.2"}
	for n := range nodes {
		c.AddNode(t, n, nil, nil)
	}
	if out, err := c.Helm(t, "install", "rb", "../deploy/helm/rdmabench", "--namespace", "rdmabench", "--create-namespace",
		"--set", "rdma.resourceName=", "--set", "health.enabled=false"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	client, err := kube.Connect(c.ServiceAccountKubeconfig(t, "rdmabench", "rb-rdmabench-agent"))
	if err != nil {
		t.Fatal(err)
	}
	svc := kube.Service{Namespace: "rdmabench", Name: "rb-rdmabench-agent", PortName: "metrics"}
	ctx, cancel := context.WithCancel(context.Background())
	changed, done := make(chan struct{}, 1), make(chan struct{})
	go func() { defer close(done); client.Watch(ctx, svc, changed, t.Logf) }()
	defer func() { cancel(); <-done }()

	runAgents(t, c, nodes)
	waitPeers(t, client, svc, nodes, nil)

	nodes["node3"] = "198.18.0.3"
	drain(changed)
	c.AddNode(t, "node3", nil, nil)
	runAgents(t, c, nodes)
	waitPeers(t, client, svc, nodes, changed)

	pod := agentPods(t, c)["node3"]
	drain(changed)
	if out, err := c.Kubectl(t, "delete", "pod", pod, "-n", "rdmabench", "--wait=false"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	delete(nodes, "node3") // terminating: no kubelet confirms, the slice marks it
	waitPeers(t, client, svc, nodes, changed)
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// agentPods maps each node to the DaemonSet's pod on it.
func agentPods(t *testing.T, c *kubetest.Cluster) map[string]string {
	out, err := c.Kubectl(t, "get", "pods", "-n", "rdmabench", "-l", "app.kubernetes.io/component=agent", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name              string
				DeletionTimestamp *time.Time
			}
			Spec   struct{ NodeName string }
			Status struct{ Phase string }
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" && p.Metadata.DeletionTimestamp == nil {
			m[p.Spec.NodeName] = p.Metadata.Name
		}
	}
	return m
}

// runAgents waits for the DaemonSet's pod on each node and posts those
// not yet Running Running at the node's address (hostNetwork).
func runAgents(t *testing.T, c *kubetest.Cluster, nodes map[string]string) {
	var pods map[string]string
	c.WaitFor(t, fmt.Sprintf("an agent pod on each of %d nodes", len(nodes)), time.Minute, func() (bool, error) {
		pods = agentPods(t, c)
		return len(pods) == len(nodes), nil
	})
	for node, pod := range pods {
		c.MarkPodRunning(t, "rdmabench", pod, nodes[node], nodes[node])
	}
}

// waitPeers waits until the peers are the agents of nodes; with changed,
// the watch must have told of it.
func waitPeers(t *testing.T, client *kube.Client, svc kube.Service, nodes map[string]string, changed chan struct{}) {
	t.Helper()
	var want []pinglist.Peer
	for n, a := range nodes {
		want = append(want, pinglist.Peer{Host: a, Port: 9464, Node: n})
	}
	sortPeers(want)
	var got []pinglist.Peer
	told := changed == nil
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-changed:
			told = true
		default:
		}
		var err error
		if got, err = client.Peers(context.Background(), svc); err != nil {
			t.Fatal(err)
		}
		sortPeers(got)
		if told && reflect.DeepEqual(got, want) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("peers %v (watch told: %v), want %v", got, told, want)
}

func sortPeers(p []pinglist.Peer) {
	slices.SortFunc(p, func(a, b pinglist.Peer) int { return strings.Compare(a.Host, b.Host) })
}
