package probe

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/wire"
)

type sent struct {
	to  Source
	msg wire.Message
}

// recorder is a transport that keeps what is sent, and fails while err is set.
type recorder struct {
	sent []sent
	err  error
	now  uint64 // the loop's clock, as run sets it
}

func (r *recorder) Clock() wire.Clock { return wire.ClockCPU }
func (r *recorder) Send(d Dest, m wire.Message) (uint64, error) {
	if r.err != nil {
		return 0, r.err
	}
	// A timestamp clock of its own, ahead of the loop's by a second, as
	// an RNIC's would be: the RTT must come from this one only.
	m.SentNS = r.now + sec
	r.sent = append(r.sent, sent{d.Source(), m})
	return m.SentNS, nil
}

type dst Source

func (d dst) Source() Source { return Source(d) }

func peer(i int) Peer {
	return Peer{Peer: metrics.Peer{Addr: "10.0.0." + strconv.Itoa(i) + ":9100", Host: "h", Scope: pinglist.ScopeToR},
		Dest: dst{QPN: uint32(100 + i)}}
}

const (
	ms  = uint64(time.Millisecond)
	sec = uint64(time.Second)
)

var cfg = Config{Rate: 10, Budget: 1000, Reach: rules.Reach{LostInARow: 3, Timeout: 50 * time.Millisecond, LostAfter: time.Second}}

func newProber(t *testing.T, c Config) (*Prober, *recorder, *metrics.Set) {
	t.Helper()
	tr := &recorder{}
	m := metrics.New(metrics.Local{Host: "me"}, wire.ClockCPU)
	p, err := New(c, tr, m)
	if err != nil {
		t.Fatal(err)
	}
	return p, tr, m
}

// net is how the simulated peers answer: after rtt, holding for hold,
// unless drop says the probe or its reply is lost.
type net struct {
	rtt  uint64
	hold time.Duration
	drop func(to Source, seq uint64, now uint64) bool
}

// run ticks p from `from` to `to` as the transport's loop would: at each
// time Tick asks for, and at each reply's arrival.
func run(p *Prober, tr *recorder, from, to uint64, n net) uint64 {
	now := from
	type due struct {
		at uint64
		r  Reply
	}
	var replies []due
	for now < to {
		tr.now = now
		next := p.Tick(now)
		for _, s := range tr.sent {
			if n.drop == nil || !n.drop(s.to, s.msg.Seq, now) {
				replies = append(replies, due{now + n.rtt, Reply{Msg: s.msg.Reply(n.hold, wire.ClockCPU), From: s.to, AtNS: s.msg.SentNS + n.rtt, ArrivedNS: now + n.rtt}})
			}
		}
		tr.sent = tr.sent[:0]
		if len(replies) > 0 && replies[0].at < next {
			next = replies[0].at
		}
		now = max(next, now+1)
		for len(replies) > 0 && replies[0].at <= now {
			p.Reply(replies[0].r)
			replies = replies[1:]
		}
	}
	return now
}

// value is family name's sample for peer: a counter's or gauge's value, a
// histogram's count (part network); -1 when there is none.
func value(t *testing.T, m *metrics.Set, name, peer string) float64 {
	t.Helper()
	sumOf := strings.HasSuffix(name, "_sum")
	name = strings.TrimSuffix(name, "_sum")
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, mm := range f.Metric {
			for _, l := range mm.Label {
				if l.GetName() == metrics.LabelPeer && l.GetValue() != peer ||
					l.GetName() == metrics.LabelPart && l.GetValue() != "network" {
					continue metric
				}
			}
			switch {
			case mm.Counter != nil:
				return mm.Counter.GetValue()
			case mm.Gauge != nil:
				return mm.Gauge.GetValue()
			case mm.Histogram != nil && sumOf:
				return mm.Histogram.GetSampleSum()
			case mm.Histogram != nil:
				return float64(mm.Histogram.GetSampleCount())
			}
		}
	}
	return -1
}

