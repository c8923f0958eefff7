package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
)

// DefaultPort is the control port, perftest's.
const DefaultPort = 18515

// ErrInterrupted says the run was stopped (Ctrl-C) before it finished.
var ErrInterrupted = errors.New("interrupted")

// ClientConfig is everything the client side of a run needs.
type ClientConfig struct {
	Addr   string // host:port of the server
	Device DeviceConfig
	Plan   Plan
	// Text, when set, receives the perftest-style table as results arrive,
	// so that an interrupted run still shows what was measured.
	Text     io.Writer
	TextOpts TextOptions
	// Raw, when set, receives every latency sample as "size,iteration,ns".
	Raw  io.Writer
	Mode string // "client" or "loopback", for the report
}

// RunClient connects to a server, runs the plan and returns what it measured.
// The Run holds every completed size even when an error is returned.
func RunClient(ctx context.Context, cfg ClientConfig) (*Run, error) {
	plan := cfg.Plan
	if err := plan.Validate(); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	d := net.Dialer{Timeout: HandshakeTimeout}
	nc, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("connect to server %s: %w", cfg.Addr, err)
	}
	conn := newConn(nc)
	defer conn.Close()
	if err := conn.sendGreeting(); err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", cfg.Addr, err)
	}
	if err := conn.readGreeting(); err != nil {
		return nil, fmt.Errorf("handshake with %s: %w", cfg.Addr, err)
	}
	s, err := openSide(cfg.Device, plan)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	local, err := s.endpoint()
	if err != nil {
		return nil, err
	}
	if err := conn.Send(Message{Type: "plan", Plan: &plan, Endpoint: &local}, HandshakeTimeout); err != nil {
		return nil, err
	}
	acc, err := conn.expect("accept", HandshakeTimeout)
	if err != nil {
		return nil, fmt.Errorf("server %s refused the plan: %w", cfg.Addr, err)
	}
	if acc.Endpoint == nil {
		return nil, errors.New("protocol error: accept without an endpoint")
	}
	remote := *acc.Endpoint
	if err := s.connect(remote, plan); err != nil {
		return nil, err
	}
	mode := cfg.Mode
	if mode == "" {
		mode = "client"
	}
	run := &Run{
		Test: plan.Test, Device: s.ctx.Name(), Port: s.port, GIDIndex: s.gidIndex, GID: s.gidDesc,
		MTU: pathMTU(plan, s.activeMTU, remote.MTU), LinkLayer: s.linkLayer, Transport: "RC", Mode: mode,
		Peer: cfg.Addr, TxDepth: plan.TxDepth, CQMod: plan.CQMod, Inline: s.inline,
		Duration: plan.Duration.Seconds(), Results: []Result{},
	}
	if plan.Test.IsLatency() {
		run.Latency = LatencyMeaning(plan.Test)
	}
	if cfg.Text != nil {
		if err := run.WriteTextHeader(cfg.Text, cfg.TextOpts); err != nil {
			return run, err
		}
	}
	stop := csrc.NewStopFlag()
	defer stop.Free()
	// Ctrl-C (ctx) stops the running loop; the loop returns what it has.
	stopOnCancel := context.AfterFunc(ctx, stop.Set)
	defer stopOnCancel()

	c := &clientRun{cfg: cfg, plan: plan, s: s, conn: conn, remote: remote, stop: stop}
	for _, size := range plan.Sizes {
		res, err := c.measure(ctx, size)
		if err != nil {
			if ctx.Err() != nil {
				run.Interrupted = true
				if res.Partial {
					// What the interrupted size measured before Ctrl-C.
					run.Results = append(run.Results, res)
					if cfg.Text != nil {
						run.WriteTextRow(cfg.Text, res, cfg.TextOpts)
					}
				}
				err = fmt.Errorf("%w after %d of %d sizes", ErrInterrupted, len(run.Results), len(plan.Sizes))
			}
			run.Error = err.Error()
			if cfg.Text != nil {
				run.WriteTextFooter(cfg.Text)
			}
			return run, err
		}
		run.Results = append(run.Results, res)
		if cfg.Text != nil {
			if err := run.WriteTextRow(cfg.Text, res, cfg.TextOpts); err != nil {
				return run, err
			}
		}
	}
	if cfg.Text != nil {
		run.WriteTextFooter(cfg.Text)
	}
	_ = conn.Send(Message{Type: "bye"}, HandshakeTimeout)
	return run, nil
}

