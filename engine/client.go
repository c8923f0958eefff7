package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/rdmabench/rdmabench/proto"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/results"
)

// DefaultPort is the control port, perftest's.
const DefaultPort = 18515

// ErrInterrupted says the run was stopped (Ctrl-C) before it finished.
var ErrInterrupted = errors.New("interrupted")

// ErrVerify says --verify found bytes that differ from the pattern.
var ErrVerify = errors.New("data verification failed")

// ClientConfig is everything the client side of a run needs.
type ClientConfig struct {
	Addr   string // host:port of the server
	Device DeviceConfig
	Plan   Plan
	// Observer, when set, sees the run as results arrive, so that an
	// interrupted run still shows what was measured (render.Table prints
	// the perftest-style table).
	Observer Observer
	// Raw, when set, receives every latency sample as "size,qp,iteration,ns".
	Raw  io.Writer
	Mode string // "client" or "loopback", for the report
	// Token, when set, is proved to the server (and the server must prove
	// it back); a server that requires one refuses a client without it.
	Token []byte
	// Also is the plans a Session runs after this one. Both ends open
	// this plan's QPs, CQs and buffer to hold those that can share them
	// too (the largest depths, inline size, CQs, buffer, and every
	// access), and keep them after it: the next plan runs on them when
	// they fit it (a mesh direction's write-bw, then its send-lat).
	// RunClient runs one plan and ignores it.
	Also []Plan
	// peerCPUs is the loopback peer's CPU list, for the header (a server
	// sends its own in the accept message).
	peerCPUs []int
	// peerSamePort: the loopback peer uses our device and port.
	peerSamePort bool
}

// Observer is told about a run as it is measured. engine knows nothing of
// how a run is shown: render/ implements this.
type Observer interface {
	Start(run *results.Run) error
	Measured(run *results.Run, res results.Result) error
	// Interval is one --interval reading of a bandwidth measurement; it
	// is called from the sampling goroutine while the loops run.
	Interval(size int, iv results.Interval)
	End(run *results.Run) error
}

// RunClient connects to a server, runs the plan and returns what it measured.
// The Run holds every completed measurement even when an error is returned.
func RunClient(ctx context.Context, cfg ClientConfig) (*results.Run, error) {
	if err := cfg.Plan.Validate(); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	cfg.Also = nil // no plan follows
	// Everything of ours is allocated before we connect: the server allows
	// the greeting and the plan HandshakeTimeout together, and opening a
	// side and its loads (device, memory, QPs) took longer than that on a
	// busy rxe guest: the server dropped the connection mid-handshake.
	ps, err := openPlanSides(cfg)
	if err != nil {
		return nil, err
	}
	defer ps.Close()
	ss, err := Dial(ctx, cfg.Addr, cfg.Token)
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	return ss.run(ctx, cfg, ps, nil)
}

// Session is a client's control connection to one server, over which it
// runs plans one after another (a mesh's write-bw, then its send-lat): the
// dial, the greeting and the token exchange once. A plan has its own QPs
// on both sides, opened for it and closed after it, unless it named the
// plans that follow (ClientConfig.Also): then both ends open its QPs and
// CQs to hold those too and keep them, connected, for the next plan, which
// runs on them when it fits (reuse.go) and gets its own otherwise. The
// device and buffers are each side's own, unless its DeviceConfig lends
// them from a Kept. A plan that fails leaves the connection in no known
// state: the session is then broken, and the next plan needs a new one.
type Session struct {
	addr   string
	conn   *proto.Conn
	broken error
	held   *planSides // the last plan's side, connected, for the next plan
}

// ErrSessionBroken says an earlier plan of the session failed.
var ErrSessionBroken = errors.New("an earlier plan of this session failed")

// Dial connects to the server at addr and runs the greeting and, when
// the server requires one, the token exchange.
func Dial(ctx context.Context, addr string, token []byte) (*Session, error) {
	d := net.Dialer{Timeout: proto.HandshakeTimeout}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, dialError(ctx, addr, err)
	}
	conn := proto.NewConn(nc)
	if err := clientHandshake(conn, token); err != nil {
		conn.Close()
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	return &Session{addr: addr, conn: conn}, nil
}

