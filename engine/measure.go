package engine

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/verbs"
)

// opcodeFor is the verb an initiator posts for a plan.
func opcodeFor(plan Plan) verbs.SendOpcode {
	switch plan.Test.Op() {
	case "write":
		if plan.Imm {
			return verbs.OpWriteWithImm
		}
		return verbs.OpWrite
	case "read":
		return verbs.OpRead
	case "atomic":
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
	return plan.Test.Op() == "send" || (plan.Test.Op() == "write" && plan.Imm)
}

// margins are the warm-up and cool-down cut from a duration-mode run.
func margins(d time.Duration) time.Duration {
	return min(2*time.Second, d/10)
}

// stepDeadline bounds one measurement step.
func stepDeadline(plan Plan) time.Time {
	return time.Now().Add(plan.Timeout + plan.Duration)
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

// corruptHook is the test hook behind --verify's own test: the message
// number (from 1) to damage, from RDMABENCH_VERIFY_CORRUPT.
func corruptHook() uint64 {
	n, _ := strconv.ParseUint(os.Getenv("RDMABENCH_VERIFY_CORRUPT"), 10, 64)
	return n
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
	remote []Endpoint
	size   int
	nqp    int
	stop   *csrc.Flag
}

// work splits the step's QPs by lane (QP i belongs to lane i % lanes).
func (st *step) work() []laneWork {
	var ws []laneWork
	for l := range st.s.lanes {
		w := laneWork{lane: st.s.lanes[l], cpu: -1}
		for i := l; i < st.nqp; i += len(st.s.lanes) {
			w.qps = append(w.qps, i)
		}
		if len(w.qps) == 0 {
			continue
		}
		if len(st.s.cpus) > 0 {
			w.cpu = st.s.cpus[len(ws)%len(st.s.cpus)]
		}
		ws = append(ws, w)
	}
	return ws
}

// qpSet lays the lanes' QPs out contiguously; bounds[l] is lane l's range
// and order maps set positions back to QP indices. Loops that receive keep
// recvs receives posted per QP; what earlier loops left posted counts.
func (st *step) qpSet(ws []laneWork, recvs int) (set *csrc.QPSet, bounds [][2]int, order []int) {
	for _, w := range ws {
		bounds = append(bounds, [2]int{len(order), len(order) + len(w.qps)})
		order = append(order, w.qps...)
	}
	targets := st.s.targets(order, st.remote)
	for pos, qi := range order {
		targets[pos].PrepostRecvs = max(0, recvs-st.s.recvPosted[qi])
		st.s.recvPosted[qi] = max(st.s.recvPosted[qi], recvs)
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
		UseInline: st.size <= st.s.inline && (plan.Test.Op() == "send" || plan.Test.Op() == "write"),
		UDGRH:     plan.Transport == "UD",
		Stop:      st.stop,
		Verify:    plan.Verify, Seed: verifySeed(st.size),
		Slots: uint32(st.s.slots), SlotStride: uint64(st.s.stride),
	}
}

// txDepth and rxDepth are the requests in flight per QP; --verify gives each
// its own slot, so there are no more than slots.
func (st *step) txDepth() int {
	if st.plan.Verify {
		return min(st.plan.TxDepth, st.s.slots)
	}
	return st.plan.TxDepth
}

func (st *step) rxDepth() int {
	if st.plan.Verify {
		return min(st.plan.RxDepth, st.s.slots)
	}
	return st.plan.RxDepth
}

// pinned runs f on a thread pinned to cpu (when cpu ≥ 0).
func pinned(cpu int, f func()) {
	if cpu >= 0 {
		if err := pinThread(cpu); err == nil {
			defer runtime.UnlockOSThread()
		}
	}
	f()
}

// bwOutcome is what the bandwidth loops of one side measured.
type bwOutcome struct {
	perQP    []uint64 // measured messages per QP index
	last     []uint64 // messages of the last call per QP (--verify's slot contents)
	seconds  float64
	peakBps  float64
	err      error
	partial  bool // stopped (Ctrl-C) with figures
	messages uint64
}

// postBW runs the initiator loops on every lane: an optional warm-up call,
// then the measured one. progress, when set, counts completions for interval
// reports.
func (st *step) postBW(progress *csrc.Counter) bwOutcome {
	plan := st.plan
	ws := st.work()
	set, bounds, order := st.qpSet(ws, 0)
	defer set.Free()
	base := st.params(set)
	base.CorruptMsg = corruptHook()
	runAll := func(p csrc.Params) []csrc.Result {
		results := make([]csrc.Result, len(ws))
		var wg sync.WaitGroup
		for l, w := range ws {
			wg.Add(1)
			go func() {
				defer wg.Done()
				lp := p
				lp.Lo, lp.Hi, lp.CQ = bounds[l][0], bounds[l][1], w.lane.sendCQ
				pinned(w.cpu, func() { results[l] = csrc.Run(csrc.BWPost, lp) })
			}()
		}
		wg.Wait()
		return results
	}
	firstErr := func(rs []csrc.Result) (csrc.Result, bool) {
		for _, r := range rs {
			if r.Status != csrc.OK {
				return r, true
			}
		}
		return csrc.Result{}, false
	}
	if plan.Duration == 0 && plan.Warmup > 0 {
		p := base
		p.Iterations, p.Deadline = plan.Warmup, stepDeadline(plan)
		if r, bad := firstErr(runAll(p)); bad {
			return bwOutcome{err: r.Err("warm-up")}
		}
	}
	p := base
	p.Deadline, p.Progress = stepDeadline(plan), progress
	if plan.Duration > 0 {
		now := time.Now()
		m := margins(plan.Duration)
		p.End, p.MeasureFrom, p.MeasureTo = now.Add(plan.Duration), now.Add(m), now.Add(plan.Duration-m)
	} else {
		p.Iterations, p.PatternBase = plan.Iterations, st.patternBase()
	}
	results := runAll(p)
	out := bwOutcome{perQP: make([]uint64, st.nqp), last: make([]uint64, st.nqp)}
	for pos, qi := range order {
		c := set.Counts(pos)
		out.perQP[qi], out.last[qi] = c.Measured, c.Completed
		out.messages += c.Measured
	}
	var start, end time.Duration
	for l, r := range results {
		if l == 0 || r.Start < start {
			start = r.Start
		}
		end = max(end, r.End)
		out.peakBps += r.PeakBytesPerSec
	}
	out.seconds = (end - start).Seconds()
	if r, bad := firstErr(results); bad {
		out.err = r.Err(string(plan.Test))
		out.partial = r.Status == csrc.Stopped && out.messages > 0
	}
	return out
}

// passiveLoops are the loops the peer's traffic drives, one per lane:
// receive loops of send tests and ping-pong responders. They start before
// "ready" and end by themselves once they have seen iters messages per QP
// (0: when stopped).
type passiveLoops struct {
	set     *csrc.QPSet
	order   []int
	results []csrc.Result
	done    chan struct{}
	stop    *csrc.Flag
	what    string
}

// startPassive starts kind on every lane (polling the CQ cq picks), each
// keeping recvs receives posted per QP, and returns once all have posted
// them, so the peer's first message finds one.
func (st *step) startPassive(kind csrc.Kind, what string, recvs int, cq func(lane) *verbs.CQ, iters uint64) (*passiveLoops, error) {
	ws := st.work()
	set, bounds, order := st.qpSet(ws, recvs)
	pl := &passiveLoops{set: set, order: order, results: make([]csrc.Result, len(ws)), done: make(chan struct{}), stop: st.stop, what: what}
	p := st.params(set)
	p.Iterations, p.Deadline = iters, stepDeadline(st.plan)
	readies := make([]*csrc.Flag, len(ws))
	var wg sync.WaitGroup
	for l, w := range ws {
		readies[l] = csrc.NewFlag()
		wg.Add(1)
		go func() {
			defer wg.Done()
			lp := p
			lp.Lo, lp.Hi, lp.CQ, lp.Ready = bounds[l][0], bounds[l][1], cq(w.lane), readies[l]
			pinned(w.cpu, func() { pl.results[l] = csrc.Run(kind, lp) })
		}()
	}
	go func() {
		wg.Wait()
		for _, f := range readies {
			f.Free()
		}
		close(pl.done)
	}()
	deadline := time.Now().Add(HandshakeTimeout)
	for _, f := range readies {
		for !f.IsSet() {
			select {
			case <-pl.done:
				if _, err := pl.finish(0); err != nil {
					return nil, err
				}
				return nil, fmt.Errorf("%s ended before it was ready", what)
			default:
			}
			if time.Now().After(deadline) {
				pl.finish(0)
				return nil, fmt.Errorf("%s did not start", what)
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	return pl, nil
}

// recvOutcome is what receive loops saw.
type recvOutcome struct {
	received uint64
	badBytes uint64
}

// finish waits for the loops, stopping them after grace (duration mode, or
// messages lost, as UC and UD may). A stopped loop is no failure.
func (pl *passiveLoops) finish(grace time.Duration) (recvOutcome, error) {
	select {
	case <-pl.done:
	case <-time.After(grace):
		pl.stop.Set()
		<-pl.done
	}
	defer pl.set.Free()
	var out recvOutcome
	for pos := range pl.order {
		c := pl.set.Counts(pos)
		out.received += c.Completed
		out.badBytes += c.BadBytes
	}
	for _, r := range pl.results {
		if r.Status != csrc.OK && r.Status != csrc.Stopped {
			return out, r.Err(pl.what)
		}
	}
	return out, nil
}

// startRecv starts the receive loops of a send test.
func (st *step) startRecv(iters uint64) (*passiveLoops, error) {
	return st.startPassive(csrc.BWRecv, "receive loop", st.rxDepth(), func(l lane) *verbs.CQ { return l.recvCQ }, iters)
}
