package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/rdmabench/rdmabench/proto"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/auth"
	"github.com/rdmabench/rdmabench/csrc"
	rbplan "github.com/rdmabench/rdmabench/plan"
)

// ServerConfig is the server side: which device it offers, where it logs,
// and what a client may make it do.
type ServerConfig struct {
	Device DeviceConfig
	Log    io.Writer // one line per client and per failure; nil discards
	// MaxClients ends Serve after that many clients have had their turn on
	// the device; 0 serves forever. Connections dropped before (idle,
	// garbage, a wrong token, a refused plan) do not count.
	MaxClients int
	Budget     Budget
	// Token, when set, is what a client must prove it holds (package auth)
	// before its plan is read.
	Token []byte
	// MaxHandshakes bounds the connections between accept and their turn
	// on the device (greeting, token, plan, waiting); more are closed at
	// once. 0: DefaultMaxHandshakes.
	MaxHandshakes int
	// HandshakeTimeout bounds one connection's greeting, token exchange and
	// plan; 0: the package's HandshakeTimeout.
	HandshakeTimeout time.Duration
	// QueueTimeout bounds how long a client whose plan passed waits while
	// another client's run holds the device; then it is told the server is
	// busy. 0: DefaultQueueTimeout.
	QueueTimeout time.Duration

	// session, when set, replaces the device part of serving a client, so
	// that host tests exercise the accept loop without hardware.
	session func(ctx context.Context, conn *proto.Conn, h *hello) error
}

// Defaults of ServerConfig.
const (
	DefaultMaxHandshakes = 16
	DefaultQueueTimeout  = 30 * time.Second
)

// Budget bounds what one client's plan may make the server allocate and
// run. Every plan is checked against it before anything is allocated.
type Budget struct {
	MaxMem     int64 // registered bytes; 0: DefaultMaxMem()
	MaxQPs     int   // 0: plan.MaxQPs
	MaxThreads int   // loop threads; 0: DefaultMaxThreads
	// Loopback: the server side of a --loopback run, in the client's own
	// process. There is no serve to configure: QPs and threads are the
	// plan's own bounds (what --help claims), memory this host's.
	Loopback bool
}

// DefaultMaxThreads bounds a server's loop threads unless told otherwise.
const DefaultMaxThreads = 64

// DefaultMaxMem is a quarter of the RAM, or the memlock limit when lower and
// it applies (it does not to root, who may lock without limit).
func DefaultMaxMem() int64 {
	var si unix.Sysinfo_t
	mem := int64(1) << 30
	if unix.Sysinfo(&si) == nil {
		mem = int64(si.Totalram) * int64(si.Unit) / 4
	}
	var rl unix.Rlimit
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_MEMLOCK, &rl) == nil && rl.Cur != unix.RLIM_INFINITY {
		mem = min(mem, int64(rl.Cur))
	}
	return mem
}

// check refuses a plan beyond the budget, with the one-line reason the
// client prints; also are the plans its side must hold too
// (ClientConfig.Also), whose buffer may be larger.
func (b Budget) check(plan Plan, also []Plan) error {
	maxMem, maxQPs, maxThreads := b.MaxMem, b.MaxQPs, b.MaxThreads
	if maxMem <= 0 {
		maxMem = DefaultMaxMem()
	}
	if maxQPs <= 0 {
		maxQPs = rbplan.MaxQPs
	}
	if maxThreads <= 0 {
		maxThreads = DefaultMaxThreads
	}
	if b.Loopback {
		maxQPs, maxThreads = math.MaxInt, math.MaxInt
	}
	// The loads' sides are opened and held alongside the plan's.
	qps, threads, mem := plan.MaxQPs(), loopThreads(plan), widen(DeviceConfig{}, plan, also, 0, true).mem.Bytes()
	for _, l := range plan.Loads {
		qps, threads, mem = qps+l.MaxQPs(), threads+loopThreads(l), mem+PlanMemory(l)
	}
	if qps > maxQPs {
		return fmt.Errorf("the plan needs %d QPs, this server allows %d (serve --max-qps)", qps, maxQPs)
	}
	if threads > maxThreads {
		return fmt.Errorf("the plan needs %d loop threads, this server allows %d (serve --max-threads)", threads, maxThreads)
	}
	if mem > maxMem && b.Loopback {
		return fmt.Errorf("the plan needs %s of registered memory on each side, this host allows one side %s (a quarter of RAM, or the memlock limit: ulimit -l)", humanBytes(mem), humanBytes(maxMem))
	}
	if mem > maxMem {
		return fmt.Errorf("the plan needs %s of registered memory, this server allows %s (serve --max-mem)", humanBytes(mem), humanBytes(maxMem))
	}
	return nil
}