// Run runs one plan over the session, as RunClient does over a connection
// of its own; cfg.Addr and cfg.Token are the session's.
func (ss *Session) Run(ctx context.Context, cfg ClientConfig) (*results.Run, error) {
	if ss.broken != nil {
		return nil, fmt.Errorf("%w: %v", ErrSessionBroken, ss.broken)
	}
	for _, p := range append([]Plan{cfg.Plan}, cfg.Also...) {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("plan: %w", err)
		}
	}
	cfg.Addr = ss.addr
	ps, acc, err := ss.reuse(ctx, cfg)
	if err != nil {
		ss.broken = err
		return nil, err
	}
	if ps == nil {
		if ps, err = openPlanSides(cfg); err != nil {
			return nil, err
		}
	}
	run, err := ss.run(ctx, cfg, ps, acc)
	if err == nil && reusable(cfg.Plan, cfg.Also) {
		ss.held = ps // the server keeps its side too
	} else {
		ps.Close()
	}
	return run, err
}

// reuse asks the server to run cfg's plan on the last plan's QPs when
// they fit it, and returns our side ready for it with the server's
// accept; nil when the plan gets QPs of its own (the last plan's are then
// closed, and the server has closed its own).
func (ss *Session) reuse(ctx context.Context, cfg ClientConfig) (*planSides, *proto.Message, error) {
	ps := ss.held
	ss.held = nil
	if ps == nil {
		return nil, nil, nil
	}
	if ps.s.fits(cfg.Device, cfg.Plan, false) != nil || checkPeer(ps.remote, cfg.Plan) != nil || ps.s.retarget(cfg.Device, cfg.Plan) != nil {
		ps.Close()
		return nil, nil, nil
	}
	acc, err := requestPlan(ctx, ss.conn, cfg, ps.local, nil, true)
	switch {
	case err != nil:
		ps.Close()
		return nil, nil, err
	case !acc.Reused && len(acc.Endpoints) == 0: // the server's side did not fit
		ps.Close()
		return nil, nil, nil
	case !acc.Reused || !slices.Equal(acc.Endpoints, ps.remote):
		ps.Close()
		return nil, nil, errors.New("protocol error: the server's accept of our QPs' reuse names other QPs")
	}
	return ps, &acc, nil
}

// Close says goodbye to the server when the session is sound, and closes
// the connection and the side kept for a next plan. It may be called more
// than once.
func (ss *Session) Close() error {
	if ss.held != nil {
		ss.held.Close()
		ss.held = nil
	}
	if ss.broken == nil {
		ss.broken = errors.New("closed")
		_ = ss.conn.Send(proto.Message{Type: proto.KindBye}, proto.HandshakeTimeout)
	}
	return ss.conn.Close()
}

// planSides is a plan's side and loads on our end, with their endpoints.
type planSides struct {
	s         *side
	loads     *loadSet
	local     []proto.Endpoint
	loadLocal [][]proto.Endpoint
	remote    []proto.Endpoint // the server's, once connected
}

// openPlanSides opens our side and the loads of cfg's plan; on an error
// it closes what it opened.
func openPlanSides(cfg ClientConfig) (*planSides, error) {
	ps := &planSides{}
	if err := ps.open(cfg); err != nil {
		ps.Close()
		return nil, err
	}
	return ps, nil
}

func (ps *planSides) open(cfg ClientConfig) (err error) {
	plan := cfg.Plan
	if ps.s, err = openSide(cfg.Device, plan, cfg.Also, plan.Memory); err != nil {
		return err
	}
	if ps.local, err = ps.s.endpoints(); err != nil {
		return err
	}
	if ps.loads, err = openLoads(cfg.Device, plan, ps.s, false); err != nil {
		return err
	}
	ps.loadLocal, err = ps.loads.endpoints()
	return err
}

