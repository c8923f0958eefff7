package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/verbs"
)

// opcodeFor is the verb an initiator posts for a plan.
func opcodeFor(plan Plan) verbs.SendOpcode {
	switch plan.Test.Op() {
	case OpWrite:
		if plan.Imm || plan.WriteLatByCompletion() {
			return verbs.OpWriteWithImm
		}
		return verbs.OpWrite
	case OpRead:
		return verbs.OpRead
	case OpAtomic:
		if plan.Atomic == CmpAndSwap {
			return verbs.OpCompareSwap
		}
		return verbs.OpFetchAdd
	}
	if plan.Imm {
		return verbs.OpSendWithImm
	}
	return verbs.OpSend
}

// receives reports whether the passive side posts receives: SEND, and
// WRITE_WITH_IMM, which consumes a receive too.
func receives(plan Plan) bool {
	return plan.Test.Op() == OpSend || (plan.Test.Op() == OpWrite && (plan.Imm || plan.WriteLatByCompletion()))
}

// margins are the warm-up and cool-down cut from a duration-mode run.
func margins(d time.Duration) time.Duration {
	return min(2*time.Second, d/10)
}

// floorBytesPerSec is the slowest rate a live link is assumed to carry: an
// iteration-mode step's deadline grows with its bytes at this rate, so that
// `-a -n 1000` over a slow or lossy link is not taken for a dead peer. Dead
// peers are found sooner anyway, by retry-exceeded completions and the
// control connection.
const floorBytesPerSec = 1 << 20

// stepTime bounds one measurement step of size bytes per message: the
// Timeout, the bytes at the floor rate (or the duration), a --load pass, and
// each --rate pass at its longest, twice its planned span and the grace
// after which an overloaded pass is cut.
func stepTime(plan Plan, size int) time.Duration {
	d := plan.Timeout + plan.Duration
	if plan.Duration == 0 {
		bytes := float64(size) * float64(plan.Warmup+plan.Iterations) * float64(plan.MaxQPs())
		// Clamped before the conversion: 8 MiB × 2^32 iterations is beyond
		// a Duration, and an out-of-range conversion turned it negative
		// (a deadline in the past). A century is as good as forever.
		d += time.Duration(min(bytes/floorBytesPerSec, maxStepSeconds) * float64(time.Second))
	}
	// --load: the loaded ping-pong is a second pass, as long as the first
	// or (sharing the link, and CPUs where there are few) longer, and
	// extended until the loads have a figure.
	if len(plan.Loads) > 0 {
		d += plan.Timeout + loadWarmup + loadMaxExtension
	}
	// Each --rate pass takes its requests over the rate at least, and a
	// rate the path cannot carry at most twice that and the grace: the loop
	// stops posting then (csrc.RateCutGrace), and what it posted drains
	// within the slack of the Timeout. The passes share the step's
	// deadline with the idle ping-pong on the passive side (the responders
	// run from the step's start), so every pass counts.
	for _, r := range plan.Rates {
		span := float64(plan.Warmup+plan.Iterations) / float64(max(r, 1))
		d += time.Duration(2*span*float64(time.Second)) + csrc.RateCutGrace
	}
	return d
}

// StepTime is how long the client gives one size of a plan (its largest)
// before the step fails: for a one-size plan, the bound on its measurement,
// which callers that run plans (the mesh) add up to bound their waits.
func StepTime(plan Plan) time.Duration { return stepTime(plan, plan.MaxSize()) }

// maxStepSeconds caps the byte-driven part of a step's deadline.
const maxStepSeconds = 100 * 365 * 24 * 3600

// stepDeadline bounds one measurement step from now.
func (st *step) stepDeadline() time.Time {
	return time.Now().Add(stepTime(st.plan, st.size))
}

// latencyChunk is how many ping-pongs one C call runs in duration mode, so
// the sample buffer stays small however long the run; latencyMaxSamples (32
// MiB of samples) bounds one call in iteration mode.
const (
	latencyChunk      = 1024
	latencyMaxSamples = 4 << 20
)