// humanBytes writes n in binary units.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// Serve accepts clients and runs the plan each sends, one at a time on the
// device. Every connection's handshake (greeting, token, plan, budget) runs
// on its own goroutine within the handshake timeout, so an idle or hostile
// connection holds up no one; a client whose plan passes while another runs
// waits its turn, at most QueueTimeout. A client that fails, dies or speaks
// garbage is logged and the next served. Serve returns once ctx ends (or
// MaxClients were served) and every connection's goroutine has ended.
func Serve(ctx context.Context, ln net.Listener, cfg ServerConfig) error {
	sv := newServer(cfg)
	// hsCtx ends the accept loop and every connection not yet on the
	// device: when ctx ends, or once the last client of MaxClients has its
	// turn. A running client ends with ctx only.
	hsCtx, endAccept := context.WithCancel(ctx)
	defer endAccept()
	stop := context.AfterFunc(hsCtx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	var acceptErr error
	for {
		nc, err := ln.Accept()
		if err != nil {
			if hsCtx.Err() == nil {
				acceptErr = fmt.Errorf("accept: %w", err)
			}
			break
		}
		select {
		case sv.slots <- struct{}{}:
		default:
			sv.logf("client %s: refused: %d connections already in their handshake or waiting (serve --max-handshakes)", nc.RemoteAddr(), cap(sv.slots))
			nc.Close()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sv.handle(ctx, hsCtx, endAccept, proto.NewConn(nc))
		}()
	}
	endAccept() // an accept error: drop the handshakes too
	wg.Wait()
	return acceptErr
}

// server is what Serve's connections share.
type server struct {
	cfg          ServerConfig
	hsTimeout    time.Duration
	queueTimeout time.Duration
	slots        chan struct{} // one per connection not yet on the device
	device       chan struct{} // held by the client whose run has the device
	logMu        sync.Mutex
	log          io.Writer
	mu           sync.Mutex
	served       int
}

func newServer(cfg ServerConfig) *server {
	sv := &server{cfg: cfg, hsTimeout: cfg.HandshakeTimeout, queueTimeout: cfg.QueueTimeout, log: cfg.Log, device: make(chan struct{}, 1)}
	if sv.hsTimeout <= 0 {
		sv.hsTimeout = proto.HandshakeTimeout
	}
	if sv.queueTimeout <= 0 {
		sv.queueTimeout = DefaultQueueTimeout
	}
	n := cfg.MaxHandshakes
	if n <= 0 {
		n = DefaultMaxHandshakes
	}
	sv.slots = make(chan struct{}, n)
	if sv.log == nil {
		sv.log = io.Discard
	}
	if sv.cfg.session == nil {
		sv.cfg.session = func(ctx context.Context, conn *proto.Conn, h *hello) error { return serveSession(ctx, conn, cfg, h) }
	}
	return sv
}

// logf writes one line; connections log from their own goroutines.
func (sv *server) logf(format string, a ...any) {
	sv.logMu.Lock()
	defer sv.logMu.Unlock()
	fmt.Fprintf(sv.log, format+"\n", a...)
}

// errStopping is why a connection not yet on the device is dropped at the end.
var errStopping = errors.New("dropped: the server is stopping")

func (sv *server) handle(ctx, hsCtx context.Context, endAccept func(), conn *proto.Conn) {
	peer := conn.RemoteAddr()
	defer conn.Close()
	if err := sv.serveConn(ctx, hsCtx, endAccept, conn); err != nil {
		sv.logf("client %s: %v", peer, err)
	} else {
		sv.logf("client %s: done", peer)
	}
}

// serveConn takes one connection through its handshake, its wait for the
// device and its session. Until its turn, the end of hsCtx closes it.
func (sv *server) serveConn(ctx, hsCtx context.Context, endAccept func(), conn *proto.Conn) error {
	unhook := context.AfterFunc(hsCtx, func() { conn.Close() })
	h, err := sv.handshake(conn)
	if err == nil {
		err = sv.waitTurn(hsCtx, conn)
	}
	<-sv.slots
	if !unhook() { // closed by the end of hsCtx
		if err == nil {
			<-sv.device
		}
		return errStopping
	}
	if err != nil {
		return err
	}
	defer func() { <-sv.device }()
	sv.mu.Lock()
	full := sv.cfg.MaxClients > 0 && sv.served >= sv.cfg.MaxClients
	if !full {
		sv.served++
	}
	last := sv.cfg.MaxClients > 0 && sv.served == sv.cfg.MaxClients
	sv.mu.Unlock()
	if full {
		return refuse(conn, errors.New("the server has served its --max-clients and is exiting"))
	}
	if last {
		endAccept()
	}
	// Ctrl-C ends the session: closing the connection ends every wait in
	// it, and the loops stop on ctx themselves.
	stopOnCancel := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopOnCancel()
	return sv.cfg.session(ctx, conn, h)
}

// hello is what a client's handshake settled: its plan, checked, and its
// endpoints; the plans that follow it, and whether it asks to run on the
// last plan's QPs.
type hello struct {
	plan        Plan
	remote      []proto.Endpoint
	loadRemotes [][]proto.Endpoint
	also        []Plan
	reuse       bool
}

// handshake runs a connection up to an accepted plan within the handshake
// timeout: the greeting, the token exchange, the plan and its checks.
// Nothing is allocated for the client before it ends.
func (sv *server) handshake(conn *proto.Conn) (*hello, error) {
	deadline := time.Now().Add(sv.hsTimeout)
	if _, err := conn.ReadGreeting(sv.hsTimeout); err != nil {
		if errors.Is(err, proto.ErrVersion) {
			_ = conn.SendGreeting(false, time.Until(deadline)) // let the client see our version too
		}
		return nil, err
	}
	token := sv.cfg.Token
	if err := conn.SendGreeting(token != nil, time.Until(deadline)); err != nil {
		return nil, err
	}
	if token != nil {
		conn.SetDeadline(deadline)
		if err := auth.Challenge(conn.ReadWriter(), token); err != nil {
			return nil, challengeErr(err, sv.hsTimeout)
		}
	}
	m, err := conn.Expect(proto.KindPlan, time.Until(deadline))
	if errors.Is(err, proto.ErrSilent) {
		// A client that greeted us is one: tell it why it is dropped, or
		// it can only say that we closed the connection.
		return nil, refuse(conn, fmt.Errorf("no plan within the server's handshake limit of %v after the connection", sv.hsTimeout))
	}
	if err != nil {
		return nil, err
	}
	return planHello(conn, m, sv.cfg.Budget)
}

// planHello checks a client's plan message (the first of a session, or a
// next one) before anything is allocated for it, and refuses it with the
// reason.
func planHello(conn *proto.Conn, m proto.Message, budget Budget) (*hello, error) {
	if m.Plan == nil {
		return nil, refuse(conn, errors.New("plan message without a plan"))
	}
	plan := *m.Plan
	if err := plan.Validate(); err != nil {
		return nil, refuse(conn, fmt.Errorf("invalid plan: %w", err))
	}
	for i, p := range m.Also {
		if err := p.Validate(); err != nil {
			return nil, refuse(conn, fmt.Errorf("invalid plan %d to follow: %w", i+1, err))
		}
	}
	if len(m.Endpoints) != plan.MaxQPs() {
		return nil, refuse(conn, fmt.Errorf("plan needs %d QPs, the client offers %d", plan.MaxQPs(), len(m.Endpoints)))
	}
	if err := budget.check(plan, m.Also); err != nil {
		return nil, refuse(conn, err)
	}
	return &hello{plan: plan, remote: m.Endpoints, loadRemotes: m.LoadEndpoints, also: m.Also, reuse: m.Reuse}, nil
}

// challengeErr says in one line why a client failed the token exchange.
func challengeErr(err error, timeout time.Duration) error {
	var ne net.Error
	switch {
	case errors.Is(err, auth.ErrDenied):
		return errors.New("wrong token: the client does not hold this server's token")
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("no answer to the token challenge within %v", timeout)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return errors.New("it closed the connection without answering the token challenge (a client without a token?)")
	}
	return err
}

// waitTurn takes the device, or tells the client that another client's run
// holds it and waits at most the queue timeout.
func (sv *server) waitTurn(hsCtx context.Context, conn *proto.Conn) error {
	select {
	case sv.device <- struct{}{}:
		return nil
	default:
	}
	if err := conn.Send(proto.Message{Type: proto.KindQueued, Wait: sv.queueTimeout}, sv.hsTimeout); err != nil {
		return err
	}
	t := time.NewTimer(sv.queueTimeout)
	defer t.Stop()
	select {
	case sv.device <- struct{}{}:
		return nil
	case <-t.C:
		return refuse(conn, fmt.Errorf("server busy: another client's run still holds the device after %v of waiting; try again later", sv.queueTimeout))
	case <-hsCtx.Done():
		return errStopping
	}
}

// serveSession runs a client's plans on the device, one after another
// over its connection (engine.Session). Each plan's side is opened for it
// and closed before the next plan's is, so a session holds one plan's
// resources at a time; a plan that names the plans to follow
// (ClientConfig.Also) keeps its side, connected, until the next plan,
// which runs on it when the client asks and it fits. Every way out closes
// the kept side.
func serveSession(ctx context.Context, conn *proto.Conn, cfg ServerConfig, h *hello) error {
	dc := cfg.Device
	dc.fromEnd = true
	var held *heldSide
	defer func() { held.close() }()
	for h != nil {
		reuse := takeHeld(&held, dc, h)
		var err error
		if h.reuse && reuse == nil {
			// Ours did not fit: the client sends the plan again with new QPs.
			if err := conn.Send(proto.Message{Type: proto.KindAccept}, proto.HandshakeTimeout); err != nil {
				return err
			}
			if h, err = awaitPlan(conn, cfg, h.plan); err != nil {
				return err
			}
			continue
		}
		if h, held, err = servePlan(ctx, conn, cfg, h, reuse); err != nil {
			return err
		}
	}
	return nil
}

// heldSide is a served plan's side kept for the session's next plan, with
// the client's endpoints its QPs are connected to.
type heldSide struct {
	s      *side
	remote []proto.Endpoint
}

func (hs *heldSide) close() {
	if hs != nil {
		hs.s.Close()
	}
}

// takeHeld returns the held side readied for h's plan when the client
// asks to reuse it, with the QPs it was connected to, and it fits the
// plan; otherwise it closes it. Nothing is held after it.
func takeHeld(held **heldSide, dc DeviceConfig, h *hello) *heldSide {
	hs := *held
	*held = nil
	if hs == nil {
		return nil
	}
	if h.reuse && slices.Equal(h.remote, hs.remote) && hs.s.fits(dc, h.plan, true) == nil &&
		checkPeer(hs.remote, h.plan) == nil && hs.s.retarget(dc, h.plan) == nil {
		return hs
	}
	hs.close()
	return nil
}

// awaitPlan waits for the client's next plan (nil: its bye) after plan.
func awaitPlan(conn *proto.Conn, cfg ServerConfig, plan Plan) (*hello, error) {
	return nextPlan(conn, cfg, plan, nil)
}

// servePlan runs an accepted plan on the device: allocate and connect (or
// take reuse, the last plan's side), then one measurement per "run" until
// "bye" (nil) or the client's next plan, checked, which it returns. The
// side is closed, or returned to be held for that next plan when this
// one named plans to follow and its QPs may serve them.
func servePlan(ctx context.Context, conn *proto.Conn, cfg ServerConfig, h *hello, reuse *heldSide) (next *hello, keep *heldSide, err error) {
	plan := h.plan
	sides := &planSides{}
	if reuse != nil {
		sides.s = reuse.s
		sides.local, err = sides.s.endpoints()
	} else {
		err = openServed(conn, cfg, h, sides)
	}
	defer func() {
		if keep == nil {
			sides.Close()
		}
	}()
	if err != nil {
		return nil, nil, refuse(conn, err)
	}
	s := sides.s
	info := &proto.SideInfo{CPUs: s.cpus, Inline: s.inline, Notes: s.notes, Memory: &s.mem.desc}
	acc := proto.Message{Type: proto.KindAccept, Endpoints: sides.local, LoadEndpoints: sides.loadLocal, Info: info, Reused: reuse != nil}
	if err := conn.Send(acc, proto.HandshakeTimeout); err != nil {
		return nil, nil, err
	}
	stop := csrc.NewFlag()
	defer stop.Free()
	sr := &serverRun{session{plan: plan, s: s, conn: conn, remote: h.remote, stop: stop, loads: sides.loads}}
	if next, err = sr.serveSteps(ctx, cfg); err == nil && next != nil && reusable(plan, h.also) {
		if sides.loads != nil {
			sides.loads.Close() // empty: a plan with loads is not kept
		}
		keep = &heldSide{s: s, remote: h.remote}
	}
	return next, keep, err
}

// openServed opens, connects and describes the server's side of h's plan
// and its loads into sides; on an error the caller closes what it holds.
func openServed(conn *proto.Conn, cfg ServerConfig, h *hello, sides *planSides) (err error) {
	plan := h.plan
	dc := cfg.Device
	dc.fromEnd = true
	if sides.s, err = openSide(dc, plan, h.also, plan.PeerMemory); err != nil {
		return err
	}
	if err := sides.s.connect(h.remote, plan); err != nil {
		return err
	}
	if sides.local, err = sides.s.endpoints(); err != nil {
		return err
	}
	// Closed before the side; the receive loops of send loads are stopped
	// and joined inside each step.
	if sides.loads, err = openLoads(dc, plan, sides.s, true); err != nil {
		return err
	}
	if err := sides.loads.connect(h.loadRemotes); err != nil {
		return err
	}
	sides.loadLocal, err = sides.loads.endpoints()
	return err
}

// serveSteps serves one measurement per "run" until "bye" (nil) or the
// client's next plan, checked, which it returns.
func (sr *serverRun) serveSteps(ctx context.Context, cfg ServerConfig) (*hello, error) {
	return nextPlan(sr.conn, cfg, sr.plan, func(m proto.Message) error { return sr.step(ctx, m) })
}

// nextPlan reads the client's messages after plan, each "run" served by
// run (unexpected when run is nil), until "bye" (nil) or the client's
// next plan, checked, which it returns.
func nextPlan(conn *proto.Conn, cfg ServerConfig, plan Plan, run func(proto.Message) error) (*hello, error) {
	for {
		// Between sizes (and plans) the client only thinks; a long silence
		// means it died.
		m, err := conn.Recv(stepTime(plan, plan.MaxSize()) + proto.HandshakeTimeout)
		if err != nil {
			return nil, err
		}
		switch {
		case m.Type == proto.KindBye:
			return nil, nil
		case m.Type == proto.KindPlan:
			return planHello(conn, m, cfg.Budget)
		case m.Type == proto.KindRun && run != nil:
			if err := run(m); err != nil {
				return nil, err
			}
		default:
			return nil, refuse(conn, fmt.Errorf("unexpected %q message", m.Type))
		}
	}
}

// refuse tells the client why, then returns the error for the log.
func refuse(conn *proto.Conn, err error) error {
	_ = conn.Send(proto.Message{Type: proto.KindError, Error: err.Error()}, proto.HandshakeTimeout)
	return err
}

// serverRun is the server's session with one client.
type serverRun struct{ session }
