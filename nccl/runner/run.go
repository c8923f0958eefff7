package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmabench/rdmabench/auth"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/hang"
	"github.com/rdmabench/rdmabench/nccl/ntjson"
	"github.com/rdmabench/rdmabench/nccl/straggler"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// runner is one process of a benchmark run.
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

	// Only the main thread calls NCCL, abort included (NCCL frees the
	// communicator in ncclCommAbort). The watchdog asks it to stop through
	// stop; the main thread checks before every call and while it waits.
	deadline    atomic.Int64 // unix nanos by which the current call or wait must end; 0: none
	phase       atomic.Value // string: what we are waiting for
	span        atomic.Int64 // the length of the current deadline, for messages
	stop        atomic.Pointer[string]
	aborted     bool   // main thread: the communicators are gone
	abortReason string // main thread: why they were aborted
	finished    chan struct{}
	// cleanup removes what the run made on disk (the NCCL log's temporary
	// folder); the watchdog's os.Exit skips deferred calls, so it runs
	// this itself.
	cleanup   func()
	run       *results.NCCLRun // the report so far, for --json on failure
	iev       iterEvents       // -I 1
	tl        timelineEvents   // -I 1 with several ranks
	began     time.Time        // for -J's start_time
	jfile     *os.File         // -J, rank 0
	jpath     string
	badHalves int // halves of rows with wrong results here (nccl-tests' errors[0])

	// prog counts the collectives this process entered and saw finish, for
	// the census when -T fires; final says the stop reason is the run's
	// verdict (every process reports it alone).
	prog    hang.Tracker
	coll    string // main thread: the collective start issues, with its size
	final   atomic.Bool
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
// meet at the rendezvous) and returns the exit code.
func Run(o *Options, stdout, stderr io.Writer) int {
	// CUDA's current device and NCCL's group state belong to the OS thread:
	// every CUDA/NCCL call of the run must come from the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := &runner{o: o, finished: make(chan struct{}), began: time.Now()}
	defer close(r.finished)
	defer r.closeOutputFile()
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "%s%v\n", r.prefix(), err)
		return code
	}
	var err error
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if r.env, err = launch.Detect(getenv); err != nil {
		return fail(ExitUsage, err)
	}
	r.perOp = o.Timeout
	if r.env.Size > 1 {
		if r.rdv, err = launch.FindRendezvous(o.Rendezvous, o.RdzvPort, r.env, getenv); err != nil {
			return fail(ExitUsage, err)
		}
	}
	// Every output is checked before NCCL is loaded: a long run must not
	// end by losing its results to a typo in a path.
	if err := checkOutputs(o, r.env.Rank); err != nil {
		return fail(exitcode.BadInput, err)
	}
	token, err := auth.Load(o.TokenFile, getenv("NCCL_BENCH_TOKEN"))
	if err != nil {
		return fail(ExitUsage, err)
	}
	lg := setupLog(o, r.env)
	defer lg.cleanup()
	r.cleanup = lg.cleanup

	r.lib, err = nccl.Open(nccl.Options{NCCLLib: o.NCCLLib, CudartLib: o.CudartLib})
	if err != nil {
		return fail(ExitFail, err)
	}
	if o.Graphs > 0 && r.lib.Version < 20900 {
		return fail(ExitFail, fmt.Errorf("-G %d: NCCL %s cannot be captured into a CUDA graph (2.9 or later)", o.Graphs, nccl.VersionString(r.lib.Version)))
	}
	if o.Graphs > 0 && !r.lib.HasGraphs {
		return fail(ExitFail, fmt.Errorf("-G %d: %s has no CUDA graphs (cudaStreamBeginCapture, cudaStreamEndCapture, cudaGraphInstantiateWithFlags, cudaGraphLaunch: CUDA 11.4 or later)", o.Graphs, r.lib.CudartPath))
	}
	if o.PerIter == 1 && !r.lib.HasEvents {
		return fail(ExitFail, fmt.Errorf("-I 1: %s has no CUDA events (cudaEventCreate, cudaEventRecord, cudaEventElapsedTime)", r.lib.CudartPath))
	}
	ndev, err := r.lib.DeviceCount()
	if err != nil || ndev == 0 {
		if err == nil {
			err = errors.New("cudaGetDeviceCount found 0 devices")
		}
		return fail(ExitFail, fmt.Errorf("no GPU: %v (NCCL %s loaded from %s)", err, nccl.VersionString(r.lib.Version), r.lib.NCCLPath))
	}
	r.groups, r.group, r.idx = r.placeInGroups()
	r.nranks = len(r.groups[r.group]) * o.Ngpus
	smallest := r.nranks
	for _, g := range r.groups {
		smallest = min(smallest, len(g)*o.Ngpus)
	}
	if o.Coll.HasRoot && o.Root >= smallest {
		if o.Split != nil {
			return fail(ExitUsage, fmt.Errorf("-r %d: the smallest group of %s has only %d ranks", o.Root, o.Split.Spec, smallest))
		}
		return fail(ExitUsage, fmt.Errorf("-r %d: there are only %d ranks", o.Root, r.nranks))
	}
	host := launch.ShortHostname()
	// Every process must run the same benchmark; rank 0 checks.
	r.grp, err = launch.Join(launch.Config{
		Addr: r.rdv.Addr, Rank: r.env.Rank, Size: r.env.Size,
		Timeout:  o.RdvTimeout,
		Hello:    launch.Hello{Host: host, Pid: os.Getpid(), Key: r.argsKey()},
		Token:    token,
		PortHint: r.rdv.Hint,
		Status:   r.prog.JSON,
		MakeID: func() ([]byte, error) {
			if o.Split != nil {
				return nil, nil // each group makes its own (groupID)
			}
			id, err := r.lib.GetUniqueID()
			return id[:], err
		},
	})
	if err != nil {
		var mm *launch.MismatchError
		if errors.As(err, &mm) {
			return fail(ExitUsage, err)
		}
		return fail(ExitFail, err)
	}
	// Barriers wait for peers that may be running a whole timed loop.
	grpTimeout := 7 * 24 * time.Hour
	if r.perOp > 0 {
		grpTimeout = r.perOp*time.Duration(o.Iters*o.AggIters+o.Warmup+1) + o.RdvTimeout
	}
	r.grp.SetTimeout(grpTimeout)
	// However the run ends, rank 0's word on a lost process goes out first.
	defer r.grp.Flush()
	go r.watchdog(stderr)

	// A launcher without local ranks (older PMI): the order among the
	// processes on this host, from the rendezvous.
	local := r.env.LocalRank
	if !r.env.LocalKnown {
		local = r.grp.LocalIndex
	}
	var mine []results.NCCLDevice
	for i := 0; i < o.Ngpus; i++ {
		d := local*o.Ngpus + i
		if d >= ndev {
			// NCCL >= 2.30 can put several ranks on one GPU when asked to.
			if os.Getenv("NCCL_MULTI_RANK_GPU_ENABLE") == "1" {
				d %= ndev
			} else {
				err := fmt.Errorf("local rank %d with -g %d needs GPU %d but only %d visible (fewer processes per node, smaller -g, or NCCL_MULTI_RANK_GPU_ENABLE=1 with NCCL >= 2.30)", local, o.Ngpus, d, ndev)
				r.grp.Abort(err.Error())
				return fail(ExitFail, err)
			}
		}
		r.ranks = append(r.ranks, r.idx*o.Ngpus+i)
		r.devs = append(r.devs, d)
		name, err := r.lib.DeviceName(d)
		if err != nil {
			err = fmt.Errorf("GPU %d: %w", d, err)
			r.grp.Abort(err.Error())
			return fail(ExitFail, err)
		}
		// The header's rank is the process's place among all, its group
		// the color, as nccl-tests prints them.
		color := 0
		if o.Split != nil {
			color = o.Split.Color(r.env.Rank)
		}
		mine = append(mine, results.NCCLDevice{Rank: r.env.Rank*o.Ngpus + i, Group: color, Pid: os.Getpid(), Host: host, Device: d, BusID: r.lib.PCIBusID(d), Name: name})
	}
	// Rank 0 alone needs every device, for the header.
	payload, _ := json.Marshal(mine)
	all, err := r.grp.Gather(payload)
	if err != nil {
		return fail(ExitFail, err)
	}
	var devices []results.NCCLDevice
	for i, p := range all {
		var ds []results.NCCLDevice
		if err := json.Unmarshal(p, &ds); err != nil {
			err = fmt.Errorf("process rank %d sent a bad device list: %v", i, err)
			r.grp.Abort(err.Error())
			return fail(ExitFail, err)
		}
		devices = append(devices, ds...)
	}
	r.devices.Store(&devices)
	if err := r.measureClocks(); err != nil {
		r.grp.Abort(err.Error())
		return fail(ExitFail, err)
	}
	var id nccl.UniqueID
	copy(id[:], r.grp.ID)
	if o.Split != nil {
		if id, err = r.groupID(); err != nil {
			r.grp.Abort(err.Error())
			return fail(ExitFail, err)
		}
	}

	code, err := r.bench(id, devices, lg, stdout, stderr)
	if err != nil {
		// One process's error soon is every process's: rank 0 names the
		// one whose report came first, or one that died outright
		// (launch.Fail), and every process ends with that word.
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
			if o.JSON {
				bench.WriteJSON(stdout, r.run)
			}
			for _, write := range []func(*results.NCCLRun) error{r.saveRun, r.writeOutputFile, r.publishRun} {
				if werr := write(r.run); werr != nil {
					fmt.Fprintf(stderr, "%s%v\n", r.prefix(), werr)
				}
			}
		}
		return fail(ExitFail, err)
	}
	return code
}