// verifySeed seeds the --verify pattern; both sides derive it from the size.
func verifySeed(size int) uint32 { return uint32(size)*2654435761 + 1 }

// stallFor is the pause of the stall hook.
const stallFor = 50 * time.Millisecond

// session is one side of a connected session, client or server: the plan,
// this side's resources, the control connection, the peer's endpoints, the
// flag that stops the loops, and the loads. The side's owner (the client
// run, the server's session) closes what it holds.
type session struct {
	plan   Plan
	s      *side
	conn   *proto.Conn
	remote []proto.Endpoint
	stop   *csrc.Flag
	loads  *loadSet
}

// laneWork is one thread's share of a step: its QPs and CQs.
type laneWork struct {
	qps  []int
	lane lane
	cpu  int // -1: not pinned
}

// step is one measurement on one side: one message size over the first nqp
// QPs of the connection.
type step struct {
	plan   Plan
	s      *side
	remote []proto.Endpoint
	size   int
	nqp    int
	stop   *csrc.Flag
	// tagBase is where a write-lat initiator's tags start: a second
	// ping-pong of the step (--load) continues the responder's count.
	tagBase uint32
}

// work splits the step's QPs by lane (QP i belongs to lane i % lanes). Loops
// of one role (initiators, or passive loops) take CPUs from the side's list
// in turn; passive loops that run beside initiators (-b) take the CPUs after
// theirs. A plan that needs more loops than CPUs was refused unless the user
// allowed sharing.
func (st *step) work(role loopRole) []laneWork {
	var ws []laneWork
	first := 0
	if role == passiveRole && st.plan.Bidirectional {
		first = len(st.s.lanes)
	}
	for l := range st.s.lanes {
		w := laneWork{lane: st.s.lanes[l], cpu: -1}
		for i := l; i < st.nqp; i += len(st.s.lanes) {
			w.qps = append(w.qps, i)
		}
		if len(w.qps) == 0 {
			continue
		}
		if len(st.s.cpus) > 0 {
			w.cpu = st.s.cpus[(first+len(ws))%len(st.s.cpus)]
		}
		ws = append(ws, w)
	}
	return ws
}

// loopRole says which loops a lane runs: the initiators', or the passive
// ones the peer's traffic drives (receivers, responders).
type loopRole int

const (
	initiatorRole loopRole = iota
	passiveRole
)

// qpSet lays the lanes' QPs out contiguously; bounds[l] is lane l's range
// and order maps set positions back to QP indices. Loops that receive keep
// recvs receives posted per QP; what earlier loops left posted counts.
func (st *step) qpSet(ws []laneWork, recvs int) (set *csrc.QPSet, bounds [][2]int, order []int) {
	for _, w := range ws {
		bounds = append(bounds, [2]int{len(order), len(order) + len(w.qps)})
		order = append(order, w.qps...)
	}
	targets := st.s.targets(order, st.remote)
	slow := hooks().SlowQP
	for pos, qi := range order {
		targets[pos].PrepostRecvs = max(0, recvs-st.s.recvPosted[qi])
		st.s.recvPosted[qi] = max(st.s.recvPosted[qi], recvs)
		if qi == slow {
			targets[pos].MaxInFlight, targets[pos].PostGap = 1, 5*time.Millisecond
		}
	}
	return csrc.NewQPSet(targets), bounds, order
}

