// Package ud is the agent's transport: one UD QP on one RNIC port, its
// receive ring, and the loop that owns it. The loop sleeps on a completion
// channel, answers other agents' probes as soon as it takes them off the
// CQ (the hold time it reports is from there to the reply's post), hands
// replies to the prober, and runs the prober's ticks, so that one goroutine
// posts and polls and nothing else touches the QP but Resolve's address
// handles. The probes are tens a second a peer: they are posted from Go
// through verbs, not from a C loop, which is for measurements.
package ud

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/wire"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/verbs"
)

// Config is the RNIC port and the transport's bounds.
type Config struct {
	Device   string // "" for the default device
	Port     int    // from 1
	GIDIndex int    // -1 to pick the RoCE v2 IPv4 entry (Ethernet) or none (IB)
	// AnswerRate bounds the replies a second, whoever probes: a flood of
	// probes costs this agent and the network no more than that.
	AnswerRate float64
	SysRoot    string // "/sys" unless a test says otherwise
}

// Ring sizes: receives posted at all times, and sends in flight. A
// probe's budget is at most tens of thousands a second and a send
// completes within microseconds, so 256 sends in flight is plenty; a
// send that finds them all used is not posted (an error the prober counts
// as a loss).
const (
	recvSlots = 1024
	sendSlots = 256
	slotBytes = 128 // GRHSize + wire.Size, rounded up
	// A receive's work request ID is recvID + its slot, a send's its slot:
	// a completion in error has no opcode to tell them apart by.
	recvID       = 1 << 20
	maxAnswerAHs = 4096
	maxProbeAHs  = 2 * 4096
)

// Stats are the transport's own counts.
type Stats struct {
	Answered  uint64 // probes answered
	Refused   uint64 // probes not answered: over AnswerRate, or no address handle for their sender
	Bad       uint64 // datagrams that are no agent message, or no source in their header
	RecvError uint64 // receive completions in error
	SendError uint64 // send completions in error
	LastBad   string // why the last bad datagram was, for the log
}

// Transport is one UD QP and what it needs.
type Transport struct {
	cfg    Config
	ctx    *verbs.Context
	pd     *verbs.PD
	ch     *verbs.CompChannel
	cq     *verbs.CQ
	qp     *verbs.QP
	recvB  *verbs.Buffer
	recvMR *verbs.MR
	sendB  *verbs.Buffer
	sendMR *verbs.MR
	closed atomic.Bool // the rings are unmapped: a send would write into nothing
	gidIdx int
	port   rdmasys.Port
	gid    [16]byte
	uverbs string // the device's uverbs node in sysfs, to notice its removal
	clock  wire.Clock
	khz    uint64 // the RNIC's clock rate, with ClockCQE
	note   string // why the clock is the CPU's

	// Owned by the loop: the send ring and the responder's AH cache.
	sendFree  []int
	sendAH    [sendSlots]*answerAH
	answerAHs map[ahKey]*answerAH
	bucket    float64
	bucketAt  time.Time

	mu       sync.Mutex // guards probeAHs and stats: Resolve runs beside the loop
	probeAHs map[ahKey]*probeAH
	stats    Stats
}

type ahKey struct {
	gid [16]byte
	lid uint16
}

type answerAH struct {
	ah       *verbs.AH
	inFlight int
	used     time.Time
}

type probeAH struct {
	ah   *verbs.AH
	used time.Time
}

// dest is a resolved peer: the AH towards its GID and its QPN.
type dest struct {
	ah  *probeAH
	src probe.Source
}

func (d *dest) Source() probe.Source { return d.src }

// ClockNote says why the clock is the CPU's, "" when it is the RNIC's.
func (t *Transport) ClockNote() string { return t.note }

// stamp is now on the timestamp clock, in ns.
func (t *Transport) stamp() (uint64, error) {
	if t.clock != wire.ClockCQE {
		return NowNS(), nil
	}
	ticks, err := t.ctx.ReadClock()
	if err != nil {
		return 0, err
	}
	return t.ticksNS(ticks), nil
}

// ticksNS turns the RNIC's ticks into ns at its clock rate.
func (t *Transport) ticksNS(ticks uint64) uint64 {
	hi, lo := bits.Mul64(ticks, 1_000_000)
	if hi >= t.khz {
		return uint64(float64(ticks) * 1e6 / float64(t.khz))
	}
	ns, _ := bits.Div64(hi, lo, t.khz)
	return ns
}

