package engine

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

// latencyKinds are the loops of a latency test: the initiator's, and the
// responder's when the passive side takes part (ping-pong).
func latencyKinds(plan Plan) (init csrc.Kind, resp csrc.Kind, pingPong bool) {
	switch plan.Test {
	case SendLat:
		return csrc.LatSend, csrc.LatSend, true
	case WriteLat:
		if plan.WriteLatByCompletion() {
			return csrc.LatSend, csrc.LatSend, true
		}
		return csrc.LatWrite, csrc.LatWrite, true
	}
	return csrc.LatOne, 0, false
}

// rateMeaning is what a --rate sample is.
func rateMeaning(plan Plan) string {
	answer := "the peer's SEND answering it, polled from the CQ"
	switch plan.Test {
	case WriteLat:
		answer = "the peer's WRITE_WITH_IMM answering it, polled from the CQ (WRITE_WITH_IMM both ways: with several in flight a tag in memory could be overwritten unseen; the idle row uses it too)"
	case ReadLat:
		answer = "its completion polled"
	case AtomicLat:
		answer = "its completion polled"
	}
	return fmt.Sprintf("open loop: requests due on a fixed schedule, up to %d in flight a QP; a sample runs from the request's due time to %s (corrected for coordinated omission), the uncorrected one from its actual post; idle: the closed-loop figures in the same units", plan.TxDepth, answer)
}

// writeLatByCompletionMeaning is what a write-lat sample is when a side's
// buffers are GPU memory (Plan.writeLatByCompletion).
const writeLatByCompletionMeaning = "half the round trip: post of the WRITE_WITH_IMM to the peer's WRITE_WITH_IMM polled from the CQ (on GPU memory the CPU cannot poll the last byte as perftest does; with --rate several WRITEs are in flight and a tag in memory could be overwritten unseen); send completions reaped after the sample"

// clearTags zeroes the byte each QP's ping-pong spins on, so that data left
// by an earlier size cannot pass for this one's first tag.
func (st *step) clearTags() {
	if st.plan.WriteLatByCompletion() {
		return // nothing spins on memory
	}
	for i := 0; i < st.nqp; i++ {
		// Host memory only: GPU memory makes writeLatByCompletion true.
		st.s.mem.write(st.s.recvOffset(i)+st.size-1, []byte{0})
	}
}

// latOutcome is the merged result of every QP's ping-pong.
type latOutcome struct {
	rec     *LatencyRecorder
	err     error
	partial bool
}

// latencyInitiators runs one ping-pong per QP, each on its own thread with
// its own recorder; the recorders are merged after the run (never shared).
func (st *step) latencyInitiators(raw io.Writer) latOutcome {
	n := len(st.work(initiatorRole))
	recs := make([]*LatencyRecorder, n)
	errs := make([]error, n)
	var rawMu sync.Mutex
	st.onInitiators(func(l int, w laneWork, p csrc.Params) {
		recs[l], errs[l] = st.pingPong(p, w.qps[0], raw, &rawMu)
	})
	out := latOutcome{rec: NewLatencyRecorder()}
	for l := range n {
		out.rec.Merge(recs[l])
		if errs[l] != nil && out.err == nil {
			out.err = errs[l]
		}
	}
	if out.err != nil && out.rec.Count() > 0 && errors.Is(out.err, csrc.ErrStopped) {
		out.partial = true
	}
	return out
}

// onInitiators runs f once per lane, each on its own thread pinned to the
// lane's CPU, with the lane's loop parameters over the step's QPs (keeping
// the latency receives posted), and returns once all have returned.
func (st *step) onInitiators(f func(l int, w laneWork, p csrc.Params)) {
	ws := st.work(initiatorRole)
	set, bounds, _ := st.qpSet(ws, st.latencyRecvs())
	defer set.Free()
	var wg sync.WaitGroup
	for l, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := st.params(set)
			p.Lo, p.Hi, p.CQ, p.Initiator = bounds[l][0], bounds[l][1], w.lane.sendCQ, true
			st.pinned(w.cpu, func() { f(l, w, p) })
		}()
	}
	wg.Wait()
}

func (st *step) latencyRecvs() int { return st.plan.LatencyRecvs() }

