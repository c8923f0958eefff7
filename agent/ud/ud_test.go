package ud

// The transport on the zero-cost NIC (csrc/fakeverbs): two UD endpoints on
// fake0 probe each other through address handles, take a peer's garbage,
// and fail cleanly on bad devices and closed objects. TestMain runs this
// binary again on the stand-in (internal/testenv); the stand-in has no
// completion timestamps and no completion events, so the tests drive the
// loop's drain themselves and Run's part is its error.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/wire"
	"github.com/rdmabench/rdmabench/internal/testenv"
	"github.com/rdmabench/rdmabench/verbs"
)

func TestMain(m *testing.M) { testenv.FakeVerbsMain(m, verbs.LeakReport) }

// fake0GID is the stand-in's fake0: ::ffff:127.0.0.1.
var fake0GID = [16]byte{10: 0xff, 11: 0xff, 12: 127, 15: 1}

// end is a transport and what its loop has handed the prober.
type end struct {
	*Transport
	replies []probe.Reply
}

func (e *end) Tick(now uint64) uint64 { return now + uint64(time.Hour) }
func (e *end) Reply(r probe.Reply)    { e.replies = append(e.replies, r) }

func openEnd(t *testing.T, rate float64) *end {
	t.Helper()
	testenv.NeedFakeVerbs(t)
	tr, err := Open(Config{Device: "fake0", GIDIndex: -1, AnswerRate: rate, SysRoot: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &end{Transport: tr}
}

// pump drains the ends' CQs, as their loops would, until done says so.
func pump(t *testing.T, done func() bool, ends ...*end) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !done(); {
		for _, e := range ends {
			if _, err := e.drain(e); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("timed out pumping the CQs")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestOpenOnFakeNIC(t *testing.T) {
	e := openEnd(t, 100)
	a := e.Address("host-a", "fake0")
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	if a.QPN == 0 || a.QKey != verbs.UDQKey || !bytes.Equal(a.GID, fake0GID[:]) || a.LID != 0 {
		t.Errorf("address %+v: want fake0's GID, a QPN, Q_Key %#x, LID 0", a, verbs.UDQKey)
	}
	// No completion timestamps on the stand-in: the CPU's clock, and why.
	if e.Clock() != wire.ClockCPU || a.Clock != wire.ClockCPU || !strings.Contains(e.ClockNote(), "no completion timestamps on fake0") {
		t.Errorf("clock %v, note %q: want the CPU's, saying why", e.Clock(), e.ClockNote())
	}
	if e.Device() != "fake0" || !e.Present() {
		t.Errorf("device %q, present %v", e.Device(), e.Present())
	}
}

func TestProbeAndReply(t *testing.T) {
	a, b := openEnd(t, 1000), openEnd(t, 1000)
	d, err := a.Resolve(b.Address("host-b", "fake0"))
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Source(); got.GID != fake0GID || got.QPN != b.qp.Num() {
		t.Fatalf("destination %+v, want fake0's GID and QPN %d", got, b.qp.Num())
	}
	const n = 3
	var sent [n]uint64
	for i := range n {
		if sent[i], err = a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU, Session: 7, Seq: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	pump(t, func() bool { return len(a.replies) == n }, a, b)
	for i, r := range a.replies {
		m := r.Msg
		if m.Kind != wire.KindReply || m.Session != 7 || m.Seq != uint64(i) || m.SentNS != sent[i] || m.Clock != wire.ClockCPU {
			t.Errorf("reply %d: %+v, want the reply to seq %d sent at %d", i, m, i, sent[i])
		}
		if r.From.GID != fake0GID || r.From.QPN != b.qp.Num() {
			t.Errorf("reply %d from %+v, want QP %d on fake0", i, r.From, b.qp.Num())
		}
		if r.AtNS < m.SentNS || r.ArrivedNS < r.AtNS || m.Hold < 0 {
			t.Errorf("reply %d: sent %d, at %d, arrived %d, hold %v: out of order", i, m.SentNS, r.AtNS, r.ArrivedNS, m.Hold)
		}
	}
	if s := b.Stats(); s.Answered != n || s.Bad != 0 || s.Refused != 0 || s.RecvError != 0 {
		t.Errorf("responder's stats %+v, want %d answered and nothing else", s, n)
	}
	// One address handle a peer, each way, however many datagrams.
	if len(a.probeAHs) != 1 || len(b.answerAHs) != 1 {
		t.Errorf("%d probe AHs, %d answer AHs: want 1 each", len(a.probeAHs), len(b.answerAHs))
	}
	// Every send completed: the rings are whole again.
	if len(a.sendFree) != sendSlots || len(b.sendFree) != sendSlots {
		t.Errorf("send slots free: %d and %d, want %d", len(a.sendFree), len(b.sendFree), sendSlots)
	}
}

// The answer rate bounds the replies whoever probes.
func TestAnswerRateRefuses(t *testing.T) {
	a, b := openEnd(t, 1000), openEnd(t, 2) // b answers 2 at once, then 2 a second
	d, err := a.Resolve(b.Address("host-b", "fake0"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range 5 {
		if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU, Seq: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	pump(t, func() bool { s := b.Stats(); return s.Answered+s.Refused == 5 }, a, b)
	// 2 at once, and 2 a second more on a host slow enough to take that long.
	most := min(5, 2+int(2*time.Since(start).Seconds()))
	if s := b.Stats(); s.Answered < 2 || s.Answered > uint64(most) || s.Refused != 5-s.Answered {
		t.Errorf("stats %+v: want 2 to %d answered, the rest refused", s, most)
	}
}

func TestResolve(t *testing.T) {
	a, b := openEnd(t, 10), openEnd(t, 10)
	good := b.Address("host-b", "fake0")
	for _, tc := range []struct {
		name string
		edit func(*wire.Address)
		want string
	}{
		{"another version", func(x *wire.Address) { x.Version++ }, "version"},
		{"another Q_Key", func(x *wire.Address) { x.QKey++ }, "Q_Key"},
		{"a short GID", func(x *wire.Address) { x.GID = x.GID[:4] }, "GID"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := good
			x.GID = append([]byte(nil), good.GID...)
			tc.edit(&x)
			if _, err := a.Resolve(x); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Resolve: %v, want an error about %s", err, tc.want)
			}
		})
	}
	// Every QP of one GID shares an address handle.
	other := good
	other.QPN++
	for _, x := range []wire.Address{good, other} {
		if _, err := a.Resolve(x); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.probeAHs) != 1 {
		t.Errorf("%d address handles for one GID", len(a.probeAHs))
	}
}

// rawSend posts payload from e's QP to QP qpn through AH ah, bypassing the
// message format: what a broken or hostile peer sends. Its send slot is
// the ring's, so the loop frees it as any other.
func rawSend(t *testing.T, e *end, ah *verbs.AH, qpn uint32, payload []byte) {
	t.Helper()
	buf, err := verbs.AllocBuffer(max(len(payload), 1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { buf.Close() })
	copy(buf.Bytes(), payload)
	mr, err := e.pd.RegisterMR(buf, verbs.AccessLocalWrite)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mr.Close() })
	slot := e.sendFree[len(e.sendFree)-1]
	e.sendFree = e.sendFree[:len(e.sendFree)-1]
	if err := e.qp.PostSend(verbs.SendWR{ID: uint64(slot), Opcode: verbs.OpSend, Flags: verbs.SendSignaled,
		Addr: mr.Addr(), Length: uint32(len(payload)), LKey: mr.LKey(), AH: ah, RemoteQPN: qpn}); err != nil {
		t.Fatal(err)
	}
}

// A peer's garbage is counted and dropped, never a panic, and costs the
// receiver nothing beyond its fixed ring: the receive is posted again and
// the next probe is answered.
func TestGarbageDatagrams(t *testing.T) {
	valid := make([]byte, wire.Size)
	if _, err := (wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU}).Marshal(valid); err != nil {
		t.Fatal(err)
	}
	notOurs := bytes.Repeat([]byte{0xff}, wire.Size)
	for _, tc := range []struct {
		name    string
		payload []byte
		bad     uint64 // at the receiver: not an agent message
		recvErr uint64 // at the receiver: longer than its receive
		sendErr uint64 // at the sender: longer than the MTU
		why     string // the receiver's LastBad
	}{
		{"empty", nil, 1, 0, 0, "0 bytes"},
		{"short", []byte("hello"), 1, 0, 0, "wrong length"},
		{"one byte short", valid[:wire.Size-1], 1, 0, 0, "wrong length"},
		{"one byte long", append(append([]byte(nil), valid...), 0), 1, 0, 0, "wrong length"},
		{"not an agent's", notOurs, 1, 0, 0, wire.ErrMagic.Error()},
		{"longer than a receive", make([]byte, slotBytes), 0, 1, 0, ""},
		{"the MTU", make([]byte, 4096), 0, 1, 0, ""},
		{"over the MTU", make([]byte, 4097), 0, 0, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := openEnd(t, 1000), openEnd(t, 1000)
			ah, err := a.pd.CreateAH(verbs.Endpoint{GID: b.gid}, b.cfg.Port, a.gidIdx)
			if err != nil {
				t.Fatal(err)
			}
			rawSend(t, a, ah, b.qp.Num(), tc.payload)
			pump(t, func() bool {
				sa, sb := a.Stats(), b.Stats()
				return len(a.sendFree) == sendSlots && sb.Bad+sb.RecvError+sa.SendError > 0
			}, a, b)
			sa, sb := a.Stats(), b.Stats()
			if sb.Bad != tc.bad || sb.RecvError != tc.recvErr || sa.SendError != tc.sendErr || sb.Answered != 0 {
				t.Errorf("receiver %+v, sender %+v: want %d bad, %d receive errors, %d send errors", sb, sa, tc.bad, tc.recvErr, tc.sendErr)
			}
			if !strings.Contains(sb.LastBad, tc.why) {
				t.Errorf("last bad %q, want it to say %q", sb.LastBad, tc.why)
			}
			// The receiver goes on: a real probe is answered.
			d, err := a.Resolve(b.Address("host-b", "fake0"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU, Seq: 1}); err != nil {
				t.Fatal(err)
			}
			pump(t, func() bool { return len(a.replies) == 1 }, a, b)
		})
	}
}

// A datagram to nobody is lost as on a network: the send succeeds and no
// reply comes.
func TestProbeToNobody(t *testing.T) {
	a := openEnd(t, 10)
	gone := a.Address("host-a", "fake0")
	gone.QPN ^= 0x800000 // no such QP
	d, err := a.Resolve(gone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU}); err != nil {
		t.Fatal(err)
	}
	pump(t, func() bool { return len(a.sendFree) == sendSlots }, a)
	if s := a.Stats(); s.SendError != 0 || len(a.replies) != 0 {
		t.Errorf("stats %+v, %d replies: want a silent loss", s, len(a.replies))
	}
}

func TestOpenErrors(t *testing.T) {
	testenv.NeedFakeVerbs(t)
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no answer rate", Config{Device: "fake0"}, "answer rate"},
		{"no such device", Config{Device: "mlx5_9", AnswerRate: 1}, "mlx5_9"},
		{"no such port", Config{Device: "fake0", Port: 2, AnswerRate: 1}, "port"},
		{"no such GID entry", Config{Device: "fake0", GIDIndex: 200, AnswerRate: 1}, "gid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.SysRoot = t.TempDir()
			tr, err := Open(tc.cfg)
			if err == nil {
				tr.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
			// A failed Open leaves nothing open, its buffers included.
			if leaks := verbs.LeakReport(); leaks != "" {
				t.Errorf("after a failed Open: %s", leaks)
			}
		})
	}
}

// Close frees everything, address handles included, whatever is still
// cached; after it every call fails with ErrClosed, none crashes.
func TestCloseOrder(t *testing.T) {
	a, b := openEnd(t, 10), openEnd(t, 10)
	d, err := a.Resolve(b.Address("host-b", "fake0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU}); err != nil {
		t.Fatal(err)
	}
	pump(t, func() bool { return len(a.replies) == 1 }, a, b)
	// b closes with an answer AH cached and a probe on its way to it.
	if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []*end{b, a} {
		if err := e.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("second close: %v", err)
		}
	}
	if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU}); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("send after close: %v, want ErrClosed", err)
	}
	if _, err := a.Resolve(b.Address("host-b", "fake0")); err != nil && !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("resolve after close: %v, want ErrClosed or the cached handle", err)
	}
	if _, err := a.drain(a); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("drain after close: %v, want ErrClosed", err)
	}
	if err := a.Run(context.Background(), a); !errors.Is(err, verbs.ErrClosed) {
		t.Errorf("run after close: %v, want ErrClosed", err)
	}
	if leaks := verbs.LeakReport(); leaks != "" {
		t.Errorf("after Close: %s", leaks)
	}
}