// Close closes the loads before the side (the loads' loops are stopped
// and joined inside each measurement).
func (ps *planSides) Close() {
	if ps.loads != nil {
		ps.loads.Close()
	}
	if ps.s != nil {
		ps.s.Close()
	}
}

// run runs cfg's plan over the session with our side ps: a new one, or
// with acc, the server's accept, the last plan's that it reuses. A failure
// other than --verify's breaks the session.
func (ss *Session) run(ctx context.Context, cfg ClientConfig, ps *planSides, acc *proto.Message) (*results.Run, error) {
	run, err := ss.runPlan(ctx, cfg, ps, acc)
	if err != nil && !errors.Is(err, ErrVerify) {
		ss.broken = err
	}
	return run, err
}

func (ss *Session) runPlan(ctx context.Context, cfg ClientConfig, ps *planSides, acc *proto.Message) (*results.Run, error) {
	plan, s, conn := cfg.Plan, ps.s, ss.conn
	if acc == nil {
		var err error
		if acc, err = ss.connectSides(ctx, cfg, ps); err != nil {
			return nil, err
		}
	}
	remote := ps.remote
	run := newRun(cfg, s, remote, acc.Info)
	if cfg.Observer != nil {
		if err := cfg.Observer.Start(run); err != nil {
			return run, err
		}
	}
	stop := csrc.NewFlag()
	defer stop.Free()
	// Ctrl-C (ctx) stops the running loops; they return what they have.
	stopOnCancel := onCancel(ctx, stop.Set)
	defer stopOnCancel()

	c := &clientRun{cfg: cfg, session: session{plan: plan, s: s, conn: conn, remote: remote, stop: stop, loads: ps.loads}}
	verifyErrs, err := c.measureAll(ctx, run)
	if err != nil {
		return run, err
	}
	if cfg.Observer != nil {
		cfg.Observer.End(run)
	}
	if err := errors.Join(verifyErrs...); err != nil {
		run.Error = err.Error()
		return run, err
	}
	return run, nil
}

// connectSides requests cfg's plan with our new side ps and connects it
// and its loads to the server's, whose accept it returns.
func (ss *Session) connectSides(ctx context.Context, cfg ClientConfig, ps *planSides) (*proto.Message, error) {
	acc, err := requestPlan(ctx, ss.conn, cfg, ps.local, ps.loadLocal, false)
	if err != nil {
		return nil, err
	}
	if err := ps.s.connect(acc.Endpoints, cfg.Plan); err != nil {
		return nil, err
	}
	if err := ps.loads.connect(acc.LoadEndpoints); err != nil {
		return nil, err
	}
	ps.remote = acc.Endpoints
	return &acc, nil
}

// measureAll measures every size and QP count of the plan in turn into
// run, its rows written as they come. A failure ends the run (an
// interrupted measurement keeps what it saw) and is returned after the
// observer's end; a --verify mismatch is kept and the run goes on.
func (c *clientRun) measureAll(ctx context.Context, run *results.Run) (verifyErrs []error, err error) {
	plan, cfg := c.plan, c.cfg
	total := len(plan.Sizes) * len(plan.QPCounts())
	for _, size := range plan.Sizes {
		for _, nqp := range plan.QPCounts() {
			res, err := c.measure(ctx, size, nqp)
			if err != nil && !errors.Is(err, ErrVerify) {
				if ctx.Err() != nil {
					run.Interrupted = true
					if res.Partial {
						// What the interrupted measurement saw before Ctrl-C.
						run.Results = append(run.Results, res)
						c.writeRow(run, res)
					}
					err = fmt.Errorf("%w after %d of %d measurements", ErrInterrupted, len(run.Results), total)
				}
				run.Error = err.Error()
				if cfg.Observer != nil {
					cfg.Observer.End(run)
				}
				return nil, err
			}
			run.Results = append(run.Results, res)
			if werr := c.writeRow(run, res); werr != nil {
				return nil, werr
			}
			if err != nil { // verification failed: report it, measure on
				verifyErrs = append(verifyErrs, err)
			}
		}
	}
	return verifyErrs, nil
}