// params are the loop parameters every lane shares.
func (st *step) params(set *csrc.QPSet) csrc.Params {
	plan := st.plan
	return csrc.Params{
		Set: set, Opcode: opcodeFor(plan), Size: uint32(st.size), Imm: 0x5eed,
		CompareAdd: 1, Swap: 1,
		TxDepth: uint32(st.txDepth()), RxDepth: uint32(st.rxDepth()),
		CQMod: uint32(plan.CQMod), PostList: uint32(plan.PostList),
		UseInline: st.size <= st.s.inline && (plan.Test.Op() == OpSend || plan.Test.Op() == OpWrite),
		// A side on GPU memory neither fills nor checks messages in the
		// loops (its CPU cannot reach the memory): it does both through
		// cudaMemcpy around them; every message then carries one pattern.
		FixedPattern: plan.DeviceMemory(),
		UDGRH:        plan.Transport == UD,
		Interval:     plan.Interval,
		Stop:         st.stop,
		Verify:       plan.Verify && st.s.mem.gpu == nil, Seed: verifySeed(st.size),
		Slots: uint32(st.s.slots), SlotStride: uint64(st.s.stride),
		StallAt: hooks().StallAt, StallFor: stallFor,
	}
}

// txDepth and rxDepth are the requests in flight per QP; --verify gives each
// its own slot, so there are no more than slots.
func (st *step) txDepth() int {
	if st.plan.Verify {
		return min(st.s.txDepth, st.s.slots)
	}
	return st.s.txDepth
}

func (st *step) rxDepth() int {
	if st.plan.Verify {
		return min(st.s.rxDepth, st.s.slots)
	}
	return st.s.rxDepth
}

// bwOutcome is what the bandwidth loops of one side measured.
type bwOutcome struct {
	perQP        []uint64  // measured messages per QP index
	perQPSeconds []float64 // each QP's own measured interval
	last         []uint64  // messages of the last call per QP (--verify's slot contents)
	seconds      float64   // first QP's start to the last QP's end
	burstBps     float64   // highest rate of all lanes together (bytes/s)
	minCQMod     uint32    // the lowest CQ moderation a loop used (--interval)
	err          error
	partial      bool // stopped (Ctrl-C) with figures
	messages     uint64
}

// runLanes runs one loop of kind on every lane, all started at once: each
// loop sets up, says ready, and waits for the shared start flag, which is
// set once every lane is ready. It returns when all have ended.
func (st *step) runLanes(kind csrc.Kind, ws []laneWork, bounds [][2]int, p csrc.Params, cq func(lane) *verbs.CQ) ([]csrc.Result, error) {
	results := make([]csrc.Result, len(ws))
	readies := make([]*csrc.Flag, len(ws))
	start := csrc.NewFlag()
	defer start.Free()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for l, w := range ws {
		readies[l] = csrc.NewFlag()
		defer readies[l].Free()
		lp := p
		lp.Lo, lp.Hi, lp.CQ, lp.Ready, lp.Start = bounds[l][0], bounds[l][1], cq(w.lane), readies[l], start
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.pinned(w.cpu, func() { results[l] = csrc.Run(kind, lp) })
		}()
	}
	go func() { wg.Wait(); close(done) }()
	// A loop that ends before it is ready (an error) leaves the others
	// waiting at the start line: release them, they end on the stop flag.
	// The loops' own deadline bounds the wait.
	err := awaitReady(readies, done, p.Deadline)
	if err != nil {
		st.stop.Set()
		err = fmt.Errorf("a loop %w", err)
	}
	start.Set()
	<-done
	return results, err
}

// firstErr is the loop result that says what went wrong: a failure of its
// own rather than a consequence of another's, a loop stopped because
// another failed or a completion flushed because its QP went to the error
// state (with --threads and a shared CQ, the thread that polled a flush can
// end before the one that polled the cause).
func firstErr(rs []csrc.Result) (csrc.Result, bool) {
	best, rank := -1, 0
	for i, r := range rs {
		var k int
		switch {
		case r.Status == csrc.OK:
			continue
		case r.Status == csrc.Stopped:
			k = 1
		case r.Status == csrc.WCError && r.WCStatus == verbs.WCWRFlushErr:
			k = 2
		default:
			k = 3
		}
		if k > rank {
			best, rank = i, k
		}
	}
	if best < 0 {
		return csrc.Result{}, false
	}
	return rs[best], true
}