// Close frees the QP and everything under the device. The loop must have
// returned.
func (t *Transport) Close() error {
	t.closed.Store(true)
	err := t.ctx.Close()
	if t.recvB != nil {
		t.recvB.Close()
	}
	if t.sendB != nil {
		t.sendB.Close()
	}
	return err
}

// Device is the RNIC's name.
func (t *Transport) Device() string { return t.cfg.Device }

// Clock is where the transport's timestamps come from.
func (t *Transport) Clock() wire.Clock { return t.clock }

// Address is the record peers need to probe this QP.
func (t *Transport) Address(host, dev string) wire.Address {
	gid := t.gid
	return wire.Address{Version: wire.AddressVersion, Host: host, Dev: dev, GID: gid[:],
		QPN: t.qp.Num(), QKey: verbs.UDQKey, LID: t.port.LID, Clock: t.clock}
}

// Present says whether the device is still there: a device being removed
// (rdma link delete, a driver unbound) loses its uverbs node first, and
// rxe's removal then waits for every process to close it, so the agent
// must notice and close, not wait for an error.
func (t *Transport) Present() bool {
	if t.uverbs == "" {
		return true // no sysfs to tell; the verbs' errors will
	}
	_, err := os.Stat(filepath.Join(t.cfg.SysRoot, rdmasys.UverbsClassDir, t.uverbs))
	return err == nil
}

// Counts are the datagrams' fates as the metrics export them (the stray
// replies are the prober's to count).
func (t *Transport) Counts() metrics.Counts {
	s := t.Stats()
	return metrics.Counts{Answered: s.Answered, Refused: s.Refused, Bad: s.Bad + s.RecvError, LastBad: s.LastBad}
}

// Stats are the counts so far.
func (t *Transport) Stats() Stats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

func (t *Transport) count(f func(*Stats)) {
	t.mu.Lock()
	f(&t.stats)
	t.mu.Unlock()
}

// processStart is the clock's origin, one for the process, so that the
// prober's times stay on one clock across a device reopened.
var processStart = time.Now()

// NowNS is the transport's clock: monotonic ns since the process started,
// never 0.
func NowNS() uint64 { return uint64(time.Since(processStart)) + 1 }

func (t *Transport) nowNS() uint64 { return NowNS() }

// Resolve makes the destination of a peer's address record. Address
// handles are shared by every QP of one GID and kept while used: one not
// used for ten minutes is freed when the table is full.
func (t *Transport) Resolve(a wire.Address) (probe.Dest, error) {
	if err := a.Validate(); err != nil {
		return nil, err
	}
	if a.QKey != verbs.UDQKey {
		return nil, fmt.Errorf("address record: Q_Key %#x, this agent sends with %#x", a.QKey, verbs.UDQKey)
	}
	var k ahKey
	copy(k.gid[:], a.GID)
	k.lid = a.LID
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.probeAHs[k]
	if !ok {
		if len(t.probeAHs) >= maxProbeAHs {
			for kk, old := range t.probeAHs {
				if time.Since(old.used) > 10*time.Minute {
					old.ah.Close()
					delete(t.probeAHs, kk)
				}
			}
			if len(t.probeAHs) >= maxProbeAHs {
				return nil, fmt.Errorf("%d address handles in use", len(t.probeAHs))
			}
		}
		ah, err := t.pd.CreateAH(verbs.Endpoint{GID: k.gid, LID: k.lid}, t.cfg.Port, t.gidIdx)
		if err != nil {
			return nil, err
		}
		p = &probeAH{ah: ah}
		t.probeAHs[k] = p
	}
	p.used = time.Now()
	return &dest{ah: p, src: probe.Source{GID: k.gid, QPN: a.QPN}}, nil
}

// Send stamps probe m and posts it to d. Called only from the loop (the
// prober's Tick).
func (t *Transport) Send(d probe.Dest, m wire.Message) (uint64, error) {
	dd, ok := d.(*dest)
	if !ok {
		return 0, errors.New("send: not a destination of this transport")
	}
	t.mu.Lock()
	dd.ah.used = time.Now()
	t.mu.Unlock()
	var err error
	if m.SentNS, err = t.stamp(); err != nil {
		return 0, err
	}
	return m.SentNS, t.post(dd.ah.ah, dd.src.QPN, m, nil)
}