func newRun(cfg ClientConfig, s *side, remote []proto.Endpoint, peer *proto.SideInfo) *results.Run {
	plan := cfg.Plan
	mode := cfg.Mode
	if mode == "" {
		mode = "client"
	}
	run := &results.Run{
		Test: plan.Test, Device: s.ctx.Name(), Port: s.port, GIDIndex: s.gidIndex, GID: s.gidDesc,
		MTU: pathMTU(plan, s.activeMTU, remote[0].MTU), LinkLayer: s.linkLayer, Transport: plan.Transport, Mode: mode,
		Peer: cfg.Addr, TxDepth: s.txDepth, CQMod: plan.CQMod, Inline: s.inline,
		Duration: plan.Duration.Seconds(), Interval: plan.Interval.Seconds(), Results: []results.Result{},
		QPs: plan.QPCounts(), Sizes: plan.Sizes, Threads: len(s.lanes), SharedCQ: plan.SharedCQ, Bidirectional: plan.Bidirectional,
		PostList: plan.PostList, Verify: plan.Verify, Atomic: plan.Atomic, Imm: plan.Imm, CPUs: s.cpus,
		PeerCPUs: cfg.peerCPUs, Notes: s.notes, Memory: &s.mem.desc,
	}
	if s.inlineGranted != s.inline {
		run.InlineGranted = s.inlineGranted
	}
	if peer != nil {
		if peer.CPUs != nil {
			run.PeerCPUs = peer.CPUs
		}
		run.PeerInline = &peer.Inline
		run.PeerMemory = peer.Memory
		for _, n := range peer.Notes {
			run.Notes = append(run.Notes, "server: "+n)
		}
	}
	if plan.Test.IsLatency() {
		run.Latency = results.LatencyMeaning(plan.Test)
		if plan.WriteLatByCompletion() {
			run.Latency = writeLatByCompletionMeaning
		}
		run.Warmup = plan.Warmup
	}
	if plan.RateMode() {
		run.RateLatency = rateMeaning(plan)
	}
	return run
}

func (c *clientRun) writeRow(run *results.Run, res results.Result) error {
	if c.cfg.Observer == nil {
		return nil
	}
	return c.cfg.Observer.Measured(run, res)
}

// clientRun is the client's side of a session, with the client's
// configuration.
type clientRun struct {
	session
	cfg ClientConfig
}

// measure runs one message size over nqp QPs: announce, warm up, measure,
// collect the server's figures and verdict.
func (c *clientRun) measure(ctx context.Context, size, nqp int) (results.Result, error) {
	plan := c.plan
	st := &step{plan: plan, s: c.s, remote: c.remote, size: size, nqp: nqp, stop: c.stop}
	// Ctrl-C set the stop flag once; a Ctrl-C that came between sizes
	// must not be cleared away with it.
	if ctx.Err() != nil {
		return results.Result{}, ErrInterrupted
	}
	c.stop.Clear()
	iters := uint64(0)                                                  // per QP, what the server's loops expect; 0 = until told
	if plan.Duration == 0 && !plan.RateMode() && len(plan.Loads) == 0 { // --rate, --load: the responders run until told
		iters = plan.Warmup + plan.Iterations
	}
	// Every path out stops and joins our receive loops (-b) before the
	// side's memory can be freed.
	var myRecv *passiveLoops
	defer func() { myRecv.close() }()
	counters0, err := c.begin(st, iters, &myRecv)
	if err != nil {
		return results.Result{}, err
	}
	// While the loops run the server says nothing: any byte or a closed
	// connection means it failed or died, so stop instead of spinning.
	peerGone := make(chan error, 1)
	watchDone := c.watchPeer(peerGone)
	cpu0 := readCPUClock()
	res, bw, loopErr := c.runLoops(ctx, st)
	watchDone()
	cpuLocal := cpu0.since()
	if ctx.Err() != nil {
		return interrupted(res, loopErr)
	}
	select {
	case perr := <-peerGone:
		if errors.Is(perr, errPeerSpoke) {
			perr = c.whatPeerSaid()
		}
		if loopErr == nil || errors.Is(loopErr, csrc.ErrStopped) {
			return results.Result{}, fmt.Errorf("size %d: %w", size, perr) // our loops only stopped
		}
		return results.Result{}, fmt.Errorf("size %d: %w (measurement: %v)", size, perr, loopErr)
	default:
	}
	var received recvOutcome
	if myRecv != nil {
		var rerr error
		if received, rerr = myRecv.finish(time.Second); loopErr == nil && plan.Transport == RC {
			loopErr = rerr
		}
	}
	if loopErr != nil {
		return results.Result{}, fmt.Errorf("size %d: %w%s", size, loopErr, lossNote(c.s.readCounters().movedSince(counters0)))
	}
	verdict, err := c.awaitVerdict(size, bw)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted(res, loopErr)
		}
		return results.Result{}, err
	}
	if verdict.Error != "" {
		return results.Result{}, fmt.Errorf("size %d: server: %s", size, verdict.Error)
	}
	res.PortCounters = c.s.readCounters().movedSince(counters0)
	c.addPeerSide(&res, verdict.Side, cpuLocal)
	if plan.Verify {
		return c.verify(st, res, verdict, received, bw, myRecv != nil)
	}
	return res, nil
}