type clientRun struct {
	cfg    ClientConfig
	plan   Plan
	s      *side
	conn   *Conn
	remote Endpoint
	stop   *csrc.StopFlag
	tag    uint32 // write-lat tags continue across calls
}

// measure runs one message size: announce, warm up, measure, collect the
// server's verdict.
func (c *clientRun) measure(ctx context.Context, size int) (Result, error) {
	plan := c.plan
	total := uint64(0) // what the server's loop should expect; 0 = until told
	if plan.Duration == 0 {
		total = plan.Warmup + plan.Iterations
	}
	if err := c.conn.Send(Message{Type: "run", Size: size, Iters: total}, HandshakeTimeout); err != nil {
		return Result{}, err
	}
	if _, err := c.conn.expect("ready", HandshakeTimeout); err != nil {
		return Result{}, fmt.Errorf("size %d: %w", size, err)
	}
	// While the loop runs the server says nothing: any byte or a closed
	// connection means it failed or died, so stop instead of spinning.
	peerGone := make(chan error, 1)
	watchDone := c.watchPeer(peerGone)
	res, err := c.runLoops(size)
	watchDone()
	if ctx.Err() != nil { // Ctrl-C: keep what the loop measured, tell nobody
		return res, ErrInterrupted
	}
	select {
	case perr := <-peerGone:
		return Result{}, fmt.Errorf("size %d: %w (measurement: %v)", size, perr, err)
	default:
	}
	if err != nil {
		return Result{}, fmt.Errorf("size %d: %w", size, err)
	}
	if err := c.conn.Send(Message{Type: "done"}, HandshakeTimeout); err != nil {
		return Result{}, err
	}
	verdict, err := c.conn.expect("result", plan.Timeout)
	if err != nil {
		return Result{}, fmt.Errorf("size %d: %w", size, err)
	}
	if verdict.Error != "" {
		return Result{}, fmt.Errorf("size %d: server: %s", size, verdict.Error)
	}
	return res, nil
}

// watchPeer watches the control connection during a loop; the returned
// function ends the watch.
func (c *clientRun) watchPeer(gone chan<- error) (stopWatch func()) {
	done := make(chan struct{})
	c.conn.c.SetReadDeadline(time.Time{})
	go func() {
		defer close(done)
		if _, err := c.conn.rd.Peek(1); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return // the watch was ended
			}
			gone <- fmt.Errorf("server closed the control connection during the measurement: %w", ErrPeerGone)
		} else {
			gone <- errors.New("server sent an unexpected message during the measurement")
		}
		c.stop.Set()
	}()
	return func() {
		c.conn.c.SetReadDeadline(time.Now())
		<-done
		c.conn.c.SetReadDeadline(time.Time{})
	}
}

func (c *clientRun) runLoops(size int) (Result, error) {
	plan := c.plan
	p := c.s.loopParams(plan, size, c.remote, c.stop)
	p.Initiator = true
	p.Prepost = true
	kind := initiatorKind(plan.Test)
	if plan.Test.IsLatency() {
		return c.runLatency(kind, p, size)
	}
	if plan.Duration == 0 && plan.Warmup > 0 {
		p.Iterations, p.Deadline = plan.Warmup, stepDeadline(plan)
		if r := csrc.Run(kind, p); r.Status != csrc.OK {
			return Result{}, r.Err("warm-up")
		}
	}
	p.Deadline = stepDeadline(plan)
	if plan.Duration > 0 {
		now := time.Now()
		m := margins(plan.Duration)
		p.Iterations = 0
		p.End, p.MeasureFrom, p.MeasureTo = now.Add(plan.Duration), now.Add(m), now.Add(plan.Duration-m)
	} else {
		p.Iterations = plan.Iterations
	}
	r := csrc.Run(kind, p)
	if r.Status == csrc.Stopped && r.Completed > 0 {
		res := BandwidthResult(size, r.Completed, r.Elapsed().Seconds(), r.PeakBytesPerSec)
		res.Partial = true
		return res, r.Err(string(plan.Test))
	}
	if r.Status != csrc.OK {
		return Result{}, r.Err(string(plan.Test))
	}
	return BandwidthResult(size, r.Completed, r.Elapsed().Seconds(), r.PeakBytesPerSec), nil
}

