package runner

import (
	"fmt"
	"io"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/hang"
	"github.com/rdmabench/rdmabench/nccl/straggler"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// runner is one process of a benchmark run. Its state is grouped by who
// touches it: watchState (watchdog.go) is shared with the watchdog
// goroutine; jsonOut (output.go) is -J's file; the rest belongs to the
// main thread.
type runner struct {
	o      *Options
	lib    *nccl.Lib
	env    launch.Env
	rdv    launch.Rendezvous // where the processes meet; zero when alone
	grp    *launch.Group
	nranks int   // ranks of the communicator (of this process's group, when split)
	ranks  []int // communicator ranks of this process's GPUs
	// With NCCL_TESTS_SPLIT: the groups' process ranks, this process's
	// group and its place in it; otherwise one group of every process.
	groups     [][]int
	group, idx int
	devs       []int
	comms      []nccl.Comm
	streams    []nccl.Stream
	send       []nccl.DevPtr
	recv       []nccl.DevPtr
	perOp      time.Duration // -T: how long one collective may take; 0: no limit

	watchState
	aborted     bool   // main thread: the communicators are gone
	abortReason string // main thread: why they were aborted
	finished    chan struct{}
	// cleanup removes what the run made on disk (the NCCL log's temporary
	// folder); the watchdog's os.Exit skips deferred calls, so it runs
	// this itself.
	cleanup func()
	run     *results.NCCLRun // the report so far, for --json on failure
	iev     iterEvents       // -I 1
	tl      timelineEvents   // -I 1 with several ranks
	jsonOut
	badHalves int // halves of rows with wrong results here (nccl-tests' errors[0])

	// prog counts the collectives this process entered and saw finish, for
	// the census when -T fires.
	prog    hang.Tracker
	coll    string                               // main thread: the collective start issues, with its size
	devices atomic.Pointer[[]results.NCCLDevice] // rank 0: every process's, by rank (the watchdog reads it)
	// -I 1 with several ranks: rank 0's clock offsets of the processes and
	// the timed loops on its clock, for the straggler analysis.
	offs []launch.ClockOffset
	segs []straggler.Segment
}

func (r *runner) prefix() string {
	if r.env.Size > 1 {
		return fmt.Sprintf("ncclbench: rank %d: ", r.env.Rank)
	}
	return "ncclbench: "
}

// Run runs o in this process (one rank, or one process of several that
// meet at the rendezvous) and returns the exit code. The steps are in
// setup.go; the order of the deferred calls matters (the group's Flush
// first, the log's cleanup, the -J file, then the watchdog's end).
func Run(o *Options, stdout, stderr io.Writer) int {
	// CUDA's current device and NCCL's group state belong to the OS thread:
	// every CUDA/NCCL call of the run must come from the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := &runner{o: o, finished: make(chan struct{}), jsonOut: jsonOut{began: time.Now()}}
	defer close(r.finished)
	defer r.closeOutputFile()
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "%s%v\n", r.prefix(), err)
		return code
	}
	token, code, err := r.prepare()
	if err != nil {
		return fail(code, err)
	}
	lg := setupLog(o, r.env)
	defer lg.cleanup()
	r.cleanup = lg.cleanup
	ndev, err := r.openLib()
	if err != nil {
		return fail(ExitFail, err)
	}
	if err := r.placeRanks(); err != nil {
		return fail(ExitUsage, err)
	}
	host := launch.ShortHostname()
	if code, err := r.join(host, token); err != nil {
		return fail(code, err)
	}
	// However the run ends, rank 0's word on a lost process goes out first.
	defer r.grp.Flush()
	go r.watchdog(stderr)

	devices, id, err := r.meet(host, ndev)
	if err != nil {
		return fail(ExitFail, err)
	}
	code, err = r.bench(id, devices, lg, stdout, stderr)
	if err != nil {
		return fail(ExitFail, r.failed(err, lg, stdout, stderr))
	}
	return code
}

// failed ends a run that bench could not finish and returns the error to
// print. One process's error soon is every process's: rank 0 names the
// one whose report came first, or one that died outright (launch.Fail),
// and every process ends with that word.
func (r *runner) failed(err error, lg *logSetup, stdout, stderr io.Writer) error {
	r.reportFailure(err)
	if r.grp.Err() == nil && r.env.Size > 1 {
		select {
		case <-r.grp.Lost():
		case <-time.After(launch.FailGrace + 2*time.Second): // rank 0 is gone too
		}
	}
	if r.grp.Err() == nil {
		r.grp.Abort(err.Error()) // otherwise everyone knows already
	}
	err = r.explain(err)
	r.abortComms("")
	if rep := lg.analyze(); rep != nil && len(rep.NCCLWarnings) > 0 {
		fmt.Fprintf(stderr, "%sNCCL said: %s\n", r.prefix(), rep.NCCLWarnings[len(rep.NCCLWarnings)-1])
	}
	// What was measured goes everywhere it was asked for (each writer
	// does nothing when its flag is unset).
	if r.env.Rank == 0 && r.run != nil {
		r.run.Summarize()
		r.run.Error = err.Error()
		if r.o.JSON {
			render.NCCLJSON(stdout, r.run)
		}
		if werr := r.writeOutputs(r.run); werr != nil {
			fmt.Fprintf(stderr, "%s%v\n", r.prefix(), werr)
		}
	}
	return err
}
