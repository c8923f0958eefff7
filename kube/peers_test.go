package kube

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/rdmabench/rdmabench/agent/pinglist"
)

func ptr[T any](v T) *T { return &v }

func slice(name, svc string, ports map[string]int32, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: "rb", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   eps,
	}
	for n, p := range ports {
		es.Ports = append(es.Ports, discoveryv1.EndpointPort{Name: ptr(n), Port: ptr(p)})
	}
	return es
}

func ep(addr, node string, ready, terminating *bool) discoveryv1.Endpoint {
	return discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr(node),
		Conditions: discoveryv1.EndpointConditions{Ready: ready, Terminating: terminating}}
}

func TestPeersFromEndpointSlices(t *testing.T) {
	m := map[string]int32{"metrics": 9101}
	objs := []runtime.Object{
		slice("a-1", "agents", m, ep("198.18.0.1", "node1", ptr(true), nil), ep("198.18.0.2", "node2", nil, nil),
			ep("198.18.0.3", "node3", ptr(false), nil), ep("198.18.0.4", "node4", ptr(true), ptr(true))),
		slice("a-2", "agents", m, ep("198.18.0.2", "node2", ptr(true), nil), ep("198.18.0.5", "node5", ptr(true), nil)),
		slice("a-3", "agents", map[string]int32{"other": 1}, ep("198.18.0.6", "node6", ptr(true), nil)),
		slice("b-1", "someone-else", m, ep("198.18.0.7", "node7", ptr(true), nil)),
	}
	c := fakeClient(objs...)
	got, err := c.Peers(context.Background(), Service{Namespace: "rb", Name: "agents", PortName: "metrics"})
	if err != nil {
		t.Fatal(err)
	}
	want := []pinglist.Peer{{Host: "198.18.0.1", Port: 9101, Node: "node1"}, {Host: "198.18.0.2", Port: 9101, Node: "node2"}, {Host: "198.18.0.5", Port: 9101, Node: "node5"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("peers %+v\nwant  %+v (unready, terminating, other ports and services left out, node2 once)", got, want)
	}
	bad := fakeClient(slice("a-1", "agents", m, ep("node1.example", "node1", nil, nil)))
	if _, err := bad.Peers(context.Background(), Service{Namespace: "rb", Name: "agents", PortName: "metrics"}); err == nil || !strings.Contains(err.Error(), `address "node1.example"`) {
		t.Errorf("a slice address that is not an IP: %v", err)
	}
}

// TestWatchSaysWhenSlicesChange: a slice added after the watch started
// is told on changed.
func TestWatchSaysWhenSlicesChange(t *testing.T) {
	c := fakeClient()
	ctx, cancel := context.WithCancel(context.Background())
	changed, done := make(chan struct{}, 1), make(chan struct{})
	s := Service{Namespace: "rb", Name: "agents", PortName: "metrics"}
	go func() { defer close(done); c.Watch(ctx, s, changed, t.Logf) }()
	deadline := time.After(10 * time.Second)
	add := time.NewTicker(50 * time.Millisecond) // the fake's watch starts late
	defer add.Stop()
	for i := 0; ; i++ {
		select {
		case <-changed:
			cancel()
			<-done
			return
		case <-add.C:
			es := slice("a-"+string(rune('a'+i%26))+time.Now().Format("150405.000000"), "agents", map[string]int32{"metrics": 9101})
			if _, err := c.Set.DiscoveryV1().EndpointSlices("rb").Create(ctx, es, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("no change told within 10 s of slices being added")
		}
	}
}
