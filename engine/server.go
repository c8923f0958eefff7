package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/csrc"
)

// ServerConfig is the server side: which device it offers, where it logs,
// and what a client may make it do.
type ServerConfig struct {
	Device DeviceConfig
	Log    io.Writer // one line per client and per failure; nil discards
	// MaxClients ends Serve after that many clients; 0 serves forever.
	MaxClients int
	Budget     Budget
}

// Budget bounds what one client's plan may make the server allocate and
// run. Every plan is checked against it before anything is allocated.
type Budget struct {
	MaxMem     int64 // registered bytes; 0: DefaultMaxMem()
	MaxQPs     int   // 0: MaxQPs
	MaxThreads int   // loop threads; 0: DefaultMaxThreads
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
		maxQPs = MaxQPs
	}
	if maxThreads <= 0 {
		maxThreads = DefaultMaxThreads
	}
	if n := plan.MaxQPs(); n > maxQPs {
		return fmt.Errorf("the plan needs %d QPs, this server allows %d (serve --max-qps)", n, maxQPs)
	}
	if n := loopThreads(plan); n > maxThreads {
		return fmt.Errorf("the plan needs %d loop threads, this server allows %d (serve --max-threads)", n, maxThreads)
	}
	if m := PlanMemory(plan); m > maxMem {
		return fmt.Errorf("the plan needs %s of registered memory, this server allows %s (serve --max-mem)", humanBytes(m), humanBytes(maxMem))
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

// Serve accepts clients one after another and runs the plan each sends. A
// client that fails, dies or speaks garbage is logged and the next served.
func Serve(ctx context.Context, ln net.Listener, cfg ServerConfig) error {
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for served := 0; cfg.MaxClients == 0 || served < cfg.MaxClients; served++ {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		conn := newConn(nc)
		peer := conn.RemoteAddr()
		if err := serveClient(ctx, conn, cfg); err != nil {
			fmt.Fprintf(logw, "client %s: %v\n", peer, err)
		} else {
			fmt.Fprintf(logw, "client %s: done\n", peer)
		}
		conn.Close()
	}
	return nil
}

func serveClient(ctx context.Context, conn *Conn, cfg ServerConfig) error {
	// Ctrl-C closes the connection: whatever we wait on returns at once, and
	// the client sees the server go instead of waiting out its deadline.
	closeOnCancel := context.AfterFunc(ctx, func() { conn.Close() })
	defer closeOnCancel()
	if err := conn.readGreeting(); err != nil {
		if errors.Is(err, ErrVersion) {
			_ = conn.sendGreeting() // let the client see our version too
		}
		return err
	}
	if err := conn.sendGreeting(); err != nil {
		return err
	}
	m, err := conn.expect("plan", HandshakeTimeout)
	if err != nil {
		return err
	}
	if m.Plan == nil {
		return refuse(conn, errors.New("plan message without a plan"))
	}
	plan := *m.Plan
	if err := plan.Validate(); err != nil {
		return refuse(conn, fmt.Errorf("invalid plan: %w", err))
	}
	if len(m.Endpoints) != plan.MaxQPs() {
		return refuse(conn, fmt.Errorf("plan needs %d QPs, the client offers %d", plan.MaxQPs(), len(m.Endpoints)))
	}
	if err := cfg.Budget.check(plan); err != nil {
		return refuse(conn, err)
	}
	dc := cfg.Device
	dc.fromEnd = true
	s, err := openSide(dc, plan)
	if err != nil {
		return refuse(conn, err)
	}
	defer s.Close()
	if err := s.connect(m.Endpoints, plan); err != nil {
		return refuse(conn, err)
	}
	local, err := s.endpoints()
	if err != nil {
		return refuse(conn, err)
	}
	info := &SideInfo{CPUs: s.cpus, Inline: s.inline, Notes: s.notes}
	if err := conn.Send(Message{Type: "accept", Endpoints: local, Info: info}, HandshakeTimeout); err != nil {
		return err
	}
	stop := csrc.NewFlag()
	defer stop.Free()
	sr := &serverRun{plan: plan, s: s, conn: conn, remote: m.Endpoints, stop: stop}
	for {
		// Between sizes the client only thinks; a long silence means it died.
		m, err := conn.Recv(stepTime(plan, plan.MaxSize()) + HandshakeTimeout)
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

// refuse tells the client why, then returns the error for the log.
func refuse(conn *Conn, err error) error {
	_ = conn.Send(Message{Type: "error", Error: err.Error()}, HandshakeTimeout)
	return err
}

type serverRun struct {
	plan   Plan
	s      *side
	conn   *Conn
	remote []Endpoint
	stop   *csrc.Flag
}

// step serves one measurement: start the loops the test needs on this side
// (receives, ping-pong responders, and for -b the sending direction), say
// ready, wait for the client's "done", report this side's figures. Every
// path out stops and joins the loops first (the deferred calls), so the
// side's memory is never freed under a running loop.
func (sr *serverRun) step(ctx context.Context, m Message) error {
	plan := sr.plan
	if m.Size < 1 || m.Size > plan.MaxSize() || m.QPs < 1 || m.QPs > len(sr.s.qps) || m.Iters > MaxIterations+plan.Warmup {
		return refuse(sr.conn, fmt.Errorf("run request out of range: size %d, %d QPs, %d iterations", m.Size, m.QPs, m.Iters))
	}
	st := &step{plan: plan, s: sr.s, remote: sr.remote, size: m.Size, nqp: m.QPs, stop: sr.stop}
	sr.stop.Clear()
	var rl, rs *passiveLoops
	defer func() { rl.close(); rs.close() }()
	var err error
	switch {
	case plan.Test.IsLatency():
		if _, _, pingPong := latencyKinds(plan.Test); pingPong {
			st.clearTags()
			rs, err = st.startResponders(m.Iters)
		}
	case receives(plan):
		rl, err = st.startRecv(m.Iters)
	case plan.Verify && plan.Test.Op() == OpRead:
		st.fillReadTargets()
	}
	if err != nil {
		return refuse(sr.conn, err)
	}
	stopOnCancel := context.AfterFunc(ctx, sr.stop.Set)
	defer stopOnCancel()
	counters0 := sr.s.readCounters()
	if err := sr.conn.Send(Message{Type: "ready"}, HandshakeTimeout); err != nil {
		sr.stop.Set()
		return err
	}
	cpu0 := readCPUClock()
	fig := &SideFigures{}
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
	done, err := sr.conn.expect("done", stepTime(plan, m.Size)+HandshakeTimeout)
	if err != nil {
		sr.stop.Set() // the client died or misbehaved: end our loops now
		return fmt.Errorf("size %d: %w", m.Size, err)
	}
	verdict := Message{Type: "result", Side: fig}
	var errs []error
	if sent != nil {
		o := sentOut()
		fig.Messages, fig.Seconds, fig.BurstBps = o.messages, o.seconds, o.burstBps
		errs = append(errs, o.err)
		verdict.Counts = o.last // the client checks what our writes left
		if plan.Verify && plan.Test.Op() == OpRead {
			fig.BadBytes += st.checkReads(o.last)
		}
	}
	if rl != nil {
		out, err := rl.finish(time.Second)
		fig.BadBytes += out.badBytes
		if !plan.Bidirectional {
			fig.Messages = out.received
		}
		errs = append(errs, err)
	}
	if rs != nil {
		_, err := rs.finish(time.Second)
		errs = append(errs, err)
	}
	if plan.Verify && plan.Test.Op() == OpWrite {
		fig.BadBytes += st.checkWrites(done.Counts)
	}
	fig.CPU = cpu0.since()
	fig.Counters = sr.s.readCounters().movedSince(counters0)
	if err := errors.Join(errs...); err != nil {
		verdict.Error = err.Error() // the client says it came from the server
	}
	return sr.conn.Send(verdict, HandshakeTimeout)
}
