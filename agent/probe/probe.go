// Package probe is the agent's prober: which peer is due a probe, the
// probes in flight and their timeouts, the replies matched to them, the run
// of losses that makes a peer unreachable, and the metrics all that
// updates. It is plain Go over a Transport (agent/ud on a UD QP; a
// simulated one in tests), driven by one goroutine: the transport's loop
// calls Tick and Reply, and the daemon changes the peers between calls.
package probe

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/wire"
)

// Source is where a UD datagram came from, or where a destination sends:
// the sender's GID and QP number. A reply is taken from its peer only.
type Source struct {
	GID [16]byte
	QPN uint32
}

// Dest is a peer's resolved address (an address handle and QPN on a UD
// QP), made by the transport from the peer's address record.
type Dest interface {
	Source() Source
}

// Transport sends probes. Send is called only from within the transport's
// own loop (Tick), so it needs no lock against the replies it posts. It
// stamps the probe's SentNS on its timestamp clock (the RNIC's, or the
// CPU's) as it posts it, and returns that stamp.
type Transport interface {
	Clock() wire.Clock
	Send(d Dest, m wire.Message) (sentNS uint64, err error)
}

// Driven is what a transport's loop drives: the prober's ticks and the
// replies it receives.
type Driven interface {
	Tick(nowNS uint64) (nextNS uint64)
	Reply(r Reply)
}

// Reply is a reply datagram as the transport received it: the message, who
// sent it, when it arrived in ns on the timestamp clock of the message's
// SentNS (AtNS: the RTT is AtNS - SentNS), and when the loop took it, on
// the clock of Tick's now (ArrivedNS: against the probe's timeout).
type Reply struct {
	Msg       wire.Message
	From      Source
	AtNS      uint64
	ArrivedNS uint64
}

// Config is the probing rate, budget and reachability.
type Config struct {
	Rate   float64 // probes a second to each peer
	Budget float64 // probes a second to all peers together
	Reach  rules.Reach
}

// Validate says what is wrong with c.
func (c Config) Validate() error {
	switch {
	case !(c.Rate > 0 && c.Rate <= 1000):
		return fmt.Errorf("rate %g probes a second a peer: want more than 0, at most 1000", c.Rate)
	case !(c.Budget > 0 && c.Budget <= 1e6):
		return fmt.Errorf("budget %g probes a second: want more than 0, at most 1000000", c.Budget)
	}
	return c.Reach.Validate()
}

// Peer is a pinglist entry and, once its address record is fetched, its
// destination.
type Peer struct {
	metrics.Peer
	Dest Dest // nil until resolved
}

// MaxInFlight bounds the probes awaiting a reply, whatever the rate, the
// budget and the timeout say: a probe that would pass it is not sent (and
// counted in Stats.Skipped).
const MaxInFlight = 1 << 16

type peerState struct {
	Peer
	next       uint64 // ns: when its next probe is due
	lostInARow int
	gen        uint64 // the list generation that last listed it
}

type inFlight struct {
	peer     *peerState
	sentNS   uint64
	deadline uint64 // Reach.Timeout after it was sent: then it is overdue
	lostAt   uint64 // Reach.LostAfter: then it is lost
	overdue  bool   // counted towards its peer's run
}

// Stats are the prober's own counts, for its log and tests.
type Stats struct {
	Sent, Answered, Lost uint64
	Late                 uint64 // answered, after the timeout (within Answered)
	SendErrors           uint64 // Send failed: counted as sent and lost
	Skipped              uint64 // not sent: MaxInFlight reached
	Stray                uint64 // replies to no probe in flight: late, duplicated, another session's, or from another source than the probe's peer
}

// Prober probes its peers.
type Prober struct {
	cfg     Config
	tr      Transport
	m       *metrics.Set
	session uint64

	mu       sync.Mutex // guards everything below: the loop and the daemon's reloads run apart
	peers    map[string]*peerState
	order    []*peerState
	gen      uint64
	seq      uint64
	inFlight map[uint64]inFlight
	interval uint64 // ns between two probes of one peer
	stats    Stats
	lastErr  error
}

