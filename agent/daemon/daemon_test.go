package daemon

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/exchange"
	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/wire"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testenv"
	"github.com/rdmabench/rdmabench/internal/testport"
)

// simNet is a UD fabric as hostile as a real one: datagrams arrive late
// and out of order, some are lost, some twice, and a QP that is gone
// swallows what is sent to it.
type simNet struct {
	mu      sync.Mutex
	rng     *rand.Rand
	loss    float64
	dup     float64
	maxLag  time.Duration
	eps     map[probe.Source]*simTR
	nextQPN uint32
	start   time.Time
}

func newSimNet(loss, dup float64, maxLag time.Duration) *simNet {
	return &simNet{rng: rand.New(rand.NewPCG(1, 2)), loss: loss, dup: dup, maxLag: maxLag,
		eps: map[probe.Source]*simTR{}, nextQPN: 100, start: time.Now()}
}

func (n *simNet) now() uint64 { return uint64(time.Since(n.start)) + 1 }

type datagram struct {
	m    wire.Message
	from probe.Source
}

func (n *simNet) send(from, to probe.Source, m wire.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	copies := 1
	if n.rng.Float64() < n.loss {
		copies = 0
	} else if n.rng.Float64() < n.dup {
		copies = 2
	}
	for range copies {
		lag := time.Duration(n.rng.Int64N(int64(n.maxLag)))
		time.AfterFunc(lag, func() {
			n.mu.Lock()
			ep := n.eps[to]
			n.mu.Unlock()
			if ep != nil {
				select {
				case ep.inbox <- datagram{m, from}:
				default: // a full receive queue drops, as a UD QP does
				}
			}
		})
	}
}

// node is one simulated host's RNIC: it opens a new QP each time, and
// fails to open while it is down.
type node struct {
	net  *simNet
	gid  [16]byte
	mu   sync.Mutex
	down bool
	cur  *simTR
}

func (nd *node) open() (Transport, error) {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.down {
		return nil, errors.New("sim0: no such device")
	}
	nd.net.mu.Lock()
	nd.net.nextQPN++
	t := &simTR{net: nd.net, src: probe.Source{GID: nd.gid, QPN: nd.net.nextQPN}, inbox: make(chan datagram, 256), gone: make(chan struct{})}
	nd.net.eps[t.src] = t
	nd.net.mu.Unlock()
	nd.cur = t
	return t, nil
}

// remove takes the device away: the QP's loop ends, and it does not
// open until restore.
func (nd *node) remove() {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	nd.down = true
	if nd.cur != nil {
		nd.cur.kill()
	}
}

func (nd *node) restore() {
	nd.mu.Lock()
	nd.down = false
	nd.mu.Unlock()
}

type simTR struct {
	net      *simNet
	src      probe.Source
	inbox    chan datagram
	gone     chan struct{}
	once     sync.Once
	answered atomic.Uint64
}

func (t *simTR) kill() {
	t.once.Do(func() {
		t.net.mu.Lock()
		delete(t.net.eps, t.src)
		t.net.mu.Unlock()
		close(t.gone)
	})
}

type simDest probe.Source

func (d simDest) Source() probe.Source { return probe.Source(d) }

func (t *simTR) Clock() wire.Clock { return wire.ClockCPU }
func (t *simTR) Address(host, dev string) wire.Address {
	return wire.Address{Version: wire.AddressVersion, Host: host, Dev: dev, GID: append([]byte(nil), t.src.GID[:]...),
		QPN: t.src.QPN, QKey: 0x11111111, Clock: wire.ClockCPU}
}
func (t *simTR) Resolve(a wire.Address) (probe.Dest, error) {
	var s probe.Source
	copy(s.GID[:], a.GID)
	s.QPN = a.QPN
	return simDest(s), nil
}
func (t *simTR) Send(d probe.Dest, m wire.Message) (uint64, error) {
	select {
	case <-t.gone:
		return 0, errors.New("sim0: the QP is gone")
	default:
	}
	m.SentNS = t.net.now()
	t.net.send(t.src, d.Source(), m)
	return m.SentNS, nil
}
func (t *simTR) ClockNote() string {
	return "sim0 has no completion timestamps: timing on the CPU's clock"
}
func (t *simTR) Counts() metrics.Counts { return metrics.Counts{Answered: t.answered.Load()} }
func (t *simTR) Close() error           { t.kill(); return nil }

func (t *simTR) Run(ctx context.Context, p probe.Driven) error {
	next := p.Tick(t.net.now())
	for {
		wait := time.Duration(0)
		if now := t.net.now(); next > now {
			wait = time.Duration(next - now)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-t.gone:
			timer.Stop()
			return errors.New("sim0: the device is gone")
		case d := <-t.inbox:
			timer.Stop()
			at := t.net.now()
			if d.m.Kind == wire.KindProbe {
				t.answered.Add(1)
				t.net.send(t.src, d.from, d.m.Reply(time.Duration(t.net.now()-at), wire.ClockCPU))
			} else {
				p.Reply(probe.Reply{Msg: d.m, From: d.from, AtNS: at, ArrivedNS: at})
			}
		case <-timer.C:
			next = p.Tick(t.net.now())
		}
	}
}

type running struct {
	a    *Agent
	nd   *node
	log  *syncbuf.Buffer
	stop func()
}

