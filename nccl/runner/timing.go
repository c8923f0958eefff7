package runner

import (
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/results"
)

// benchTime measures one half of a table row (nccl-tests' BenchTime).
func (r *runner) benchTime(k bench.Case, inPlace bool) (results.NCCLResult, error) {
	o := r.o
	var res results.NCCLResult
	what := fmt.Sprintf("%s of %d bytes", k.Coll.NCCL, max(k.C.Send, k.C.Recv)*k.Type.Size)
	r.phase.Store(what)
	r.coll = what
	// In-place alltoall and sendrecv receive into the memory they send from:
	// NCCL leaves the result undefined, so nccl-tests does not check it.
	check := o.Check
	if inPlace && k.Coll.InPlaceUndefined {
		check = 0
	}
	if check > 0 {
		if err := r.initData(k, inPlace); err != nil {
			return res, err
		}
	}
	if err := r.lineUp(k, inPlace, what); err != nil {
		return res, err
	}
	issued, elapsed, err := r.timed(k, inPlace, what)
	if err != nil {
		return res, err
	}
	if o.CPUTime {
		us := issued.Seconds() / float64(o.Iters*o.AggIters) * 1e6
		res.CPUTimeUs = &us
	}
	r.tl.at = 0
	timeline := r.tl.anchor != nil
	sec, err := r.combineTime(elapsed.Seconds() / float64(o.Iters*o.AggIters))
	if err != nil {
		return res, err
	}
	res.TimeUs = sec * 1e6
	res.AlgBW, res.BusBW = k.Coll.Bandwidth(k.C.Param, k.Type.Size, sec, r.nranks)
	if r.iev.ev != nil {
		if res.PerIter, err = r.gatherPerIter(); err != nil {
			return res, err
		}
	}
	if timeline {
		if err := r.gatherTimelines(what, max(k.C.Send, k.C.Recv)*k.Type.Size, inPlace); err != nil {
			return res, err
		}
	}
	return res, r.checkHalf(k, inPlace, what, check, &res)
}

// lineUp starts the processes together: barrier, then one untimed
// collective, then the clock. Our barrier releases processes one after
// another; the collective ends on every rank at nearly the same moment.
func (r *runner) lineUp(k bench.Case, inPlace bool, what string) error {
	if _, err := r.grp.Reduce(nil, launch.Sum); err != nil {
		return err
	}
	if err := r.start(k, inPlace); err != nil {
		return err
	}
	return r.wait(what, 1)
}

// timed runs the timed iterations and waits for them. It returns what
// issuing took (-C 1: this process's own, not combined over the
// processes, as nccl-tests) and the time of them all; with -z 3 and -G
// both are the collectives' time alone.
func (r *runner) timed(k bench.Case, inPlace bool, what string) (issued, elapsed time.Duration, err error) {
	o := r.o
	t0 := time.Now()
	var collOnly time.Duration
	var graphed time.Duration // -G: one launch of the graph of the iterations
	if o.Graphs > 0 {
		graphed, collOnly, err = r.graphed(k, inPlace, what, o.Iters, o.AggIters, o.Graphs)
	} else {
		collOnly, err = r.iterations(k, inPlace, what)
	}
	if err != nil {
		return 0, 0, err
	}
	if r.iev.ev != nil && !r.iev.paired {
		if err := r.mark(o.Iters); err != nil {
			return 0, 0, err
		}
	}
	issued = time.Since(t0)
	if o.Blocking == 3 || o.Graphs > 0 {
		issued = collOnly
	}
	if err := r.wait(what, o.Iters*o.AggIters); err != nil {
		return 0, 0, err
	}
	elapsed = time.Since(t0)
	switch {
	case o.Blocking == 3:
		elapsed = collOnly
	case o.Graphs > 0:
		elapsed = graphed
	}
	return issued, elapsed, nil
}

// iterations issues -n iterations of -m collectives each; with -z 3 it
// waits for each and returns the collectives' time alone.
func (r *runner) iterations(k bench.Case, inPlace bool, what string) (collOnly time.Duration, err error) {
	o := r.o
	for it := 0; it < o.Iters; it++ {
		ti := time.Now()
		r.tl.at = it + 1
		mark := it
		if r.iev.paired {
			mark = 2 * it
		}
		if err := r.mark(mark); err != nil {
			return 0, err
		}
		if err := r.aggregated(k, inPlace, o.AggIters); err != nil {
			return 0, err
		}
		if o.Blocking != 3 {
			continue
		}
		// Time only the collectives; a barrier between iterations.
		if err := r.wait(what, o.AggIters); err != nil {
			return 0, err
		}
		collOnly += time.Since(ti)
		if r.iev.ev != nil {
			if err := r.mark(2*it + 1); err != nil {
				return 0, err
			}
		}
		if _, err := r.grp.Reduce(nil, launch.Sum); err != nil {
			return 0, err
		}
	}
	return collOnly, nil
}