// awaitReady waits until every flag is set, the loops end (done), or the
// deadline passes.
func awaitReady(readies []*csrc.Flag, done <-chan struct{}, deadline time.Time) error {
	for _, f := range readies {
		for !f.IsSet() {
			select {
			case <-done:
				return errEndedEarly
			default:
			}
			if time.Now().After(deadline) {
				return errNotStarted
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return nil
}

var (
	errEndedEarly = errors.New("ended before it was ready")
	errNotStarted = errors.New("did not start")
)

// postBW runs the initiator loops on every lane: an optional warm-up call,
// then the measured one. progress, when set, counts completions for interval
// reports.
func (st *step) postBW(progress *csrc.Counter) bwOutcome {
	plan := st.plan
	ws := st.work(initiatorRole)
	set, bounds, order := st.qpSet(ws, 0)
	defer set.Free()
	// Every lane reads the shared counter for the burst rate of all lanes.
	if progress == nil {
		progress = csrc.NewCounter()
		defer progress.Free()
	}
	base := st.params(set)
	base.CorruptMsg = hooks().CorruptMessage
	sendCQ := func(l lane) *verbs.CQ { return l.sendCQ }
	if plan.Duration == 0 && plan.Warmup > 0 {
		warm := csrc.NewCounter()
		defer warm.Free()
		p := base
		p.Iterations, p.Deadline, p.Progress = plan.Warmup, st.stepDeadline(), warm
		results, err := st.runLanes(csrc.BWPost, ws, bounds, p, sendCQ)
		if err != nil {
			return bwOutcome{err: fmt.Errorf("warm-up: %w", err)}
		}
		if r, bad := firstErr(results); bad {
			return bwOutcome{err: r.Err("warm-up")}
		}
	}
	p := base
	p.Deadline, p.Progress = st.stepDeadline(), progress
	if plan.Duration > 0 {
		now := time.Now()
		m := margins(plan.Duration)
		p.End, p.MeasureFrom, p.MeasureTo = now.Add(plan.Duration), now.Add(m), now.Add(plan.Duration-m)
	} else {
		p.Iterations, p.PatternBase = plan.Iterations, st.patternBase()
	}
	results, startErr := st.runLanes(csrc.BWPost, ws, bounds, p, sendCQ)
	out := bwOutcome{perQP: make([]uint64, st.nqp), perQPSeconds: make([]float64, st.nqp), last: make([]uint64, st.nqp)}
	var start, end time.Duration
	for pos, qi := range order {
		c := set.Counts(pos)
		out.perQP[qi], out.perQPSeconds[qi], out.last[qi] = c.Measured, c.Seconds(), c.Completed
		out.messages += c.Measured
		if c.End > c.Start {
			if start == 0 || c.Start < start {
				start = c.Start
			}
			end = max(end, c.End)
		}
	}
	out.seconds = (end - start).Seconds()
	for l, r := range results {
		out.burstBps = max(out.burstBps, r.BurstBytesPerSec)
		if l == 0 || r.MinCQMod < out.minCQMod {
			out.minCQMod = r.MinCQMod
		}
	}
	if r, bad := firstErr(results); bad {
		out.err = r.Err(string(plan.Test))
		out.partial = r.Status == csrc.Stopped && out.messages > 0
	}
	if startErr != nil {
		out.err, out.partial = fmt.Errorf("%s: %w", plan.Test, startErr), false
	}
	return out
}

// passiveLoops are the loops the peer's traffic drives, one per lane:
// receive loops of send tests and ping-pong responders. They start before
// "ready" and end by themselves once they have seen iters messages per QP
// (0: when stopped). One owner calls finish (or close, on every path: it
// stops and joins the loops before anything they touch is freed).
type passiveLoops struct {
	set     *csrc.QPSet
	order   []int
	results []csrc.Result
	done    chan struct{}
	stop    *csrc.Flag
	what    string
	freed   bool
}

// startPassive starts kind on every lane (polling the CQ cq picks), each
// keeping recvs receives posted per QP, and returns once all have posted
// them, so the peer's first message finds one. With one shared CQ a single
// loop serves every QP: threads polling one CQ would take each other's
// completions, and per-QP message order (--verify) is that CQ's order.
func (st *step) startPassive(kind csrc.Kind, what string, recvs int, cq func(lane) *verbs.CQ, iters uint64) (*passiveLoops, error) {
	ws := st.work(passiveRole)
	if st.plan.SharedCQ && len(ws) > 1 {
		all := laneWork{lane: ws[0].lane, cpu: ws[0].cpu}
		for _, w := range ws {
			all.qps = append(all.qps, w.qps...)
		}
		ws = []laneWork{all}
	}
	set, bounds, order := st.qpSet(ws, recvs)
	pl := &passiveLoops{set: set, order: order, results: make([]csrc.Result, len(ws)), done: make(chan struct{}), stop: st.stop, what: what}
	p := st.params(set)
	p.Iterations, p.Deadline = iters, st.stepDeadline()
	readies := make([]*csrc.Flag, len(ws))
	var wg sync.WaitGroup
	for l, w := range ws {
		readies[l] = csrc.NewFlag()
		lp := p
		lp.Lo, lp.Hi, lp.CQ, lp.Ready = bounds[l][0], bounds[l][1], cq(w.lane), readies[l]
		wg.Add(1)
		go func() {
			defer wg.Done()
			st.pinned(w.cpu, func() { pl.results[l] = csrc.Run(kind, lp) })
			if s := pl.results[l].Status; s != csrc.OK && s != csrc.Stopped {
				pl.stop.Set() // the step has failed: the other lanes end too
			}
		}()
	}
	go func() {
		wg.Wait()
		for _, f := range readies {
			f.Free()
		}
		close(pl.done)
	}()
	if err := awaitReady(readies, pl.done, time.Now().Add(proto.HandshakeTimeout)); err != nil {
		if _, ferr := pl.finish(0); ferr != nil {
			return nil, ferr
		}
		return nil, fmt.Errorf("%s %w", what, err)
	}
	return pl, nil
}

// recvOutcome is what receive loops saw.
type recvOutcome struct {
	received uint64
	badBytes uint64
}

// finish waits for the loops, stopping them after grace (duration mode, or
// messages lost, as UC and UD may), and frees their QP set. A stopped loop
// is no failure. Only the first call reads the figures.
func (pl *passiveLoops) finish(grace time.Duration) (recvOutcome, error) {
	if pl == nil || pl.freed {
		return recvOutcome{}, nil
	}
	select {
	case <-pl.done:
	case <-time.After(grace):
		pl.stop.Set()
		<-pl.done
	}
	pl.freed = true
	defer pl.set.Free()
	var out recvOutcome
	for pos := range pl.order {
		c := pl.set.Counts(pos)
		out.received += c.Completed
		out.badBytes += c.BadBytes
	}
	return out, pl.failure()
}

// failure is the first loop's error, once the loops have ended (done).
func (pl *passiveLoops) failure() error {
	for _, r := range pl.results {
		if r.Status != csrc.OK && r.Status != csrc.Stopped {
			return r.Err(pl.what)
		}
	}
	return nil
}

// close stops and joins the loops if finish has not: the one call every
// path out of a step makes (deferred) before the side's memory may go.
func (pl *passiveLoops) close() {
	if pl != nil && !pl.freed {
		pl.finish(0)
	}
}

// startRecv starts the receive loops of a send test.
func (st *step) startRecv(iters uint64) (*passiveLoops, error) {
	return st.startPassive(csrc.BWRecv, "receive loop", st.rxDepth(), func(l lane) *verbs.CQ { return l.recvCQ }, iters)
}
