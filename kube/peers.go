package kube

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/rdmabench/rdmabench/agent/pinglist"
)

// Service is the Service whose EndpointSlices list the agents (the
// DaemonSet's), and the name of the port each agent listens on.
type Service struct {
	Namespace, Name string
	PortName        string
}

func (s Service) String() string {
	return fmt.Sprintf("the EndpointSlices of Service %s/%s", s.Namespace, s.Name)
}

func (s Service) selector() string { return discoveryv1.LabelServiceName + "=" + s.Name }

// listPage bounds one list call's answer; MaxEntries bounds them all.
const listPage = 500

// Peers lists the agents behind s: every address of every endpoint not
// terminating and not marked unready, at the port named PortName (the
// only port when PortName is ""), with its node's name. An address in two
// slices (a slice being split or merged) is kept once.
func (c *Client) Peers(ctx context.Context, s Service) ([]pinglist.Peer, error) {
	ctx, cancel := context.WithTimeout(ctx, RequestTimeout)
	defer cancel()
	var peers []pinglist.Peer
	seen := map[pinglist.Peer]bool{}
	opts := metav1.ListOptions{LabelSelector: s.selector(), Limit: listPage}
	for {
		list, err := c.Set.DiscoveryV1().EndpointSlices(s.Namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %v: %w", s, err)
		}
		for i := range list.Items {
			if peers, err = addSlice(peers, seen, &list.Items[i], s.PortName); err != nil {
				return nil, fmt.Errorf("%v: %w", s, err)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return peers, nil
		}
	}
}

func addSlice(peers []pinglist.Peer, seen map[pinglist.Peer]bool, es *discoveryv1.EndpointSlice, portName string) ([]pinglist.Peer, error) {
	port, ok := slicePort(es, portName)
	if !ok {
		return peers, nil // a slice without the port (being written) lists no agent
	}
	for _, e := range es.Endpoints {
		if !usable(e) {
			continue
		}
		node := ""
		if e.NodeName != nil {
			node = *e.NodeName
		}
		for _, a := range e.Addresses {
			if _, err := netip.ParseAddr(a); err != nil {
				return peers, fmt.Errorf("slice %s: address %q: %v", es.Name, a, err)
			}
			p := pinglist.Peer{Host: a, Port: port, Node: node}
			if seen[p] {
				continue
			}
			if len(peers) == pinglist.MaxEntries {
				return peers, fmt.Errorf("more than %d peers", pinglist.MaxEntries)
			}
			seen[p] = true
			peers = append(peers, p)
		}
	}
	return peers, nil
}

// slicePort is the slice's port named name, or its only port when name is
// "".
func slicePort(es *discoveryv1.EndpointSlice, name string) (uint16, bool) {
	for _, p := range es.Ports {
		if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
			continue
		}
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn == name || (name == "" && len(es.Ports) == 1) {
			return uint16(*p.Port), true
		}
	}
	return 0, false
}

// usable is an endpoint an agent may probe: not terminating, and not
// marked unready (a nil Ready is ready, as the API says).
func usable(e discoveryv1.Endpoint) bool {
	c := e.Conditions
	return (c.Terminating == nil || !*c.Terminating) && (c.Ready == nil || *c.Ready)
}

// Watch says on changed when s's EndpointSlices change (a node joined or
// left), until ctx ends: one pending signal at most. A watch the server
// ends is started again; a failing one after a wait doubling up to a
// minute.
func (c *Client) Watch(ctx context.Context, s Service, changed chan<- struct{}, logf func(string, ...any)) {
	wait := time.Second
	for ctx.Err() == nil {
		err := c.watchOnce(ctx, s, changed)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			wait = time.Second
			continue
		}
		logf("watch %v: %v (again in %v)", s, err, wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// watchTimeout is how long the server keeps one watch open.
const watchTimeout = 5 * time.Minute

func (c *Client) watchOnce(ctx context.Context, s Service, changed chan<- struct{}) error {
	secs := int64(watchTimeout / time.Second)
	w, err := c.Set.DiscoveryV1().EndpointSlices(s.Namespace).Watch(ctx, metav1.ListOptions{LabelSelector: s.selector(), TimeoutSeconds: &secs})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select { // a watcher need not close its channel when ctx ends
		case <-ctx.Done():
			return nil
		case ev, open = <-w.ResultChan():
		}
		if !open {
			return nil
		}
		if ev.Type == watch.Error {
			return fmt.Errorf("%v", ev.Object)
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
}

// PeerSource is s as the agent's daemon takes its peers: listed, and
// watched for changes.
type PeerSource struct {
	C    *Client
	S    Service
	Logf func(string, ...any)
}

func (p PeerSource) Peers(ctx context.Context) ([]pinglist.Peer, error) { return p.C.Peers(ctx, p.S) }
func (p PeerSource) Watch(ctx context.Context, changed chan<- struct{}) {
	p.C.Watch(ctx, p.S, changed, p.Logf)
}
func (p PeerSource) String() string { return p.S.String() }