// aggregated issues agg collectives, in one NCCL group when more than one
// (-m).
func (r *runner) aggregated(k bench.Case, inPlace bool, agg int) error {
	if agg > 1 {
		if err := r.lib.GroupStart(); err != nil {
			return err
		}
	}
	for a := 0; a < agg; a++ {
		if err := r.start(k, inPlace); err != nil {
			return err
		}
	}
	if agg > 1 {
		return r.issued(r.lib.GroupEnd())
	}
	return nil
}

// combineTime combines the processes' seconds per collective as -a asks.
func (r *runner) combineTime(sec float64) (float64, error) {
	op, v := timeShare(r.o.Average, r.env.Rank, sec)
	agg, err := r.grp.Reduce([]float64{v}, op)
	if err != nil {
		return 0, err
	}
	return timeOf(r.o.Average, r.env.Size, agg[0]), nil
}

// timeShare is what a process puts into the reduction of the seconds per
// collective, and how the reduction combines them: -a 0 rank 0's alone
// (the others put 0 into a sum), 1 the sum (averaged by timeOf), 2 the
// least, 3 the most.
func timeShare(average, rank int, sec float64) (launch.Op, float64) {
	switch average {
	case 0:
		if rank != 0 {
			return launch.Sum, 0
		}
	case 2:
		return launch.Min, sec
	case 3:
		return launch.Max, sec
	}
	return launch.Sum, sec
}

// timeOf turns the reduced figure of size processes into the row's
// seconds per collective.
func timeOf(average, size int, reduced float64) float64 {
	if average == 1 {
		return reduced / float64(size)
	}
	return reduced
}

// graphed is -G: iters iterations (of agg collectives each) captured once
// into a CUDA graph on every local stream, then the graph launched
// launches times and waited for, as nccl-tests does. It returns one
// launch's time and what issuing one launch took (-C 1).
func (r *runner) graphed(k bench.Case, inPlace bool, what string, iters, agg, launches int) (perLaunch, issue time.Duration, err error) {
	l := r.lib
	graphs := make([]nccl.Graph, len(r.streams))
	execs := make([]nccl.GraphExec, len(r.streams))
	defer func() {
		for i := range graphs {
			if graphs[i] != 0 {
				if derr := l.GraphDestroy(execs[i], graphs[i]); err == nil {
					err = derr
				}
			}
		}
	}()
	if err = r.capture(k, inPlace, iters, agg, graphs); err != nil {
		return 0, 0, err
	}
	for i := range graphs {
		if execs[i], err = l.GraphInstantiate(graphs[i]); err != nil {
			return 0, 0, err
		}
	}
	t0 := time.Now()
	for n := 0; n < launches; n++ {
		for i, s := range r.streams {
			if err := l.GraphLaunch(execs[i], s); err != nil {
				return 0, 0, err
			}
		}
	}
	issue = time.Since(t0)
	if err := r.wait(what, iters*agg*launches); err != nil {
		return 0, 0, err
	}
	n := time.Duration(launches)
	return time.Since(t0) / n, issue / n, nil
}

// capture records iters iterations of agg collectives into graphs, one per
// local stream. Every capture begun is ended, whatever failed, and its
// graph kept in graphs for graphed to destroy.
func (r *runner) capture(k bench.Case, inPlace bool, iters, agg int, graphs []nccl.Graph) error {
	l := r.lib
	var err error
	capturing := 0
	for _, s := range r.streams {
		if err = l.StreamBeginCapture(s); err != nil {
			break
		}
		capturing++
	}
	for it := 0; it < iters && err == nil; it++ {
		if agg > 1 {
			if err = l.GroupStart(); err != nil {
				break
			}
		}
		for a := 0; a < agg && err == nil; a++ {
			err = r.start(k, inPlace)
		}
		if agg > 1 {
			if e := r.issued(l.GroupEnd()); err == nil {
				err = e
			}
		}
	}
	for i, s := range r.streams[:capturing] {
		g, e := l.StreamEndCapture(s)
		graphs[i] = g
		if err == nil {
			err = e
		}
	}
	return err
}