// New makes a prober with a random session, so that replies to an earlier
// run of the agent are strays.
func New(cfg Config, tr Transport, m *metrics.Set) (*Prober, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, fmt.Errorf("probe session: %w", err)
	}
	p := &Prober{cfg: cfg, tr: tr, m: m, session: binary.LittleEndian.Uint64(b[:]),
		peers: map[string]*peerState{}, inFlight: map[uint64]inFlight{}}
	m.SetBudget(cfg.Budget)
	p.setInterval()
	return p, nil
}

// EffectiveRate is the probes a second each peer gets: the rate, lowered
// so that all n peers together stay within the budget.
func (c Config) EffectiveRate(n int) float64 {
	if n == 0 {
		return c.Rate
	}
	return math.Min(c.Rate, c.Budget/float64(n))
}

func (p *Prober) setInterval() {
	p.interval = uint64(float64(time.Second) / p.cfg.EffectiveRate(len(p.order)))
}

// SetPeers makes peers the pinglist. A peer already on it keeps its phase,
// run of losses and counters, and its destination unless the new entry
// has one; the new ones start at spread phases so that their probes do not
// leave in one burst. Only resolved peers have series (a peer whose agent
// never answered its address request is not yet known to be anything).
func (p *Prober) SetPeers(peers []Peer, nowNS uint64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(peers) > metrics.MaxPeers {
		return fmt.Errorf("%d peers, more than %d", len(peers), metrics.MaxPeers)
	}
	p.gen++
	order := make([]*peerState, 0, len(peers))
	for _, np := range peers {
		ps, ok := p.peers[np.Addr]
		if ok && ps.gen == p.gen {
			return fmt.Errorf("peer %s twice", np.Addr)
		}
		if !ok {
			ps = &peerState{}
			p.peers[np.Addr] = ps
		}
		d := ps.Dest
		if np.Dest != nil {
			d = np.Dest
		}
		ps.Peer, ps.gen = Peer{Peer: np.Peer, Dest: d}, p.gen
		order = append(order, ps)
	}
	for addr, ps := range p.peers {
		if ps.gen != p.gen {
			delete(p.peers, addr)
		}
	}
	p.order = order
	p.setInterval()
	for i, ps := range order {
		if ps.next == 0 {
			ps.next = nowNS + p.interval*uint64(i+1)/uint64(len(order)+1)
		}
	}
	// Probes in flight to a peer no longer listed are forgotten: their
	// replies become strays, and no loss is counted against a peer that
	// has no series.
	for seq, f := range p.inFlight {
		if f.peer.gen != p.gen {
			delete(p.inFlight, seq)
		}
	}
	return p.m.SetPeers(p.resolvedLocked())
}

func (p *Prober) resolvedLocked() []metrics.Peer {
	out := make([]metrics.Peer, 0, len(p.order))
	for _, ps := range p.order {
		if ps.Dest != nil {
			out = append(out, ps.Peer.Peer)
		}
	}
	return out
}

// SetDest gives a listed peer its destination (first resolved, or anew
// after its agent restarted with another QP). A peer not listed is
// ignored: the list changed while its address was fetched.
func (p *Prober) SetDest(addr string, d Dest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.peers[addr]
	if !ok || d == nil {
		return nil
	}
	had := ps.Dest != nil
	ps.Dest = d
	if had {
		return nil
	}
	return p.m.SetPeers(p.resolvedLocked())
}

// PeerState is one peer as the daemon sees it, to decide which addresses
// to fetch again.
type PeerState struct {
	Addr       string
	Resolved   bool
	Source     Source
	LostInARow int
}

// Peers is the list's state.
func (p *Prober) Peers() []PeerState {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PeerState, len(p.order))
	for i, ps := range p.order {
		out[i] = PeerState{Addr: ps.Addr, Resolved: ps.Dest != nil, LostInARow: ps.lostInARow}
		if ps.Dest != nil {
			out[i].Source = ps.Dest.Source()
		}
	}
	return out
}

// SetTransport makes tr the transport probes go out on (a device
// reopened, or a stand-in that fails every send while it is gone). The
// peers keep their destinations: sent on the new transport, a stale one
// fails, its peer runs up losses, and the daemon fetches its address anew.
func (p *Prober) SetTransport(tr Transport) {
	p.mu.Lock()
	p.tr = tr
	p.mu.Unlock()
}