func startAgents(t *testing.T, sn *simNet, addrs []string, tokens []string, peersFile string) []*running {
	t.Helper()
	var out []*running
	for i, addr := range addrs {
		nd := &node{net: sn}
		nd.gid[15] = byte(i + 1)
		log := &syncbuf.Buffer{}
		a, err := Listen(Config{
			Self:        Self{Host: "127.0.0.1", Listen: addr},
			Token:       []byte(tokens[i]),
			PeersFile:   peersFile,
			Probe:       probe.Config{Rate: 50, Budget: 1000, Reach: rules.Reach{LostInARow: 3, Timeout: 50 * time.Millisecond, LostAfter: time.Second}},
			Open:        nd.open,
			Now:         sn.now,
			ReopenEvery: 200 * time.Millisecond,
			Log:         log,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		r := &running{a: a, nd: nd, log: log}
		r.stop = func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("agent %s: %v", addr, err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("agent %s still runs 5 s after its context ended", addr)
			}
		}
		t.Cleanup(func() {
			r.stop()
			if t.Failed() {
				t.Logf("agent %s's log:\n%s", addr, log.String())
			}
		})
		out = append(out, r)
	}
	return out
}

// reach is peer's reachable gauge in r's metrics, -1 without a series.
func reach(r *running, peer string) float64 {
	fams, _ := r.a.m.Registry().Gather()
	for _, f := range fams {
		if f.GetName() != metrics.PeerReachable {
			continue
		}
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == metrics.LabelPeer && l.GetValue() == peer {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func eventually(t *testing.T, d time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		if ok() {
			return time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: not within %v", what, d)
	return 0
}

func TestAgentsOverASimulatedFabric(t *testing.T) {
	testenv.HoldCPUs(t)
	sn := newSimNet(0.02, 0.05, 5*time.Millisecond)
	addrs := []string{testport.Addr(t), testport.Addr(t), testport.Addr(t), testport.Addr(t)}
	peers := filepath.Join(t.TempDir(), "peers")
	os.WriteFile(peers, []byte(strings.Join(addrs, "\n")+"\n"), 0o644)
	// The fourth agent holds another token: nobody may fetch its address,
	// and it may fetch nobody's.
	ag := startAgents(t, sn, addrs, []string{"tok", "tok", "tok", "wrong"}, peers)
	all3 := func() bool {
		for i := range 3 {
			for j := range 3 {
				if i != j && reach(ag[i], addrs[j]) != 1 {
					return false
				}
			}
		}
		return true
	}
	eventually(t, 5*time.Second, "the three agents with the token reach each other", all3)
	time.Sleep(2 * time.Second)
	for i := range 3 {
		s := ag[i].a.prober.Stats()
		// 2 peers at 50 a second for 2 s or more; 2% of probes and 2% of
		// replies lost; 5% of each duplicated, so strays.
		if s.Sent < 200 || s.Answered > s.Sent || s.Lost > s.Sent/10 || s.Stray == 0 {
			t.Errorf("agent %d: %+v: want 200 or more sent, at most 10%% lost, duplicates as strays", i, s)
		}
		if v := reach(ag[i], addrs[3]); v != -1 {
			t.Errorf("agent %d has a series for the agent without the token: reachable %g", i, v)
		}
		if !strings.Contains(ag[i].log.String(), "peer "+addrs[3]+": ") || !strings.Contains(ag[i].log.String(), "401") {
			t.Errorf("agent %d did not log the refused address request:\n%s", i, ag[i].log.String())
		}
	}

	// Agent 3's device goes: its peers lose it within 3 probes at 50 a
	// second and the timeout (0.11 s), its record is refused (503), and it
	// sees every peer unreachable, since no probe leaves.
	ag[2].nd.remove()
	took := eventually(t, 2*time.Second, "agent 3 unreachable once its device is gone", func() bool {
		return reach(ag[0], addrs[2]) == 0 && reach(ag[1], addrs[2]) == 0 && reach(ag[2], addrs[0]) == 0 && reach(ag[2], addrs[1]) == 0
	})
	t.Logf("agent 3's device removed: unreachable both ways within %v", took)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_, err := fetch(ctx, addrs[2], "tok")
	cancel()
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("agent 3's record while its device is gone: %v, want 503", err)
	}
	// Back, with a new QP: its peers fetch its address again.
	ag[2].nd.restore()
	took = eventually(t, 10*time.Second, "agent 3 reachable again with its new QP", all3)
	t.Logf("agent 3's device back: reachable again within %v", took)
	if !strings.Contains(ag[2].log.String(), "the device is open again") {
		t.Errorf("agent 3 did not log its device's return:\n%s", ag[2].log.String())
	}

	// Agent 2 leaves the peers file: the others drop its series.
	os.WriteFile(peers+".new", []byte(addrs[0]+"\n"+addrs[2]+"\n"), 0o644)
	os.Rename(peers+".new", peers)
	eventually(t, 3*FileCheckEvery, "agent 2's series gone from agent 1 after the peers file dropped it", func() bool {
		return reach(ag[0], addrs[1]) == -1 && reach(ag[0], addrs[2]) == 1
	})
}

func fetch(ctx context.Context, addr, token string) (wire.Address, error) {
	return exchange.Fetch(ctx, http.DefaultClient, addr, []byte(token))
}