// interrupted is a measurement that Ctrl-C ended after its loops
// started. Loops it stopped marked their figures partial; loops that had
// finished before it (it came while the loads drained or while the
// server's verdict was awaited) measured in full, and only the server's
// figures are lost: either way what was measured is kept.
func interrupted(res results.Result, loopErr error) (results.Result, error) {
	if loopErr == nil && res.Iterations > 0 {
		res.Partial = true
	}
	return res, ErrInterrupted
}

// awaitVerdict tells the server our loops are done (with what each QP
// completed) and waits for its side's figures. Ctrl-C here closes a
// loopback server's end before its verdict.
func (c *clientRun) awaitVerdict(size int, bw bwOutcome) (proto.Message, error) {
	if err := c.conn.Send(proto.Message{Type: proto.KindDone, Counts: bw.last}, proto.HandshakeTimeout); err != nil {
		return proto.Message{}, err
	}
	verdict, err := c.conn.Expect(proto.KindResult, stepTime(c.plan, size)+proto.HandshakeTimeout)
	if err != nil {
		return proto.Message{}, fmt.Errorf("size %d: %w", size, err)
	}
	return verdict, nil
}

// begin readies a measurement of step st (GPU patterns, our receive
// loops for -b, the read targets) and has the server start its side:
// iters per QP, 0 until told. It returns the port's counters before.
func (c *clientRun) begin(st *step, iters uint64, myRecv **passiveLoops) (counterSnapshot, error) {
	plan, size := c.plan, st.size
	if err := st.prepareGPUVerify(); err != nil {
		return nil, fmt.Errorf("size %d: %w", size, err)
	}
	if plan.Bidirectional && receives(plan) {
		var err error
		if *myRecv, err = st.startRecv(iters); err != nil {
			return nil, fmt.Errorf("size %d: %w", size, err)
		}
	}
	if plan.Test.IsLatency() {
		st.clearTags()
	}
	if plan.Verify && plan.Bidirectional && plan.Test.Op() == OpRead {
		if err := st.fillReadTargets(); err != nil { // the server reads from us too
			return nil, fmt.Errorf("size %d: %w", size, err)
		}
	}
	counters0 := c.s.readCounters()
	if err := c.conn.Send(proto.Message{Type: proto.KindRun, Size: size, QPs: st.nqp, Iters: iters}, proto.HandshakeTimeout); err != nil {
		return nil, err
	}
	if _, err := c.conn.Expect(proto.KindReady, proto.HandshakeTimeout); err != nil {
		return nil, fmt.Errorf("size %d: %w", size, err)
	}
	return counters0, nil
}