// pingPong is one QP's initiator: warm-up chunks, then measured ones (or,
// in duration mode, chunks until the end, counting those inside the
// margins). Samples of half the round trip for send and write, as perftest.
func (st *step) pingPong(p csrc.Params, qi int, raw io.Writer, rawMu *sync.Mutex) (*LatencyRecorder, error) {
	plan := st.plan
	kind, _, _ := latencyKinds(plan)
	rec := NewLatencyRecorder()
	half := plan.Test == SendLat || plan.Test == WriteLat
	// Iteration mode runs the whole measurement in one call when its samples
	// fit in latencyMaxSamples; duration mode runs chunks of latencyChunk.
	n := uint64(latencyChunk)
	if plan.Duration == 0 {
		n = min(latencyMaxSamples, max(plan.Iterations, plan.Warmup, 1))
	}
	samples := make([]uint64, n)
	p.Samples = samples
	p.Deadline = st.stepDeadline()
	tag, iter := st.tagBase, uint64(0)
	// chunk runs up to n ping-pongs in one C call; keep decides from the
	// call's start and end whether its samples count.
	chunk := func(n uint64, keep func(start, end time.Time) bool) error {
		p.Iterations, p.TagBase = n, tag
		start := time.Now()
		r := csrc.Run(kind, p)
		tag += uint32(r.Completed)
		var loopErr error
		if r.Status != csrc.OK {
			loopErr = r.Err(string(plan.Test)) // stopped: wraps csrc.ErrStopped, and the samples so far still count
			if r.Status != csrc.Stopped {
				return loopErr
			}
		}
		if !keep(start, time.Now()) {
			return loopErr
		}
		if raw != nil {
			rawMu.Lock()
			defer rawMu.Unlock()
		}
		for _, ns := range samples[:r.Samples] {
			if half {
				ns /= 2
			}
			rec.Record(int64(ns))
			if raw != nil {
				if _, err := fmt.Fprintf(raw, "%d,%d,%d,%d\n", st.size, qi, iter, ns); err != nil {
					return fmt.Errorf("write raw samples: %w", err)
				}
			}
			iter++
		}
		return loopErr
	}
	if plan.Duration > 0 {
		now := time.Now()
		m := margins(plan.Duration)
		end, from, to := now.Add(plan.Duration), now.Add(m), now.Add(plan.Duration-m)
		inside := func(start, end time.Time) bool { return !start.Before(from) && !end.After(to) }
		// Size chunks to about 1/50 of the run from the pace so far, so
		// that slow round trips still leave many chunks inside the margins.
		chunkLen, done := uint64(16), uint64(0)
		for time.Now().Before(end) {
			if err := chunk(chunkLen, inside); err != nil {
				return rec, err
			}
			done += chunkLen
			perIter := time.Since(now) / time.Duration(done)
			chunkLen = uint64(max(16, min(int64(n), int64(plan.Duration/50/max(perIter, 1)))))
		}
		return rec, nil
	}
	for left := plan.Warmup; left > 0; left -= min(left, n) {
		if err := chunk(min(left, n), never); err != nil {
			return rec, fmt.Errorf("warm-up: %w", err)
		}
	}
	for left := plan.Iterations; left > 0; left -= min(left, n) {
		if err := chunk(min(left, n), always); err != nil {
			return rec, err
		}
	}
	return rec, nil
}

func never(_, _ time.Time) bool  { return false }
func always(_, _ time.Time) bool { return true }

// startResponders starts the passive side's ping-pong loops, one per QP on
// its own thread.
func (st *step) startResponders(iters uint64) (*passiveLoops, error) {
	_, kind, _ := latencyKinds(st.plan)
	return st.startPassive(kind, "responder", st.latencyRecvs(), func(l lane) *verbs.CQ { return l.sendCQ }, iters)
}

// rateIdle is the idle figures in the rate series' units: whole round trips
// for send and write (each idle sample is half of one, so every figure
// doubles exactly), the READ or atomic itself otherwise.
func rateIdle(plan Plan, idle results.LatencyStats) results.LatencyStats {
	if plan.Test != SendLat && plan.Test != WriteLat {
		return idle
	}
	return results.LatencyStats{Min: 2 * idle.Min, P50: 2 * idle.P50, P90: 2 * idle.P90, P99: 2 * idle.P99,
		P99_9: 2 * idle.P99_9, P99_99: 2 * idle.P99_99, Max: 2 * idle.Max, Mean: 2 * idle.Mean, Stdev: 2 * idle.Stdev}
}