func TestProberRateAndLoss(t *testing.T) {
	p, tr, m := newProber(t, cfg)
	if err := p.SetPeers([]Peer{peer(1), peer(2)}, 1); err != nil {
		t.Fatal(err)
	}
	// Every fourth probe to each peer lost: 10 s at 10 a second is 100
	// probes a peer.
	count := map[Source]int{}
	var dropped, due uint64 // due: dropped more than LostAfter before the end
	end := 10 * sec
	run(p, tr, 1, end, net{rtt: 200_000, hold: 30 * time.Microsecond, drop: func(to Source, _, now uint64) bool {
		count[to]++
		if count[to]%4 != 0 {
			return false
		}
		dropped++
		if now+uint64(cfg.Reach.LostAfter) < end {
			due++
		}
		return true
	}})
	s := p.Stats()
	if s.Sent < 198 || s.Sent > 202 {
		t.Errorf("sent %d probes in 10 s to 2 peers at 10 a second, want 200", s.Sent)
	}
	if dropped < s.Sent/4-2 || s.Lost < due || s.Lost > dropped || s.Answered+dropped != s.Sent || s.Late != 0 {
		t.Errorf("sent %d, answered %d (%d late), lost %d: want the %d dropped more than a second before the end lost, at most the %d dropped", s.Sent, s.Answered, s.Late, s.Lost, due, dropped)
	}
	for _, pp := range []Peer{peer(1), peer(2)} {
		if v := value(t, m, metrics.ProbesSent, pp.Addr); v < 99 || v > 101 {
			t.Errorf("%s: probes sent %g, want 100", pp.Addr, v)
		}
		if v := value(t, m, metrics.RTT, pp.Addr); v < 73 || v > 76 {
			t.Errorf("%s: %g network RTT samples, want 75", pp.Addr, v)
		} else if sum := value(t, m, metrics.RTT+"_sum", pp.Addr); math.Abs(sum/v-170e-6) > 1e-9 {
			// 200 µs on the transport's timestamp clock less the 30 µs held.
			t.Errorf("%s: mean network RTT %g s, want 170 µs", pp.Addr, sum/v)
		}
		// One loss in four never makes three in a row.
		if v := value(t, m, metrics.PeerReachable, pp.Addr); v != 1 {
			t.Errorf("%s: reachable %g", pp.Addr, v)
		}
	}
}

func TestProberBudget(t *testing.T) {
	// 50 peers at 10 a second would be 500; a budget of 100 makes it 2 each.
	p, tr, _ := newProber(t, Config{Rate: 10, Budget: 100, Reach: cfg.Reach})
	var peers []Peer
	for i := range 50 {
		pp := peer(i)
		pp.Addr = "10.0.1." + strconv.Itoa(i) + ":9100"
		peers = append(peers, pp)
	}
	if err := p.SetPeers(peers, 1); err != nil {
		t.Fatal(err)
	}
	run(p, tr, 1, 10*sec, net{rtt: ms})
	if s := p.Stats(); s.Sent < 990 || s.Sent > 1010 || s.Answered+10 < s.Sent {
		t.Errorf("50 peers for 10 s within a budget of 100 a second: sent %d, answered %d; want 1000", s.Sent, s.Answered)
	}
}

func TestProberUnreachable(t *testing.T) {
	p, tr, m := newProber(t, cfg)
	p.SetPeers([]Peer{peer(1), peer(2)}, 1)
	// Peer 2 stops answering from 2 s to 4 s.
	silent := func(to Source, _ uint64, now uint64) bool {
		return to == peer(2).Dest.Source() && now >= 2*sec && now < 4*sec
	}
	var at []uint64 // when peer 2's gauge changed
	last := 1.0
	for now := uint64(1); now < 6*sec; now += 10 * ms {
		run(p, tr, now, now+10*ms, net{rtt: ms, drop: silent})
		if v := value(t, m, metrics.PeerReachable, peer(2).Addr); v != last {
			at, last = append(at, now), v
		}
		if v := value(t, m, metrics.PeerReachable, peer(1).Addr); v != 1 {
			t.Fatalf("peer 1 reachable %g at %d ms while it answers", v, now/ms)
		}
	}
	// Down after 3 probes at 10 a second and the timeout: by 2.35 s; up at
	// the first reply after 4 s.
	if len(at) != 2 || at[0] < 2*sec+200*ms || at[0] > 2*sec+360*ms || at[1] < 4*sec || at[1] > 4*sec+110*ms {
		t.Errorf("peer 2's reachable gauge changed at %v ns, want down near 2.3 s and up near 4 s", at)
	}
}