func (c *clientRun) runLatency(kind csrc.Kind, p csrc.Params, size int) (Result, error) {
	plan := c.plan
	rec := NewLatencyRecorder()
	half := plan.Test != ReadLat // send and write report half the round trip, as perftest
	n := uint64(latencyChunk)
	if plan.Duration == 0 {
		n = min(n, max(plan.Iterations, plan.Warmup, 1))
	}
	samples := make([]uint64, n)
	p.Samples = samples
	p.Deadline = stepDeadline(plan)
	iter := uint64(0)
	// chunk runs up to n ping-pongs in one C call; keep decides from the
	// call's start and end whether its samples count.
	chunk := func(n uint64, keep func(start, end time.Time) bool) error {
		p.Iterations, p.TagBase = n, c.tag
		start := time.Now()
		r := csrc.Run(kind, p)
		c.tag += uint32(r.Completed)
		p.Prepost = false
		var loopErr error
		if r.Status != csrc.OK {
			loopErr = r.Err(string(plan.Test))
			if r.Status != csrc.Stopped {
				return loopErr
			}
			// Stopped (Ctrl-C): the samples taken so far still count.
		}
		if !keep(start, time.Now()) {
			return loopErr
		}
		for _, ns := range samples[:r.Samples] {
			if half {
				ns /= 2
			}
			rec.Record(int64(ns))
			if c.cfg.Raw != nil {
				if _, err := fmt.Fprintf(c.cfg.Raw, "%d,%d,%d\n", size, iter, ns); err != nil {
					return fmt.Errorf("write raw samples: %w", err)
				}
			}
			iter++
		}
		return loopErr
	}
	if plan.Duration > 0 {
		// Chunks that start after the warm-up margin and end before the
		// cool-down margin count.
		now := time.Now()
		m := margins(plan.Duration)
		end, from, to := now.Add(plan.Duration), now.Add(m), now.Add(plan.Duration-m)
		inside := func(start, end time.Time) bool { return !start.Before(from) && !end.After(to) }
		// Size chunks to about 1/50 of the run from the pace so far, so
		// that slow round trips still leave many chunks inside the margins.
		chunkLen, done := uint64(16), uint64(0)
		for time.Now().Before(end) {
			if err := chunk(chunkLen, inside); err != nil {
				return c.partialLatency(rec, size, err)
			}
			done += chunkLen
			perIter := time.Since(now) / time.Duration(done)
			chunkLen = uint64(max(16, min(int64(n), int64(plan.Duration/50/max(perIter, 1)))))
		}
	} else {
		for left := plan.Warmup; left > 0; left -= min(left, n) {
			if err := chunk(min(left, n), never); err != nil {
				return Result{}, fmt.Errorf("warm-up: %w", err)
			}
		}
		for left := plan.Iterations; left > 0; left -= min(left, n) {
			if err := chunk(min(left, n), always); err != nil {
				return c.partialLatency(rec, size, err)
			}
		}
	}
	if rec.Count() == 0 {
		return Result{}, errors.New("no latency samples in the measured interval (run longer)")
	}
	st := rec.Stats()
	return Result{Size: size, Iterations: rec.Count(), Lat: &st, Hist: rec.Hist}, nil
}

// partialLatency returns the samples recorded before a loop error, marked
// partial, when there are any.
func (c *clientRun) partialLatency(rec *LatencyRecorder, size int, err error) (Result, error) {
	if rec.Count() == 0 {
		return Result{}, err
	}
	st := rec.Stats()
	return Result{Size: size, Iterations: rec.Count(), Lat: &st, Hist: rec.Hist, Partial: true}, err
}

func never(_, _ time.Time) bool  { return false }
func always(_, _ time.Time) bool { return true }