// runLoops runs the measured loops of step st: the ping-pongs (and their
// loaded and open-loop passes) or the bandwidth loops with their
// intervals.
func (c *clientRun) runLoops(ctx context.Context, st *step) (results.Result, bwOutcome, error) {
	plan, size, nqp := c.plan, st.size, st.nqp
	if plan.Test.IsLatency() {
		res, err := c.latencyLoops(ctx, st)
		return res, bwOutcome{}, err
	}
	progress := csrc.NewCounter()
	rep := startIntervals(plan.Interval, intervalLimit(plan), size, progress, c.cfg.Observer)
	bw := st.postBW(progress)
	res := bandwidthResult(size, nqp, bw)
	if plan.Interval > 0 && bw.minCQMod < uint32(plan.CQMod) {
		res.MinCQMod = bw.minCQMod
	}
	res.Intervals = rep.stop()
	progress.Free()
	res.Partial = bw.partial
	return res, bw, bw.err
}

// latencyLoops runs the idle ping-pong, then the loaded one (--load) or
// the open-loop rates (--rate); a later pass that fails keeps the idle
// figures.
func (c *clientRun) latencyLoops(ctx context.Context, st *step) (results.Result, error) {
	plan := c.plan
	var res results.Result
	lat := st.latencyInitiators(c.cfg.Raw)
	loopErr := lat.err
	if lat.rec.Count() > 0 {
		stats := lat.rec.Stats()
		res = results.Result{Size: st.size, QPs: st.nqp, Iterations: lat.rec.Count(), Lat: &stats, Hist: lat.rec.Hist, Partial: lat.partial}
	} else if loopErr == nil {
		loopErr = errors.New("no latency samples in the measured interval (run longer)")
	}
	if loopErr == nil && len(plan.Loads) > 0 {
		loopErr = c.measureLoaded(st, &res)
		res.Partial = errors.Is(loopErr, csrc.ErrStopped) || errors.Is(loopErr, errLoadsInterrupted) // the idle figures stand
	}
	if loopErr == nil && plan.RateMode() {
		idle := rateIdle(plan, *res.Lat)
		res.RateIdle = &idle
		res.Rates, loopErr = st.rateSweep(idle.P99)
		res.Partial = errors.Is(loopErr, csrc.ErrStopped) // the idle figures and the rates so far stand
	}
	// A second pass (loaded, open loop) that failed after Ctrl-C failed
	// because of it: in loopback the server, cancelled too, tears down
	// its half (responders, the loads' QPs), and our loop may see that
	// before its stop flag. The idle figures stand.
	if res.Lat != nil && loopErr != nil && ctx.Err() != nil {
		res.Partial = true
	}
	return res, loopErr
}

// addPeerSide adds the server's side of the verdict to res: its port
// counters, both sides' CPU, -b's other direction, what it received.
func (c *clientRun) addPeerSide(res *results.Result, side *proto.SideFigures, cpuLocal results.CPUFigure) {
	if side == nil {
		return
	}
	// Counters out of bounds are dropped, not trusted; in loopback on
	// one port the server's are ours.
	if checkPeerCounters(side.Counters) == nil && !c.cfg.peerSamePort {
		res.PeerPortCounters = side.Counters
	}
	res.CPU = &results.CPUUsage{Local: cpuLocal, Remote: side.CPU}
	if c.plan.Bidirectional {
		addBidirectional(res, res.Size, *side)
	}
	if receives(c.plan) && !c.plan.Bidirectional {
		res.Received = side.Messages
	}
}

// verify adds up --verify's bad bytes: the server's, our receives', and
// the reads' and -b writes' targets; ErrVerify when any.
func (c *clientRun) verify(st *step, res results.Result, verdict proto.Message, received recvOutcome, bw bwOutcome, recvLoops bool) (results.Result, error) {
	plan, size := c.plan, st.size
	bad := received.badBytes
	if verdict.Side != nil {
		bad += verdict.Side.BadBytes
	}
	var checks []error
	if plan.Test.Op() == OpRead {
		b, err := st.checkReads(bw.last)
		bad, checks = bad+b, append(checks, err)
	}
	if plan.Test.Op() == OpWrite && plan.Bidirectional {
		b, err := st.checkWrites(verdict.Counts)
		bad, checks = bad+b, append(checks, err)
	}
	if recvLoops {
		b, err := st.checkGPURecvs(received.received)
		bad, checks = bad+b, append(checks, err)
	}
	if err := errors.Join(checks...); err != nil {
		return res, fmt.Errorf("size %d: %w", size, err)
	}
	res.BadBytes = &bad
	if bad > 0 {
		return res, fmt.Errorf("%w: size %d: %d bytes differ from the pattern", ErrVerify, size, bad)
	}
	return res, nil
}