func TestProberStrays(t *testing.T) {
	p, tr, m := newProber(t, cfg)
	p.SetPeers([]Peer{peer(1), peer(2)}, 1)
	tr.now = sec
	p.Tick(sec)
	if len(tr.sent) != 2 {
		t.Fatalf("sent %d probes in the first interval, want one a peer", len(tr.sent))
	}
	s1, s2 := tr.sent[0], tr.sent[1]
	at := 2*sec + ms // on the recorder's timestamp clock
	arrived := sec + ms
	// From another source than its peer (an alias), another session, a
	// probe rather than a reply, a changed timestamp: all strays.
	forged := []Reply{
		{Msg: s1.msg.Reply(0, wire.ClockCPU), From: s2.to, AtNS: at, ArrivedNS: arrived},
		{Msg: func() wire.Message { r := s1.msg.Reply(0, wire.ClockCPU); r.Session++; return r }(), From: s1.to, AtNS: at, ArrivedNS: arrived},
		{Msg: s1.msg, From: s1.to, AtNS: at, ArrivedNS: arrived},
		{Msg: func() wire.Message { r := s1.msg.Reply(0, wire.ClockCPU); r.SentNS++; return r }(), From: s1.to, AtNS: at, ArrivedNS: arrived},
		{Msg: s1.msg.Reply(0, wire.ClockCQE), From: s1.to, AtNS: at, ArrivedNS: arrived}, // another clock's
	}
	for _, r := range forged {
		p.Reply(r)
	}
	good := Reply{Msg: s1.msg.Reply(10*time.Microsecond, wire.ClockCPU), From: s1.to, AtNS: at, ArrivedNS: arrived}
	p.Reply(good)
	p.Reply(good) // a duplicate
	// Peer 2's reply comes after LostAfter: lost, not answered.
	p.Reply(Reply{Msg: s2.msg.Reply(0, wire.ClockCPU), From: s2.to, AtNS: at, ArrivedNS: sec + uint64(cfg.Reach.LostAfter)})
	s := p.Stats()
	if s.Stray != 6 || s.Answered != 1 || s.Lost != 1 {
		t.Errorf("stats %+v: want 6 strays (5 forged, 1 duplicate), 1 answered, 1 lost", s)
	}
	if v := value(t, m, metrics.RTT, peer(1).Addr); v != 1 {
		t.Errorf("%g RTT samples for peer 1, want 1", v)
	}
}

func TestProberSendErrorsAndList(t *testing.T) {
	p, tr, m := newProber(t, cfg)
	p.SetPeers([]Peer{peer(1), peer(2)}, 1)
	run(p, tr, 1, sec, net{rtt: ms})
	// The device goes: every probe fails to leave, and counts as lost.
	tr.err = errors.New("rxe0 is gone")
	run(p, tr, sec, 2*sec, net{rtt: ms})
	if err := p.TakeSendError(); err == nil || err.Error() != "rxe0 is gone" {
		t.Errorf("send error %v", err)
	}
	if v := value(t, m, metrics.PeerReachable, peer(1).Addr); v != 0 {
		t.Errorf("reachable %g while no probe leaves", v)
	}
	tr.err = nil
	sentBefore := value(t, m, metrics.ProbesSent, peer(1).Addr)
	// Peer 2 leaves the list, peer 3 joins unresolved: peer 1 keeps its
	// counters, peer 2's series go, peer 3 has none until resolved.
	p3 := peer(3)
	p3.Dest = nil
	if err := p.SetPeers([]Peer{peer(1), p3}, 2*sec); err != nil {
		t.Fatal(err)
	}
	if v := value(t, m, metrics.ProbesSent, peer(1).Addr); v != sentBefore {
		t.Errorf("peer 1's probes sent %g after the list changed, was %g", v, sentBefore)
	}
	if v := value(t, m, metrics.ProbesSent, peer(2).Addr); v != -1 {
		t.Errorf("peer 2 left the list but has probes sent %g", v)
	}
	if v := value(t, m, metrics.ProbesSent, p3.Addr); v != -1 {
		t.Errorf("unresolved peer 3 has a series: %g", v)
	}
	p.SetDest(p3.Addr, dst{QPN: 103})
	run(p, tr, 2*sec, 3*sec, net{rtt: ms})
	if v := value(t, m, metrics.RTT, p3.Addr); v < 9 {
		t.Errorf("peer 3 resolved: %g replies in a second, want 10", v)
	}
	if err := p.SetPeers([]Peer{peer(1), peer(1)}, 3*sec); err == nil {
		t.Error("a peer twice was taken")
	}
}