// rateSweep runs the plan's open-loop rates one after another, every QP at
// each rate at once (one loop per QP, on its own thread), and marks the
// knee against the idle p99 (in the series' units).
func (st *step) rateSweep(idleP99 float64) ([]results.RateSeries, error) {
	return sweepRates(st.plan.Rates, st.ratePass, idleP99)
}

// sweepRates runs pass at each rate in turn and marks the knee of the
// series measured, also when a later rate fails: the rates before it keep
// their figures and their knee. A pass that ended without an error is a
// series even without samples past the warm-up (a rate far beyond the path,
// cut early): its achieved rate says the rate was not reached.
func sweepRates(rates []int, pass func(rate int) (results.RateSeries, error), idleP99 float64) ([]results.RateSeries, error) {
	var out []results.RateSeries
	for _, rate := range rates {
		s, err := pass(rate)
		if s.Iterations > 0 || err == nil {
			out = append(out, s)
		}
		if err != nil {
			results.MarkKnee(out, idleP99)
			return out, fmt.Errorf("rate %d/s: %w", rate, err)
		}
	}
	results.MarkKnee(out, idleP99)
	return out, nil
}

// ratePass is one rate over every QP: Warmup requests on the schedule whose
// samples are dropped, then Iterations measured, in one C call per QP. A
// rate beyond the path ends early, not reached (rateLaneOf), and costs the
// passive side nothing: its responders run until the client's "done".
func (st *step) ratePass(rate int) (results.RateSeries, error) {
	plan := st.plan
	outs := make([]rateLane, len(st.work(initiatorRole)))
	// Samples are whole response times (due time to answer), not halved
	// as the idle ping-pong's are: a stall delays the answer, and its
	// whole length is what a request waiting behind it sees.
	st.onInitiators(func(l int, _ laneWork, p csrc.Params) {
		n := plan.Warmup + plan.Iterations
		p.Iterations, p.Deadline = n, st.stepDeadline()
		p.Samples, p.SamplesRaw = make([]uint64, n), make([]uint64, n)
		p.RateInterval = time.Second / time.Duration(rate)
		_, _, p.RateByRecv = latencyKinds(plan)
		outs[l] = rateLaneOf(csrc.Run(csrc.LatRate, p), p, plan)
	})
	return rateSeries(rate, outs)
}

// rateLane is one QP's pass at a rate.
type rateLane struct {
	corr, raw *LatencyRecorder
	achieved  float64
	cut       bool // the loop fell too far behind its schedule and stopped posting
	err       error
}

// rateLaneOf reads one loop's result: its samples past the warm-up, the rate
// it posted at, and its error. A cut loop (csrc.Result.RateCut) ended OK:
// the path could not carry the rate, which its samples and achieved rate
// show, and the sweep goes on.
func rateLaneOf(r csrc.Result, p csrc.Params, plan Plan) rateLane {
	o := rateLane{corr: NewLatencyRecorder(), raw: NewLatencyRecorder(), cut: r.RateCut}
	if r.Status != csrc.OK {
		o.err = r.Err(string(plan.Test)) // stopped: wraps csrc.ErrStopped
	}
	for i := plan.Warmup; i < uint64(r.Samples); i++ {
		o.corr.Record(int64(p.Samples[i]))
		o.raw.Record(int64(p.SamplesRaw[i]))
	}
	if r.Posted > 1 && r.PostSpan > 0 {
		o.achieved = float64(r.Posted-1) / r.PostSpan.Seconds()
	}
	return o
}

// rateSeries merges the QPs' passes at a rate into its series; the first
// QP's error is the pass's.
func rateSeries(rate int, outs []rateLane) (results.RateSeries, error) {
	corr, raw := NewLatencyRecorder(), NewLatencyRecorder()
	s := results.RateSeries{Rate: rate}
	var err error
	cut := false
	for _, o := range outs {
		corr.Merge(o.corr)
		raw.Merge(o.raw)
		s.Achieved += o.achieved / float64(len(outs))
		cut = cut || o.cut
		if o.err != nil && err == nil {
			err = o.err
		}
	}
	s.Iterations = corr.Count()
	// A cut QP sent fewer requests than planned, whatever the average of
	// the others' rates says.
	s.Reached = !cut && s.Achieved >= results.RateReachedShare*float64(rate)
	if s.Iterations > 0 {
		s.Lat, s.Uncorrected = corr.Stats(), raw.Stats()
		s.Hist, s.UncorrectedHist = corr.Hist, raw.Hist
	}
	return s, err
}