// The stand-in raises no completion events: Run says so and returns, and
// a cancelled Run returns nil at once.
func TestRun(t *testing.T) {
	e := openEnd(t, 10)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Run(ctx, e); err != nil {
		t.Errorf("cancelled: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(context.Background(), e) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "notify") {
			t.Errorf("run: %v, want the CQ's refusal to notify", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// responderEnv makes TestResponderChild the other process of
// TestProbeAnotherProcess.
const responderEnv = "UD_TEST_RESPONDER"

// Agents are processes of their own: a probe crosses into another
// process's QP and registered ring (the stand-in's shared memory) and its
// reply comes back.
func TestProbeAnotherProcess(t *testing.T) {
	a := openEnd(t, 10)
	cmd := exec.Command(os.Args[0], "-test.run=^TestResponderChild$")
	cmd.Env = append(os.Environ(), responderEnv+"=1")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		in.Close() // the responder's cue to close and exit
		if err := cmd.Wait(); err != nil {
			t.Errorf("responder: %v\n%s", err, stderr.String())
		}
	}()
	var addr wire.Address
	if err := json.NewDecoder(out).Decode(&addr); err != nil {
		t.Fatalf("the responder's address: %v\n%s", err, stderr.String())
	}
	d, err := a.Resolve(addr)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := a.Send(d, wire.Message{Kind: wire.KindProbe, Clock: wire.ClockCPU, Seq: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	pump(t, func() bool { return len(a.replies) == 3 }, a)
	for i, r := range a.replies {
		if r.Msg.Seq != uint64(i) || r.From.QPN != addr.QPN {
			t.Errorf("reply %d: %+v from %+v, want seq %d from QP %d", i, r.Msg, r.From, i, addr.QPN)
		}
	}
}

// TestResponderChild is TestProbeAnotherProcess's other process: it
// prints its address record and answers probes until its stdin closes.
func TestResponderChild(t *testing.T) {
	if os.Getenv(responderEnv) != "1" {
		t.Skip("run by TestProbeAnotherProcess")
	}
	e := openEnd(t, 10)
	if err := json.NewEncoder(os.Stdout).Encode(e.Address("responder", "fake0")); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(closed)
	}()
	for {
		select {
		case <-closed:
			return
		default:
		}
		if _, err := e.drain(e); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
}