// A reply after the timeout but within LostAfter is late, not lost: it
// counts towards the peer's run until it comes, then ends it. Whether the
// peer held it or the prober itself stalled with it in its CQ (the loop
// hands over what the CQ holds before it ticks), the path lost nothing.
func TestProberLateIsNotLost(t *testing.T) {
	p, tr, m := newProber(t, cfg)
	p.SetPeers([]Peer{peer(1)}, 1)
	// Every reply 80 ms after its probe: each is overdue at 50 ms, none
	// three in a row.
	run(p, tr, 1, 5*sec, net{rtt: 80 * ms})
	s := p.Stats()
	if s.Lost != 0 || s.Late != s.Answered || s.Answered+1 < s.Sent {
		t.Errorf("replies at 80 ms: %+v, want every probe answered late, none lost", s)
	}
	if v := value(t, m, metrics.ProbesLate, peer(1).Addr); v != float64(s.Late) {
		t.Errorf("probes late %g, want %d", v, s.Late)
	}
	if v := value(t, m, metrics.PeerReachable, peer(1).Addr); v != 1 {
		t.Errorf("reachable %g while every probe is answered", v)
	}

	// The prober stalls for 500 ms after sending, longer than LostInARow
	// probes: the replies wait in its CQ, and it takes them before it
	// ticks again.
	p, tr, m = newProber(t, cfg)
	p.SetPeers([]Peer{peer(1)}, 1)
	tr.now = sec
	p.Tick(sec)
	if len(tr.sent) != 1 {
		t.Fatalf("sent %d probes, want 1", len(tr.sent))
	}
	r := tr.sent[0]
	p.Reply(Reply{Msg: r.msg.Reply(0, wire.ClockCPU), From: r.to, AtNS: r.msg.SentNS + ms, ArrivedNS: sec + 500*ms})
	tr.now = sec + 500*ms
	p.Tick(sec + 500*ms)
	if s := p.Stats(); s.Lost != 0 || s.Late != 1 || s.Answered != 1 {
		t.Errorf("a reply taken after the prober's own stall: %+v, want it answered late", s)
	}
	if v := value(t, m, metrics.PeerReachable, peer(1).Addr); v != 1 {
		t.Errorf("reachable %g after the stall", v)
	}

	// No reply at all: overdue at the timeout, lost at LostAfter, and
	// not before.
	p, tr, m = newProber(t, cfg)
	p.SetPeers([]Peer{peer(1)}, 1)
	tr.now = sec
	p.Tick(sec) // the one probe to go unanswered; the next ones are due from 1.1 s
	for _, at := range []uint64{sec + uint64(cfg.Reach.Timeout), sec + uint64(cfg.Reach.LostAfter) - 1} {
		p.Tick(at)
		if s := p.Stats(); s.Lost != 0 {
			t.Errorf("at %d ms: lost %d before LostAfter, want 0", at/ms, s.Lost)
		}
	}
	if got := value(t, m, metrics.ProbesLost, peer(1).Addr); got != 0 {
		t.Errorf("probes lost %g before LostAfter, want 0", got)
	}
	p.Tick(sec + uint64(cfg.Reach.LostAfter))
	if s := p.Stats(); s.Lost != 1 {
		t.Errorf("lost %d at LostAfter, want the first probe's 1", s.Lost)
	}
	if got := value(t, m, metrics.ProbesLost, peer(1).Addr); got != 1 {
		t.Errorf("probes lost %g at LostAfter, want 1", got)
	}
}