// saveRun writes --save: the document --json prints, replaced atomically so
// that a reader never sees half of it.
func (r *runner) saveRun(run *results.NCCLRun) error {
	if r.o.Save == "" {
		return nil
	}
	if err := publish.WriteFileAtomic(r.o.Save, func(w io.Writer) error { return bench.WriteJSON(w, run) }); err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	return nil
}

// writeOutputFile writes -J's file (rank 0), once.
func (r *runner) writeOutputFile(run *results.NCCLRun) error {
	if r.jfile == nil {
		return nil
	}
	f := r.jfile
	r.jfile = nil
	doc := ntjson.Build(run, ntjson.Meta{Args: r.o.Args, Env: os.Environ(), Start: r.began, End: time.Now(),
		NCCLVersion: r.lib.Version, PerIter: r.o.PerIter == 1, Skip: r.o.PerIterSkp})
	err := ntjson.Write(f, doc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-J %s: %w", r.jpath, err)
	}
	return nil
}

// publishRun writes --metrics and pushes --push (rank 0): every
// destination is tried, the errors joined.
func (r *runner) publishRun(run *results.NCCLRun) error {
	o := r.o
	var errs []error
	if o.Metrics != "" {
		if err := publish.WriteFileAtomic(o.Metrics, func(w io.Writer) error { return render.NCCLMetrics(w, run) }); err != nil {
			errs = append(errs, fmt.Errorf("--metrics: %w", err))
		}
	}
	if o.Push != "" {
		err := func() error {
			g, err := render.NCCLMetricsGatherer(run)
			if err != nil {
				return err
			}
			key, err := publish.RunGroup(o.PushJob, o.PushInstance, render.RunGroupLabel, render.NCCLRunGroup(run))
			if err != nil {
				return err
			}
			return publish.Push(context.Background(), o.Push, key, g, o.PushTimeout)
		}()
		if err != nil {
			errs = append(errs, fmt.Errorf("--push: %w", err))
		}
	}
	return errors.Join(errs...)
}