// Stats are the counts so far.
func (p *Prober) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// TakeSendError returns and clears the last error Send returned, for the
// daemon to log once and to tell a dead device.
func (p *Prober) TakeSendError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.lastErr
	p.lastErr = nil
	return err
}

// Tick sends the probes due by now, counts those unanswered past the
// timeout towards their peer's run, and as lost those unanswered past
// LostAfter. It returns when it next has work: the transport's loop sleeps
// until then unless a completion comes first. The loop takes what its CQ
// holds before each Tick, so a reply that came while the agent itself was
// stalled is answered late, not lost.
func (p *Prober) Tick(nowNS uint64) (nextNS uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	next := nowNS + p.interval
	for seq, f := range p.inFlight {
		switch {
		case nowNS >= f.lostAt:
			delete(p.inFlight, seq)
			if !f.overdue {
				p.overdueLocked(f.peer)
			}
			p.lostLocked(f.peer)
		case nowNS >= f.deadline:
			if !f.overdue {
				f.overdue = true
				p.inFlight[seq] = f
				p.overdueLocked(f.peer)
			}
			next = min(next, f.lostAt)
		default:
			next = min(next, f.deadline)
		}
	}
	for _, ps := range p.order {
		if ps.Dest == nil {
			continue
		}
		if ps.next <= nowNS {
			p.sendLocked(ps, nowNS)
			// The next probe one interval on; after a stall longer than
			// that, from now: a stalled agent does not burst to catch up.
			ps.next += p.interval
			if ps.next <= nowNS {
				ps.next = nowNS + p.interval
			}
		}
		next = min(next, ps.next)
	}
	return next
}

func (p *Prober) sendLocked(ps *peerState, nowNS uint64) {
	if len(p.inFlight) >= MaxInFlight {
		p.stats.Skipped++
		return
	}
	p.seq++
	m := wire.Message{Kind: wire.KindProbe, Clock: p.tr.Clock(), Session: p.session, Seq: p.seq}
	p.stats.Sent++
	p.m.Sent(ps.Addr)
	stamp, err := p.tr.Send(ps.Dest, m)
	if err != nil {
		// The probe did not leave: a device gone or a QP in error. It is
		// lost as the peer sees it, and counts towards unreachable.
		p.stats.SendErrors++
		p.lastErr = err
		p.overdueLocked(ps)
		p.lostLocked(ps)
		return
	}
	p.inFlight[p.seq] = inFlight{peer: ps, sentNS: stamp,
		deadline: nowNS + uint64(p.cfg.Reach.Timeout), lostAt: nowNS + uint64(p.cfg.Reach.LostAfter)}
}

// overdueLocked counts a probe unanswered within the timeout towards its
// peer's run.
func (p *Prober) overdueLocked(ps *peerState) {
	ps.lostInARow++
	p.m.SetReachable(ps.Addr, ps.lostInARow < p.cfg.Reach.LostInARow)
}

func (p *Prober) lostLocked(ps *peerState) {
	p.stats.Lost++
	p.m.Lost(ps.Addr)
}

// Reply takes a reply: if it answers a probe in flight, from that probe's
// peer, within LostAfter, the round trip and the responder's hold time are
// recorded (a late one's too: what it took) and the peer is reachable
// again.
func (p *Prober) Reply(r Reply) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.inFlight[r.Msg.Seq]
	if !ok || r.Msg.Kind != wire.KindReply || r.Msg.Session != p.session || r.Msg.SentNS != f.sentNS ||
		f.peer.Dest == nil || r.From != f.peer.Dest.Source() || r.AtNS < f.sentNS || r.Msg.Clock != p.tr.Clock() {
		p.stats.Stray++
		return
	}
	delete(p.inFlight, r.Msg.Seq)
	if r.ArrivedNS >= f.lostAt {
		// Past LostAfter but not yet swept: lost, as the sweep would say.
		if !f.overdue {
			p.overdueLocked(f.peer)
		}
		p.lostLocked(f.peer)
		return
	}
	late := f.overdue || r.ArrivedNS >= f.deadline
	p.stats.Answered++
	if late {
		p.stats.Late++
	}
	f.peer.lostInARow = 0
	p.m.Answered(f.peer.Addr, time.Duration(r.AtNS-f.sentNS), r.Msg.Hold, late, time.Now())
}
