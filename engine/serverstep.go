package engine

// One step of a served plan: the passive loops, the verdict, and the
// watch on the loops while the client measures.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/proto"
)

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