// closeOutputFile closes a -J file that a failure left unwritten.
func (r *runner) closeOutputFile() {
	if r.jfile != nil {
		r.jfile.Close()
		r.jfile = nil
	}
}

// argsKey is what must agree between processes for the run to make sense.
func (r *runner) argsKey() string {
	o := r.o
	var ts, ops []string
	for _, t := range o.Types {
		ts = append(ts, t.Name)
	}
	for _, x := range o.Ops {
		ops = append(ops, string(x.Name))
	}
	return fmt.Sprintf("%s -g %d -b %d -e %d -i %d -f %d -n %d -m %d -w %d -c %d -d %s -o %s -r %d -z %d -a %d -I %d -K %d -G %d",
		o.Coll.Name, o.Ngpus, o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor, o.Iters, o.AggIters, o.Warmup, o.Check,
		strings.Join(ts, ","), strings.Join(ops, ","), o.Root, o.Blocking, o.Average, o.PerIter, o.PerIterSkp, o.Graphs)
}

// explain puts the root cause (a lost peer, a deadline) before the NCCL
// error it caused.
func (r *runner) explain(err error) error {
	reason := r.abortReason
	if p := r.stop.Load(); p != nil {
		reason = *p
	}
	// The run's verdict (a census after -T) is the whole story: what NCCL
	// said after the abort it caused would only pile up behind it.
	if r.grp != nil {
		var pl *launch.PeerLost
		if lost := r.grp.Err(); errors.As(lost, &pl) && pl.Final {
			return lost
		}
		if errors.As(r.grp.Err(), &pl) && pl.Reported && pl.Origin == r.env.Rank {
			return err // this process's own error came first
		}
	}
	if r.final.Load() && reason != "" {
		return errors.New(reason)
	}
	if reason != "" && !strings.Contains(err.Error(), reason) {
		return fmt.Errorf("%s (then: %v)", reason, err)
	}
	if r.grp != nil {
		if lost := r.grp.Err(); lost != nil && !strings.Contains(err.Error(), lost.Error()) {
			return fmt.Errorf("%v (then: %v)", lost, err)
		}
	}
	return err
}

// reportFailure tells rank 0 this process's error, before anything here is
// torn down (launch.Group.Fail).
func (r *runner) reportFailure(err error) {
	if r.grp != nil {
		r.grp.Fail(err.Error(), time.Now().Add(2*time.Second))
	}
}

// abortComms stops every communicator once. Main thread only: NCCL frees a
// communicator in ncclCommAbort, so nothing may use it concurrently or after.
func (r *runner) abortComms(reason string) {
	if r.aborted {
		return
	}
	r.aborted = true
	if reason != "" && r.abortReason == "" {
		r.abortReason = reason
	}
	for _, c := range r.comms {
		if c != 0 {
			r.lib.CommAbort(c)
		}
	}
}

