package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/rdmabench/rdmabench/proto"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

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
// client prints.
func (b Budget) check(plan Plan) error {
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
	qps, threads, mem := plan.MaxQPs(), loopThreads(plan), PlanMemory(plan)
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
// endpoints.
type hello struct {
	plan        Plan
	remote      []proto.Endpoint
	loadRemotes [][]proto.Endpoint
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
	if m.Plan == nil {
		return nil, refuse(conn, errors.New("plan message without a plan"))
	}
	plan := *m.Plan
	if err := plan.Validate(); err != nil {
		return nil, refuse(conn, fmt.Errorf("invalid plan: %w", err))
	}
	if len(m.Endpoints) != plan.MaxQPs() {
		return nil, refuse(conn, fmt.Errorf("plan needs %d QPs, the client offers %d", plan.MaxQPs(), len(m.Endpoints)))
	}
	if err := sv.cfg.Budget.check(plan); err != nil {
		return nil, refuse(conn, err)
	}
	return &hello{plan: plan, remote: m.Endpoints, loadRemotes: m.LoadEndpoints}, nil
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

// serveSession runs an accepted plan on the device: allocate, connect,
// then one measurement per "run" until "bye".
func serveSession(ctx context.Context, conn *proto.Conn, cfg ServerConfig, h *hello) error {
	plan := h.plan
	dc := cfg.Device
	dc.fromEnd = true
	s, err := openSide(dc, plan, plan.PeerMemory)
	if err != nil {
		return refuse(conn, err)
	}
	defer s.Close()
	if err := s.connect(h.remote, plan); err != nil {
		return refuse(conn, err)
	}
	local, err := s.endpoints()
	if err != nil {
		return refuse(conn, err)
	}
	// Closed before the side; the receive loops of send loads are stopped
	// and joined inside each step.
	loads, err := openLoads(dc, plan, s, true)
	if err != nil {
		return refuse(conn, err)
	}
	defer loads.Close()
	if err := loads.connect(h.loadRemotes); err != nil {
		return refuse(conn, err)
	}
	loadLocal, err := loads.endpoints()
	if err != nil {
		return refuse(conn, err)
	}
	info := &proto.SideInfo{CPUs: s.cpus, Inline: s.inline, Notes: s.notes, Memory: &s.mem.desc}
	if err := conn.Send(proto.Message{Type: proto.KindAccept, Endpoints: local, LoadEndpoints: loadLocal, Info: info}, proto.HandshakeTimeout); err != nil {
		return err
	}
	stop := csrc.NewFlag()
	defer stop.Free()
	sr := &serverRun{session{plan: plan, s: s, conn: conn, remote: h.remote, stop: stop, loads: loads}}
	for {
		// Between sizes the client only thinks; a long silence means it died.
		m, err := conn.Recv(stepTime(plan, plan.MaxSize()) + proto.HandshakeTimeout)
		if err != nil {
			return err
		}
		switch m.Type {
		case "bye":
			return nil
		case "run":
			if err := sr.step(ctx, m); err != nil {
				return err
			}
		default:
			return refuse(conn, fmt.Errorf("unexpected %q message", m.Type))
		}
	}
}

// startPassive starts this side's part of a step of iters per QP (0:
// until told): the responders of a ping-pong and the receives of send
// loads, the receives of a send test, or --verify's read targets.
func (sr *serverRun) startPassive(st *step, iters uint64, rl, rs **passiveLoops, loadRecv *[]*passiveLoops, loadStop *csrc.Flag) error {
	plan := sr.plan
	if err := st.prepareGPUVerify(); err != nil {
		return err
	}
	switch {
	case plan.Test.IsLatency():
		if _, _, pingPong := latencyKinds(plan); pingPong {
			st.clearTags()
			var err error
			if *rs, err = st.startResponders(iters); err != nil {
				return err
			}
		}
		// A send load needs receives while it runs: until the step ends.
		for i, l := range plan.Loads {
			if !receives(l) {
				continue
			}
			lr, err := sr.loads.step(i, loadStop).startRecv(0)
			if err != nil {
				return err
			}
			*loadRecv = append(*loadRecv, lr)
		}
	case receives(plan):
		var err error
		*rl, err = st.startRecv(iters)
		return err
	case plan.Verify && plan.Test.Op() == OpRead:
		return st.fillReadTargets()
	}
	return nil
}

// verdict is this side's figures and errors of a step the client said
// done: the sending direction of -b (sent, nil without), what the
// receives and responders saw, --verify's bad bytes.
func (sr *serverRun) verdict(st *step, iters uint64, done proto.Message, sent *bwOutcome, rl, rs *passiveLoops) proto.Message {
	plan := sr.plan
	fig := &proto.SideFigures{}
	verdict := proto.Message{Type: proto.KindResult, Side: fig}
	var errs []error
	if o := sent; o != nil {
		fig.Messages, fig.Seconds, fig.BurstBps = o.messages, o.seconds, o.burstBps
		errs = append(errs, o.err)
		verdict.Counts = o.last // the client checks what our writes left
		if plan.Verify && plan.Test.Op() == OpRead {
			bad, err := st.checkReads(o.last)
			fig.BadBytes += bad
			errs = append(errs, err)
		}
	}
	if rl != nil {
		out, err := rl.finish(time.Second)
		bad, cerr := st.checkGPURecvs(out.received)
		fig.BadBytes += out.badBytes + bad
		errs = append(errs, cerr)
		if !plan.Bidirectional {
			fig.Messages = out.received
		}
		errs = append(errs, err)
	}
	if rs != nil {
		// Responders that run until told (--load, --rate: m.Iters 0) are
		// told by "done"; waiting a grace for them to end by themselves
		// added a second to every such step.
		grace := time.Second
		if iters == 0 {
			grace = 0
		}
		_, err := rs.finish(grace)
		errs = append(errs, err)
	}
	if plan.Verify && plan.Test.Op() == OpWrite {
		bad, err := st.checkWrites(done.Counts)
		fig.BadBytes += bad
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		verdict.Error = err.Error() // the client says it came from the server
	}
	return verdict
}

// refuse tells the client why, then returns the error for the log.
func refuse(conn *proto.Conn, err error) error {
	_ = conn.Send(proto.Message{Type: proto.KindError, Error: err.Error()}, proto.HandshakeTimeout)
	return err
}

// reportLoopFailure tells the client at once when one of our loops fails
// mid-run (our link went down, its QP died): it stops instead of waiting
// out its deadline for messages that will not come. The returned function
// ends the watch and returns the error it reported, if it did; call it
// before sending anything else.
func (sr *serverRun) reportLoopFailure(loops ...*passiveLoops) (endWatch func() error) {
	quit, finished := make(chan struct{}), make(chan struct{})
	var reported error
	go func() {
		defer close(finished)
		for _, pl := range loops {
			if pl == nil {
				continue
			}
			select {
			case <-pl.done:
				if err := pl.failure(); err != nil {
					reported = err
					_ = sr.conn.Send(proto.Message{Type: proto.KindError, Error: err.Error()}, proto.HandshakeTimeout)
					return
				}
			case <-quit:
				return
			}
		}
	}()
	return func() error { close(quit); <-finished; return reported }
}

// serverRun is the server's session with one client.
type serverRun struct{ session }

// step serves one measurement: start the loops the test needs on this side
// (receives, ping-pong responders, and for -b the sending direction), say
// ready, wait for the client's "done", report this side's figures. Every
// path out stops and joins the loops first (the deferred calls), so the
// side's memory is never freed under a running loop.
func (sr *serverRun) step(ctx context.Context, m proto.Message) error {
	plan := sr.plan
	if m.Size < 1 || m.Size > plan.MaxSize() || m.QPs < 1 || m.QPs > len(sr.s.qps) || m.Iters > rbplan.MaxIterations+plan.Warmup {
		return refuse(sr.conn, fmt.Errorf("run request out of range: size %d, %d QPs, %d iterations", m.Size, m.QPs, m.Iters))
	}
	st := &step{plan: plan, s: sr.s, remote: sr.remote, size: m.Size, nqp: m.QPs, stop: sr.stop}
	sr.stop.Clear()
	var rl, rs *passiveLoops
	loadRecv, loadStop := []*passiveLoops{}, csrc.NewFlag()
	defer func() {
		rl.close()
		rs.close()
		loadStop.Set()
		for _, l := range loadRecv {
			l.close()
		}
		loadStop.Free()
	}()
	if err := sr.startPassive(st, m.Iters, &rl, &rs, &loadRecv, loadStop); err != nil {
		return refuse(sr.conn, err)
	}
	stopOnCancel := onCancel(ctx, sr.stop.Set)
	defer stopOnCancel()
	counters0 := sr.s.readCounters()
	if err := sr.conn.Send(proto.Message{Type: proto.KindReady}, proto.HandshakeTimeout); err != nil {
		sr.stop.Set()
		return err
	}
	cpu0 := readCPUClock()
	var sent chan bwOutcome
	if plan.Bidirectional {
		sent = make(chan bwOutcome, 1)
		go func() { sent <- st.postBW(nil) }()
	}
	// sentOut waits for the sending direction once; the deferred call joins
	// it on every other path.
	var out *bwOutcome
	sentOut := func() bwOutcome {
		if out == nil {
			o := <-sent
			out = &o
		}
		return *out
	}
	defer func() {
		if sent != nil && out == nil {
			sr.stop.Set()
			sentOut()
		}
	}()
	endWatch := sr.reportLoopFailure(rl, rs)
	done, err := sr.conn.Expect(proto.KindDone, stepTime(plan, m.Size)+proto.HandshakeTimeout)
	if reported := endWatch(); reported != nil {
		// The client has our error; the log gets the cause, not the
		// closed connection that follows it, and no verdict goes after it.
		sr.stop.Set()
		return fmt.Errorf("size %d: %w", m.Size, reported)
	}
	if err != nil {
		sr.stop.Set() // the client died or misbehaved: end our loops now
		return fmt.Errorf("size %d: %w", m.Size, err)
	}
	var sentBW *bwOutcome
	if sent != nil {
		o := sentOut()
		sentBW = &o
	}
	verdict := sr.verdict(st, m.Iters, done, sentBW, rl, rs)
	verdict.Side.CPU = cpu0.since()
	verdict.Side.Counters = sr.s.readCounters().movedSince(counters0)
	return sr.conn.Send(verdict, proto.HandshakeTimeout)
}