// measureLoaded runs the ping-pong again while the loads run: they start,
// warm up (left out), run through it, and are stopped and joined on every
// path. Their figures are what they completed during it.
func (c *clientRun) measureLoaded(st *step, res *results.Result) error {
	plan := c.plan
	running, err := c.loads.start(st.stepDeadline(), st.stop)
	if err != nil {
		return err
	}
	defer running.stop()
	before, t0 := running.counts(), time.Now()
	// The ping-pong's tags continue where the idle pass left them: the
	// write-lat responder counts on from there.
	st.tagBase = uint32(plan.Warmup + plan.Iterations)
	lat := st.latencyInitiators(nil) // --raw keeps the idle samples
	// Then on, in short rounds without warm-up, until every load has
	// counted enough signalled completions for a figure (loadMinSignals),
	// at most loadMaxExtension more.
	more := *st
	more.plan.Warmup, more.plan.Iterations = 0, min(plan.Iterations, latencyChunk)
	more.tagBase = st.tagBase + uint32(plan.Warmup+plan.Iterations)
	for extendUntil := time.Now().Add(loadMaxExtension); lat.err == nil && !running.enough(before) && time.Now().Before(extendUntil); {
		ext := more.latencyInitiators(nil)
		lat.rec.Merge(ext.rec)
		lat.err = ext.err
		more.tagBase += uint32(more.plan.Iterations)
	}
	after, seconds := running.counts(), time.Since(t0).Seconds()
	failed := running.failed() // a load that ended early did not load all of it
	if err := running.stopErr(); err != nil && failed == nil {
		failed = err
	}
	if lat.err != nil {
		return fmt.Errorf("loaded: %w", lat.err)
	}
	if failed != nil {
		return failed
	}
	if lat.rec.Count() == 0 {
		return errors.New("loaded: no latency samples")
	}
	stats := lat.rec.Stats()
	res.Loaded, res.LoadedHist = &stats, lat.rec.Hist
	res.Loads = running.figures(before, after, seconds)
	return nil
}

// watchPeer watches the control connection during a loop; the returned
// function ends the watch.
func (c *clientRun) watchPeer(gone chan<- error) (stopWatch func()) {
	done := make(chan struct{})
	c.conn.SetReadDeadline(time.Time{})
	go func() {
		defer close(done)
		if _, err := c.conn.Peek(1); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return // the watch was ended
			}
			gone <- fmt.Errorf("server closed the control connection during the measurement: %w", proto.ErrPeerGone)
		} else {
			// Only peek: the frame is read by the measuring goroutine once
			// the watch has ended, so no deadline of ours cuts it in two.
			gone <- errPeerSpoke
		}
		c.stop.Set()
	}()
	return func() {
		c.conn.SetReadDeadline(time.Now())
		<-done
		c.conn.SetReadDeadline(time.Time{})
	}
}

// errPeerSpoke says the server sent a frame during the measurement.
var errPeerSpoke = errors.New("server sent a message during the measurement")

// whatPeerSaid reads the frame the server sent during the measurement: the
// error its loops hit (reportLoopFailure), or something it should not send.
func (c *clientRun) whatPeerSaid() error {
	_, err := c.conn.Recv(proto.HandshakeTimeout)
	var said *proto.PeerError
	if errors.As(err, &said) {
		return fmt.Errorf("server: %s", said.Text)
	}
	return errors.New("server sent an unexpected message during the measurement")
}