// requestStop is how the watchdog stops the run: the main thread aborts
// the communicators at its next check.
func (r *runner) requestStop(reason string) { r.stop.CompareAndSwap(nil, &reason) }

func (r *runner) timeoutReason() string {
	what, _ := r.phase.Load().(string)
	return fmt.Sprintf("timeout: %s did not finish within %v (-T %v per collective)", what, time.Duration(r.span.Load()), r.o.Timeout)
}

// arm sets the deadline of work that covers nops collectives (-T each).
func (r *runner) arm(what string, nops int) {
	r.phase.Store(what)
	if r.perOp > 0 {
		d := r.perOp * time.Duration(max(nops, 1))
		r.span.Store(int64(d))
		r.deadline.Store(time.Now().Add(d).UnixNano())
	}
}

func (r *runner) disarm() { r.deadline.Store(0) }

// checkpoint runs on the main thread before NCCL calls and while waiting:
// a stop request, a missed deadline or a lost peer aborts the
// communicators here, and the run ends with that reason.
func (r *runner) checkpoint() error {
	reason := ""
	if p := r.stop.Load(); p != nil {
		reason = *p
	} else if dl := r.deadline.Load(); r.env.Size == 1 && dl != 0 && time.Now().UnixNano() > dl {
		// Alone, there is no one to ask; with others, the watchdog takes a
		// census first (hung.go).
		reason = r.timeoutReason()
		r.requestStop(reason)
		// Tell the others before the abort closes NCCL's connections, so
		// they report this timeout rather than a lost connection.
		r.grp.Abort(reason)
	} else if err := r.grp.Err(); err != nil {
		reason = err.Error()
	}
	if reason == "" {
		return nil
	}
	r.abortComms(reason)
	return errors.New(reason)
}

// watchdog turns a lost peer or a missed deadline into a stop request, and
// exits the process if the main thread does not come back from NCCL (a
// blocking communicator can hold it inside a call). With others, a missed
// deadline first finds out who holds the run up (hung.go), and meanwhile
// each process tells rank 0 where it is every second.
func (r *runner) watchdog(stderr io.Writer) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for ticks := 1; ; ticks++ {
		var reason string
		tell := false // the others do not know yet
		select {
		case <-r.finished:
			return
		case <-r.grp.Lost():
			// Rank 0's word or a lost peer: every process hears it.
			reason = r.grp.Err().Error()
		case <-r.grp.Stalled():
			reason = r.conclude()
		case <-tick.C:
			if ticks%5 == 0 {
				r.publish()
			}
			dl := r.deadline.Load()
			if dl == 0 || time.Now().UnixNano() < dl {
				continue
			}
			reason, tell = r.hung()
		}
		r.requestStop(reason)
		if tell {
			r.grp.Abort(reason)
		}
		select {
		case <-r.finished:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(stderr, "%s%s (NCCL did not return control; exiting)\n", r.prefix(), reason)
			r.cleanup()
			os.Exit(ExitFail)
		}
		return
	}
}

// backoff spins briefly, then sleeps, so that many processes waiting on a
// few cores still leave the one that has work a CPU.
func backoff(spin int) {
	switch {
	case spin > 1024:
		time.Sleep(50 * time.Microsecond)
	case spin%16 == 15:
		runtime.Gosched()
	}
}

