package daemon

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testport"
)

// listSource is a PeerSource the test changes: the EndpointSlices'
// stand-in. Its watch runs until its context ends, as the real one does.
type listSource struct {
	mu      sync.Mutex
	peers   []pinglist.Peer
	changed chan<- struct{}
	watched chan struct{} // closed once Watch runs
	ended   chan struct{} // closed when Watch returned
}

func (s *listSource) Peers(context.Context) ([]pinglist.Peer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]pinglist.Peer(nil), s.peers...), nil
}

func (s *listSource) Watch(ctx context.Context, changed chan<- struct{}) {
	defer close(s.ended)
	s.mu.Lock()
	s.changed = changed
	s.mu.Unlock()
	close(s.watched)
	<-ctx.Done()
}

func (s *listSource) String() string { return "the test's slices" }

func (s *listSource) set(peers []pinglist.Peer) {
	s.mu.Lock()
	s.peers = peers
	ch := s.changed
	s.mu.Unlock()
	ch <- struct{}{}
}

// TestPeersFromASource: the first list is probed; when the source says it
// changed, the new list is; Run joins the source's watch before it
// returns.
func TestPeersFromASource(t *testing.T) {
	sn := newSimNet(0, 0, 0)
	nd := &node{net: sn}
	nd.gid[15] = 1
	// Addresses on loopback, where nothing answers: the peers' addresses
	// are asked for and not found, which is not what is tested.
	port := testport.Free(t)
	self := pinglist.Peer{Host: "127.0.0.1", Port: uint16(mustAtoi(t, port)), Node: "node1"}
	src := &listSource{peers: []pinglist.Peer{self, {Host: "127.0.0.2", Port: 9464, Node: "node2"}},
		watched: make(chan struct{}), ended: make(chan struct{})}
	log := &syncbuf.Buffer{}
	a, err := Listen(Config{
		Self:   Self{Host: "node1", Listen: "127.0.0.1:" + port},
		Token:  []byte("t"),
		Source: src,
		Probe:  probe.Config{Rate: 10, Budget: 100, Reach: rules.Reach{LostInARow: 3, Timeout: 50 * time.Millisecond, LostAfter: time.Second}},
		Open:   nd.open,
		Now:    sn.now,
		Log:    log,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	defer func() {
		if t.Failed() {
			t.Log(log.String())
		}
	}()
	eventually(t, 5*time.Second, "the first list probed", func() bool { return strings.Contains(log.String(), "peers: probing 1 peers") })
	<-src.watched
	src.set(append(src.peers, pinglist.Peer{Host: "127.0.0.3", Port: 9464, Node: "node3"}))
	eventually(t, 5*time.Second, "the changed list probed", func() bool {
		return strings.Contains(log.String(), "the test's slices changed: probing 2 peers")
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-src.ended:
	default:
		t.Error("Run returned before the source's watch ended")
	}
	if err := (&Config{Source: src, PeersFile: "x"}).checkPeerSource(); err == nil {
		t.Error("a source and a peers file both given: no error")
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