func (t *Transport) post(ah *verbs.AH, qpn uint32, m wire.Message, answer *answerAH) error {
	if t.closed.Load() {
		return fmt.Errorf("post a %v to QP %d: %w", m.Kind, qpn, verbs.ErrClosed)
	}
	if len(t.sendFree) == 0 {
		return fmt.Errorf("post a %v to QP %d: all %d sends in flight", m.Kind, qpn, sendSlots)
	}
	slot := t.sendFree[len(t.sendFree)-1]
	buf := t.sendB.Bytes()[slot*slotBytes : (slot+1)*slotBytes]
	b, err := m.Marshal(buf)
	if err != nil {
		return err
	}
	flags := 0
	if t.qp.MaxInline() >= wire.Size {
		flags = verbs.SendInline
	}
	err = t.qp.PostSend(verbs.SendWR{ID: uint64(slot), Opcode: verbs.OpSend, Flags: flags | verbs.SendSignaled,
		Addr: t.sendMR.Addr() + uint64(slot*slotBytes), Length: uint32(len(b)), LKey: t.sendMR.LKey(),
		AH: ah, RemoteQPN: qpn})
	if err != nil {
		return err
	}
	t.sendFree = t.sendFree[:len(t.sendFree)-1]
	t.sendAH[slot] = answer
	if answer != nil {
		answer.inFlight++
	}
	return nil
}

func (t *Transport) postRecv(slot int) error {
	return t.qp.PostRecv(uint64(recvID+slot), t.recvMR.Addr()+uint64(slot*slotBytes), slotBytes, t.recvMR.LKey())
}

// ErrGone is the loop's error when the device was removed under it.
var ErrGone = errors.New("the RDMA device is gone")

// Run is the loop: until ctx ends or the QP fails, it takes completions,
// answers probes, hands replies to p and runs p's ticks. It returns nil
// when ctx ends, else the error that stopped it (ErrGone, wrapped, for a
// device removed).
func (t *Transport) Run(ctx context.Context, p probe.Driven) error {
	next := p.Tick(t.nowNS())
	lastCheck := time.Now()
	for {
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(lastCheck) > time.Second {
			lastCheck = time.Now()
			if !t.Present() {
				return fmt.Errorf("%s: %w", t.cfg.Device, ErrGone)
			}
		}
		n, err := t.drain(p)
		if err != nil {
			return err
		}
		if now := t.nowNS(); now >= next {
			next = p.Tick(now)
			continue
		}
		if n > 0 {
			continue
		}
		// Arm, then poll once more: a completion between the last poll
		// and the arming raises no event.
		if err := t.cq.RequestNotify(); err != nil {
			return err
		}
		if n, err = t.drain(p); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		wait := time.Duration(next - t.nowNS())
		if next < t.nowNS() {
			wait = 0
		}
		// ctx and the device's presence are checked this often: an idle
		// agent wakes once a second, and stops within one.
		wait = min(wait, time.Second)
		if _, err := t.ch.Wait(wait); err != nil {
			return err
		}
	}
}

// drain polls the CQ empty and handles what it held.
func (t *Transport) drain(p probe.Driven) (int, error) {
	total := 0
	for {
		wcs, err := t.cq.Poll(16)
		if err != nil {
			return total, err
		}
		if len(wcs) == 0 {
			return total, nil
		}
		total += len(wcs)
		at := t.nowNS()
		for _, wc := range wcs {
			if wc.WRID < recvID {
				t.sendDone(wc)
				continue
			}
			if err := t.received(wc, at, p); err != nil {
				return total, err
			}
		}
	}
}

func (t *Transport) sendDone(wc verbs.Completion) {
	slot := int(wc.WRID)
	if slot < 0 || slot >= sendSlots {
		return
	}
	if a := t.sendAH[slot]; a != nil {
		a.inFlight--
		t.sendAH[slot] = nil
	}
	t.sendFree = append(t.sendFree, slot)
	if wc.Status != verbs.WCSuccess {
		t.count(func(s *Stats) { s.SendError++ })
	}
}