// settle waits while a non-blocking communicator says ncclInProgress
// (a full launch queue waits for one collective to end: -T once).
func (r *runner) settle() error {
	if r.deadline.Load() == 0 {
		what, _ := r.phase.Load().(string)
		r.arm(what, 1)
		defer r.disarm()
	}
	for _, c := range r.comms {
		for spin := 0; ; spin++ {
			err := r.lib.CommAsyncError(c)
			if err == nil {
				break
			}
			if !nccl.InProgress(err) {
				r.reportFailure(err) // before the abort, as in wait
				r.abortComms("")
				return err
			}
			if spin%64 == 63 {
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
			backoff(spin)
		}
	}
	return nil
}

// issued finishes an NCCL call that may have answered ncclInProgress.
func (r *runner) issued(err error) error {
	if nccl.InProgress(err) {
		return r.settle()
	}
	return err
}

func (r *runner) bench(id nccl.UniqueID, devices []results.NCCLDevice, lg *logSetup, stdout, stderr io.Writer) (int, error) {
	o := r.o
	isMain := r.env.Rank == 0
	// Non-blocking communicators (NCCL >= 2.14) never hold this thread inside
	// NCCL, so it can always abort them itself.
	r.arm("NCCL communicator initialization", 1)
	comms, err := r.lib.CommInitRanks(r.nranks, id, r.ranks, r.devs, true)
	r.comms = comms
	if err == nil {
		err = r.settle()
	}
	r.disarm()
	if err != nil {
		return 0, err
	}
	bufBytes := o.MaxBytes
	if bufBytes < 64 {
		bufBytes = 64
	}
	for _, d := range r.devs {
		if err := r.lib.SetDevice(d); err != nil {
			return 0, err
		}
		s, err := r.lib.StreamCreate()
		if err != nil {
			return 0, err
		}
		sb, err := r.lib.Malloc(bufBytes)
		if err != nil {
			return 0, fmt.Errorf("GPU %d: %d-byte send buffer: %w", d, bufBytes, err)
		}
		rb, err := r.lib.Malloc(bufBytes)
		if err != nil {
			return 0, fmt.Errorf("GPU %d: %d-byte receive buffer: %w", d, bufBytes, err)
		}
		r.streams, r.send, r.recv = append(r.streams, s), append(r.send, sb), append(r.recv, rb)
	}
	if o.PerIter == 1 {
		if err := r.newIterEvents(); err != nil {
			return 0, err
		}
		if r.nranks > 1 {
			if err := r.newTimelineEvents(); err != nil {
				return 0, err
			}
		}
	}

	run := &results.NCCLRun{
		Tool: results.NCCLTool, Schema: results.NCCLSchema, NotGPU: r.lib.Fake,
		NCCLVersion: nccl.VersionString(r.lib.Version), NCCLLibrary: r.lib.NCCLPath, CudartLibrary: r.lib.CudartPath,
		Config: results.NCCLConfig{
			Collective: o.Coll.Name, NThreads: 1, NGpus: o.Ngpus, NProcs: r.env.Size, NRanks: r.nranks,
			MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, Warmup: o.Warmup, Iters: o.Iters, AggIters: o.AggIters,
			Check: o.Check, Blocking: o.Blocking, Average: o.Average, PerIter: o.PerIter, PerIterSkp: o.PerIterSkp,
			ReportCPUTime: o.CPUTime, Graphs: o.Graphs,
		},
		Devices:        devices,
		Rendezvous:     r.rdv.Addr,
		RendezvousFrom: r.rdv.From,
		RendezvousSec:  r.grp.Joined.Seconds(),
		Version:        r.o.ToolInfo(r.lib, nil),
	}
	if o.Split != nil {
		run.Config.Split, run.Config.Groups = o.Split.Spec, len(r.groups)
	}
	if o.StepFactor > 1 {
		run.Config.StepFactor = o.StepFactor
	} else {
		run.Config.StepBytes = o.StepBytes
	}
	if o.Coll.Name == "alltoall" {
		run.Config.AlltoAll = "grouped ncclSend/ncclRecv (NCCL < 2.28)"
		if r.lib.HasAlltoAll {
			run.Config.AlltoAll = "ncclAlltoAll"
		}
	}
	if r.lib.Fake {
		run.Warnings = append(run.Warnings, "not a GPU measurement (test library)")
	}
	r.run = run
	text := isMain && !o.JSON
	if isMain && o.OutputFile != "" {
		if r.jfile, r.jpath, err = ntjson.Create(o.OutputFile); err != nil {
			return 0, err
		}
	}
	if text {
		if r.jfile != nil {
			fmt.Fprintf(stdout, "# Writing JSON output to %s\n", r.jpath)
		}
		bench.WriteHeader(stdout, run)
	}

	sizes, _ := bench.Sizes(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor)
	roots := []int{-1}
	if o.Coll.HasRoot {
		roots = []int{o.Root}
		if o.Root == -1 {
			roots = nil
			for i := 0; i < r.nranks; i++ {
				roots = append(roots, i)
			}
		}
	}
	for _, t := range o.Types {
		for _, op := range o.Ops {
			for _, root := range roots {
				mk := func(size int) bench.Case {
					return bench.Case{Coll: o.Coll, Type: t, Op: op.Name, Root: root, NRanks: r.nranks, C: o.Coll.Counts(size/t.Size, r.nranks, t.Size)}
				}
				if _, err := r.grp.Reduce(nil, launch.Sum); err != nil {
					return 0, err
				}
				// Warm up at every size, doubling from the smallest, as nccl-tests.
				if o.Warmup > 0 {
					for s := o.MinBytes; s <= o.MaxBytes; s *= 2 {
						k := mk(s)
						r.coll = fmt.Sprintf("%s of %d bytes", o.Coll.NCCL, max(k.C.Send, k.C.Recv)*t.Size)
						for it := 0; it < o.Warmup; it++ {
							if err := r.start(k, false); err != nil {
								return 0, err
							}
						}
						if err := r.wait("warmup "+o.Coll.NCCL, o.Warmup); err != nil {
							return 0, err
						}
						if s == 0 {
							break
						}
					}
				}
				for _, s := range sizes {
					k := mk(s)
					p := results.NCCLPoint{Size: max(k.C.Send, k.C.Recv) * t.Size, Count: k.C.Param, Type: t.Name, Redop: string(op.Name), Root: root}
					if p.OutOfPlace, err = r.benchTime(k, false); err != nil {
						return 0, err
					}
					if p.InPlace, err = r.benchTime(k, true); err != nil {
						return 0, err
					}
					run.Results = append(run.Results, p)
					if text {
						bench.WritePoint(stdout, p)
					}
				}
			}
		}
	}
	run.Summarize()
	if o.MinBusBW != nil {
		run.CheckBusBW(*o.MinBusBW)
	}
	run.Straggler = r.stragglers(devices)

	// Everyone is done with NCCL: sum the halves with wrong values over the
	// processes (nccl-tests' "Out of bounds values"), tear down, then read
	// the logs.
	bad, err := r.grp.Reduce([]float64{float64(r.badHalves)}, launch.Sum)
	if err != nil {
		return 0, err
	}
	run.OutOfBounds = int(bad[0])
	if err := r.finishComms(); err != nil {
		return 0, err
	}
	rep := lg.analyze()
	if rep != nil {
		run.NCCLLog, _ = json.Marshal(rep)
		if rep.SocketFallback && !isMain {
			fmt.Fprintf(stderr, "%sWARNING: NCCL uses TCP sockets between nodes (NET/Socket), not RDMA\n", r.prefix())
		}
	}
	if err := r.grp.Close(); err != nil {
		return 0, err
	}
	if isMain {
		if o.JSON {
			if err := bench.WriteJSON(stdout, run); err != nil {
				return 0, err
			}
		} else {
			bench.WriteFooter(stdout, run, o.Coll)
			if run.Straggler != nil {
				fmt.Fprint(stdout, straggler.Text(*run.Straggler))
			}
			lg.print(stdout, rep, r.lib)
		}
		if err := r.saveRun(run); err != nil {
			return 0, err
		}
		if err := r.writeOutputFile(run); err != nil {
			return 0, err
		}
		if err := r.publishRun(run); err != nil {
			return 0, err
		}
	}
	if run.OutOfBounds != 0 {
		if isMain {
			fmt.Fprintf(stderr, "%s%d result(s) with wrong values (see #wrong)\n", r.prefix(), run.OutOfBounds)
		}
		return ExitWrong, nil
	}
	// Every process has the same figures (benchTime reduces them) and
	// fails alike, as nccl-tests' processes do.
	if why := run.BelowMinBusBW(); why != "" {
		if isMain {
			fmt.Fprintf(stderr, "%s%s\n", r.prefix(), why)
		}
		return ExitWrong, nil
	}
	return 0, nil
}

// finishComms destroys the communicators, then frees what they used: NCCL
// may hold registered buffers until ncclCommDestroy returns.
func (r *runner) finishComms() error {
	if r.aborted {
		return nil
	}
	// Finalize first: a non-blocking communicator finishes it in the
	// background and says so through ncclCommGetAsyncError.
	for i, c := range r.comms {
		r.lib.SetDevice(r.devs[i])
		if err := r.issued(r.lib.CommFinalize(c)); err != nil {
			return err
		}
	}
	if err := r.settle(); err != nil {
		return err
	}
	var first error
	for i, c := range r.comms {
		r.lib.SetDevice(r.devs[i])
		if err := r.lib.CommDestroy(c); err != nil && !nccl.InProgress(err) && first == nil {
			first = err
		}
	}
	r.comms = nil
	r.freeIterEvents()
	r.freeTimelineEvents()
	for i := range r.streams {
		r.lib.SetDevice(r.devs[i])
		r.lib.Free(r.send[i])
		r.lib.Free(r.recv[i])
		r.lib.StreamDestroy(r.streams[i])
	}
	return first
}

// start launches one iteration of the collective on every local GPU.
func (r *runner) start(k bench.Case, inPlace bool) error {
	if err := r.checkpoint(); err != nil {
		return err
	}
	r.prog.Enter(r.coll)
	l := r.lib
	ts := k.Type.Size
	multi := len(r.comms) > 1
	if multi {
		if err := l.GroupStart(); err != nil {
			return err
		}
	}
	op := 0
	for _, x := range bench.Ops {
		if x.Name == k.Op {
			op = x.Code
		}
	}
	var err error
	for i, c := range r.comms {
		rank := r.ranks[i]
		sb, rb := r.send[i], r.recv[i]
		if inPlace {
			sb = r.recv[i] + nccl.DevPtr(k.C.SendInplace*rank*ts)
			rb = r.recv[i] + nccl.DevPtr(k.C.RecvInplace*rank*ts)
		}
		n, dt, st := k.C.Param, k.Type.Code, r.streams[i]
		switch k.Coll.Name {
		case "all_reduce":
			err = r.issued(l.AllReduce(sb, rb, n, dt, op, c, st))
		case "all_gather":
			err = r.issued(l.AllGather(sb, rb, n, dt, c, st))
		case "reduce_scatter":
			err = r.issued(l.ReduceScatter(sb, rb, n, dt, op, c, st))
		case "broadcast":
			err = r.issued(l.Broadcast(sb, rb, n, dt, k.Root, c, st))
		case "reduce":
			err = r.issued(l.Reduce(sb, rb, n, dt, op, k.Root, c, st))
		case "alltoall":
			if l.HasAlltoAll {
				err = r.issued(l.AlltoAll(sb, rb, n, dt, c, st))
				break
			}
			if err = l.GroupStart(); err != nil {
				break
			}
			for p := 0; p < r.nranks && err == nil; p++ {
				off := nccl.DevPtr(p * n * ts)
				if err = l.Send(sb+off, n, dt, p, c, st); err == nil {
					err = l.Recv(rb+off, n, dt, p, c, st)
				}
			}
			if e := r.issued(l.GroupEnd()); err == nil {
				err = e
			}
		case "sendrecv":
			if err = l.GroupStart(); err != nil {
				break
			}
			if err = l.Send(sb, n, dt, (rank+1)%r.nranks, c, st); err == nil {
				err = l.Recv(rb, n, dt, (rank-1+r.nranks)%r.nranks, c, st)
			}
			if e := r.issued(l.GroupEnd()); err == nil {
				err = e
			}
		}
		if err != nil {
			break
		}
	}
	if multi {
		if e := r.issued(l.GroupEnd()); err == nil {
			err = e
		}
	}
	if err == nil {
		err = r.markFinish()
	}
	// -z: 1, 2 and 3 wait for each collective; 1 also holds a barrier.
	if err == nil && r.o.Blocking != 0 {
		if err = r.wait(r.coll, 1); err == nil && r.o.Blocking == 1 {
			_, err = r.grp.Reduce(nil, launch.Sum)
		}
	}
	return err
}

// wait polls every stream until it is idle, watching for NCCL's
// asynchronous errors, a stop request, a lost peer and the deadline for
// nops collectives (nccl-tests' testStreamSynchronize).
func (r *runner) wait(what string, nops int) error {
	r.arm(what, nops)
	defer r.disarm()
	for i, s := range r.streams {
		for spin := 0; ; spin++ {
			done, err := r.lib.StreamDone(s)
			if err != nil {
				return err
			}
			if done {
				break
			}
			if spin%64 == 63 {
				if err := r.lib.CommAsyncError(r.comms[i]); err != nil && !nccl.InProgress(err) {
					// Reported before the abort: the errors the abort
					// causes on the peers must come second.
					r.reportFailure(err)
					r.abortComms("NCCL reported an asynchronous error")
					return err
				}
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
			backoff(spin)
		}
	}
	r.prog.FinishAll()
	return nil
}

func (r *runner) initData(k bench.Case, inPlace bool) error {
	ts := k.Type.Size
	for i := range r.comms {
		rank := r.ranks[i]
		if err := r.lib.SetDevice(r.devs[i]); err != nil {
			return err
		}
		if err := r.lib.Memset(r.recv[i], 0, max(k.C.Recv, k.C.Send)*ts); err != nil {
			return err
		}
		dst := r.send[i]
		if inPlace {
			dst = r.recv[i] + nccl.DevPtr(k.C.SendInplace*rank*ts)
		}
		if err := r.lib.MemcpyH2D(dst, k.Input(rank)); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) countWrong(k bench.Case, inPlace bool) (int64, error) {
	ts := k.Type.Size
	var wrong int64
	var shared []byte // results that are the same on every rank are computed once
	for i := range r.comms {
		rank := r.ranks[i]
		want := shared
		if want == nil {
			want = k.Expected(rank, inPlace)
			if k.SameOnAllRanks() {
				shared = want
			}
		}
		src := r.recv[i]
		if inPlace {
			src += nccl.DevPtr(k.C.RecvInplace * rank * ts)
		}
		got := make([]byte, len(want))
		if err := r.lib.MemcpyD2H(got, src); err != nil {
			return 0, err
		}
		wrong += k.Wrong(got, want)
	}
	return wrong, nil
}

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
	// Barrier, then one untimed collective, then the clock: our barrier
	// releases processes one after another, the collective ends on every
	// rank at nearly the same moment.
	if _, err := r.grp.Reduce(nil, launch.Sum); err != nil {
		return res, err
	}
	if err := r.start(k, inPlace); err != nil {
		return res, err
	}
	if err := r.wait(what, 1); err != nil {
		return res, err
	}
	t0 := time.Now()
	var collOnly time.Duration
	var graphed time.Duration // -G: one launch of the graph of the iterations
	if o.Graphs > 0 {
		var err error
		if graphed, collOnly, err = r.graphed(k, inPlace, what, o.Iters, o.AggIters, o.Graphs); err != nil {
			return res, err
		}
	}
	for it := 0; it < o.Iters && o.Graphs == 0; it++ {
		ti := time.Now()
		r.tl.at = it + 1
		mark := it
		if r.iev.paired {
			mark = 2 * it
		}
		if err := r.mark(mark); err != nil {
			return res, err
		}
		if o.AggIters > 1 {
			if err := r.lib.GroupStart(); err != nil {
				return res, err
			}
		}
		for a := 0; a < o.AggIters; a++ {
			if err := r.start(k, inPlace); err != nil {
				return res, err
			}
		}
		if o.AggIters > 1 {
			if err := r.issued(r.lib.GroupEnd()); err != nil {
				return res, err
			}
		}
		if o.Blocking == 3 {
			// Time only the collectives; a barrier between iterations.
			if err := r.wait(what, o.AggIters); err != nil {
				return res, err
			}
			collOnly += time.Since(ti)
			if r.iev.ev != nil {
				if err := r.mark(2*it + 1); err != nil {
					return res, err
				}
			}
			if _, err := r.grp.Reduce(nil, launch.Sum); err != nil {
				return res, err
			}
		}
	}
	if r.iev.ev != nil && !r.iev.paired {
		if err := r.mark(o.Iters); err != nil {
			return res, err
		}
	}
	// -C 1: what issuing took, before the wait (this process's own, not
	// combined over the processes, as nccl-tests).
	issued := time.Since(t0)
	if o.Blocking == 3 || o.Graphs > 0 {
		issued = collOnly
	}
	if o.CPUTime {
		us := issued.Seconds() / float64(o.Iters*o.AggIters) * 1e6
		res.CPUTimeUs = &us
	}
	if err := r.wait(what, o.Iters*o.AggIters); err != nil {
		return res, err
	}
	elapsed := time.Since(t0)
	switch {
	case o.Blocking == 3:
		elapsed = collOnly
	case o.Graphs > 0:
		elapsed = graphed
	}
	r.tl.at = 0
	timeline := r.tl.anchor != nil
	sec := elapsed.Seconds() / float64(o.Iters*o.AggIters)
	// Combine the processes' times as -a asks.
	op, v := launch.Sum, sec
	switch o.Average {
	case 0:
		if r.env.Rank != 0 {
			v = 0
		}
	case 2:
		op = launch.Min
	case 3:
		op = launch.Max
	}
	agg, err := r.grp.Reduce([]float64{v}, op)
	if err != nil {
		return res, err
	}
	sec = agg[0]
	if o.Average == 1 {
		sec /= float64(r.env.Size)
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

	for c := 0; c < check; c++ {
		res.Checked = true
		if err := r.initData(k, inPlace); err != nil {
			return res, err
		}
		// -G checks what a graph's launch computed, as nccl-tests does.
		if o.Graphs > 0 {
			if _, _, err := r.graphed(k, inPlace, what+" (check)", 1, 1, 1); err != nil {
				return res, err
			}
		} else if err := r.start(k, inPlace); err != nil {
			return res, err
		}
		if err := r.wait(what+" (check)", 1); err != nil {
			return res, err
		}
		w, err := r.countWrong(k, inPlace)
		if err != nil {
			return res, err
		}
		if w != 0 {
			r.badHalves++
		}
		tot, err := r.grp.Reduce([]float64{float64(w)}, launch.Sum)
		if err != nil {
			return res, err
		}
		res.Wrong = int64(tot[0])
		if res.Wrong != 0 {
			break
		}
	}
	return res, nil
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
	// Every capture begun is ended, whatever failed.
	for i, s := range r.streams[:capturing] {
		g, e := l.StreamEndCapture(s)
		graphs[i] = g
		if err == nil {
			err = e
		}
	}
	for i := range graphs {
		if err == nil {
			execs[i], err = l.GraphInstantiate(graphs[i])
		}
	}
	if err != nil {
		return 0, 0, err
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

// checkOutputs checks the files this process will write: rank 0's --save,
// -J and --metrics, and every rank's --nccl-log (rank N>0 appends .N), none
// of them an input (--token-file, --nccl-lib, --cudart-lib).
func checkOutputs(o *Options, rank int) error {
	var outs []publish.Output
	if rank == 0 {
		outs = append(outs, publish.Output{Flag: "--save", Path: o.Save},
			publish.Output{Flag: "-J", Path: o.OutputFile}, publish.Output{Flag: "--metrics", Path: o.Metrics})
	}
	if o.NCCLLog != "" {
		p := o.NCCLLog
		if rank > 0 {
			p = fmt.Sprintf("%s.%d", p, rank)
		}
		outs = append(outs, publish.Output{Flag: "--nccl-log", Path: p})
	}
	var inputs []string
	for _, in := range []string{o.TokenFile, o.NCCLLib, o.CudartLib} {
		if in != "" {
			inputs = append(inputs, in)
		}
	}
	return publish.CheckOutputs(outs, inputs)
}