// received handles one receive and posts its buffer again.
func (t *Transport) received(wc verbs.Completion, atNS uint64, p probe.Driven) error {
	slot := int(wc.WRID) - recvID
	if slot < 0 || slot >= recvSlots {
		return fmt.Errorf("receive completion with work request %d: not one of ours", wc.WRID)
	}
	if wc.Status == verbs.WCWRFlushErr {
		return fmt.Errorf("receive flushed: %w", wc.Err())
	}
	if wc.Status != verbs.WCSuccess {
		t.count(func(s *Stats) { s.RecvError++ })
		return t.postRecv(slot)
	}
	buf := t.recvB.Bytes()[slot*slotBytes : (slot+1)*slotBytes]
	t.handle(buf, wc, atNS, p)
	return t.postRecv(slot)
}

func (t *Transport) handle(buf []byte, wc verbs.Completion, atNS uint64, p probe.Driven) {
	n := int(wc.ByteLen)
	if n < wire.GRHSize || n > len(buf) {
		t.bad(fmt.Sprintf("a datagram of %d bytes with its GRH", n))
		return
	}
	m, err := wire.Unmarshal(buf[wire.GRHSize:n])
	if err != nil {
		t.bad(fmt.Sprintf("from QP %d: %v", wc.SrcQP, err))
		return
	}
	var src probe.Source
	src.QPN = wc.SrcQP
	if wc.HasGRH {
		if src.GID, err = wire.SourceGID(buf[:wire.GRHSize]); err != nil {
			t.bad(fmt.Sprintf("from QP %d: %v (header %x)", wc.SrcQP, err, buf[:wire.GRHSize]))
			return
		}
	}
	at := atNS // the loop's clock
	if t.clock == wire.ClockCQE {
		at = t.ticksNS(wc.Timestamp)
	}
	if m.Kind == wire.KindReply {
		p.Reply(probe.Reply{Msg: m, From: src, AtNS: at, ArrivedNS: atNS})
		return
	}
	t.answer(m, src, wc.SLID, at)
}

func (t *Transport) bad(why string) {
	t.count(func(s *Stats) { s.Bad++; s.LastBad = why })
}

// answer replies to a probe at once, within the answer rate; atNS is when
// it came, on the timestamp clock.
func (t *Transport) answer(m wire.Message, src probe.Source, slid uint16, atNS uint64) {
	now := time.Now()
	t.bucket = min(t.cfg.AnswerRate, t.bucket+now.Sub(t.bucketAt).Seconds()*t.cfg.AnswerRate)
	t.bucketAt = now
	if t.bucket < 1 {
		t.count(func(s *Stats) { s.Refused++ })
		return
	}
	t.bucket--
	k := ahKey{gid: src.GID, lid: slid}
	a, ok := t.answerAHs[k]
	if !ok {
		if len(t.answerAHs) >= maxAnswerAHs && !t.evictAnswerAH() {
			t.count(func(s *Stats) { s.Refused++ })
			return
		}
		ah, err := t.pd.CreateAH(verbs.Endpoint{GID: src.GID, LID: slid}, t.cfg.Port, t.gidIdx)
		if err != nil {
			t.count(func(s *Stats) { s.Refused++ })
			return
		}
		a = &answerAH{ah: ah}
		t.answerAHs[k] = a
	}
	a.used = now
	stamp, err := t.stamp()
	if err != nil {
		t.count(func(s *Stats) { s.Refused++ })
		return
	}
	hold := time.Duration(0)
	if stamp > atNS {
		hold = time.Duration(stamp - atNS)
	}
	if err := t.post(a.ah, src.QPN, m.Reply(min(hold, wire.MaxHold), t.Clock()), a); err != nil {
		t.count(func(s *Stats) { s.Refused++ })
		return
	}
	t.count(func(s *Stats) { s.Answered++ })
}

// evictAnswerAH frees the least recently used answer AH with no reply in
// flight (a UD send may read its AH until it completes).
func (t *Transport) evictAnswerAH() bool {
	var oldK ahKey
	var old *answerAH
	for k, a := range t.answerAHs {
		if a.inFlight == 0 && (old == nil || a.used.Before(old.used)) {
			oldK, old = k, a
		}
	}
	if old == nil {
		return false
	}
	old.ah.Close()
	delete(t.answerAHs, oldK)
	return true
}
