package engine

import (
	"errors"
	"fmt"
	"github.com/rdmabench/rdmabench/proto"
	"slices"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

// loadWarmup is how long a load runs, after its first completions, before
// the loaded ping-pong starts: its queues fill and its rate settles.
const loadWarmup = 300 * time.Millisecond

// A load's figure is the messages it completed inside the loaded ping-pong,
// read from a counter that moves at signalled completions only. The loaded
// ping-pong runs on (in rounds of at most latencyChunk round trips) until
// every load has moved by loadMinSignals signals, at most loadMaxExtension
// beyond its -n: on rxe a load's completions come in bursts, and a loaded
// pass of 47 ms once saw none of a 16 KiB read load ("0 Gb/s"). A load
// still short of it when the extension ends is marked TooShort.
const (
	loadMinSignals   = 8
	loadMaxExtension = 5 * time.Second
)

// loadSet is one side's loads: a side each (its own QPs and memory),
// connected to the peer's. One owner calls Close.
type loadSet struct {
	plans   []Plan
	sides   []*side
	remotes [][]proto.Endpoint
}

// openLoads opens a side per load beside main, the ping-pong's side of
// plan. peer: the server's end, whose memory is the load's PeerMemory.
// Each load's loops take the CPUs after those of the ping-pong and of the
// loads before it, in main's order, so that on a node with CPUs to spare
// a load's busy polling does not share the ping-pong's CPU (which would
// measure the CPU, not the link).
func openLoads(dc DeviceConfig, plan Plan, main *side, peer bool) (*loadSet, error) {
	ls := &loadSet{}
	next := loopThreads(plan)
	for i, l := range plan.Loads {
		if n := len(main.cpus); n > 0 {
			dc.CPUs = append(slices.Clone(main.cpus[next%n:]), main.cpus[:next%n]...)
		}
		next += loopThreads(l)
		// A load's loops share the CPUs with the ping-pong's when there
		// are not enough: the load is meant to disturb it anyway.
		l.ShareCPUs = true
		mem := l.Memory
		if peer {
			mem = l.PeerMemory
		}
		s, err := openSide(dc, l, nil, mem)
		if err != nil {
			ls.Close()
			return nil, fmt.Errorf("load %d (%s): %w", i+1, rbplan.LoadLabel(l), err)
		}
		ls.plans, ls.sides = append(ls.plans, l), append(ls.sides, s)
	}
	return ls, nil
}

func (ls *loadSet) endpoints() ([][]proto.Endpoint, error) {
	var out [][]proto.Endpoint
	for i, s := range ls.sides {
		e, err := s.endpoints()
		if err != nil {
			return nil, fmt.Errorf("load %d: %w", i+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// connect connects each load's QPs to the peer's, after checking that the
// peer sent as many as each load has.
func (ls *loadSet) connect(remote [][]proto.Endpoint) error {
	if len(remote) != len(ls.sides) {
		return fmt.Errorf("%d loads, the peer offers QPs for %d (a server from before --load?)", len(ls.sides), len(remote))
	}
	for i, s := range ls.sides {
		if len(remote[i]) != ls.plans[i].MaxQPs() {
			return fmt.Errorf("load %d needs %d QPs, the peer offers %d", i+1, ls.plans[i].MaxQPs(), len(remote[i]))
		}
		if err := s.connect(remote[i], ls.plans[i]); err != nil {
			return fmt.Errorf("load %d: %w", i+1, err)
		}
	}
	ls.remotes = remote
	return nil
}

// Close frees every load's side; the loops must have been joined.
func (ls *loadSet) Close() {
	if ls == nil {
		return
	}
	for _, s := range ls.sides {
		s.Close()
	}
	ls.sides = nil
}

// step is load i's step: its size over all its QPs, in duration mode
// until stop is set.
// loadSignalBytes is about how many bytes a load's signalled completion
// covers.
const loadSignalBytes = 64 << 10

func (ls *loadSet) step(i int, stop *csrc.Flag) *step {
	p := ls.plans[i]
	// Until stopped: the deadline (Timeout + Duration) still bounds a
	// load whose stop never comes.
	p.Duration = rbplan.MaxDuration
	// The load's figure counts signalled completions inside the loaded
	// ping-pong, which may last a tenth of a second: one signal every 100
	// messages of 64 KiB was none at all on rxe (0 Gb/s reported). One
	// every loadSignalBytes or so costs nothing on a fast path.
	p.CapSignalBytes(loadSignalBytes)
	return &step{plan: p, s: ls.sides[i], remote: ls.remotes[i], size: p.Sizes[0], nqp: p.MaxQPs(), stop: stop}
}

// runningLoads are the client's loads while they run; stop ends and joins
// them.
type runningLoads struct {
	ls       *loadSet
	stopFlag *csrc.Flag
	progress []*csrc.Counter
	// perSignal[i] bounds how many of load i's messages one signalled
	// completion covers (its CQ moderation, capped by loadSignalBytes).
	perSignal []uint64
	outs      []bwOutcome // outs[i] is load i's once done[i] is closed
	done      []chan struct{}
	stopped   bool
}

// start starts every load's initiators and returns once each has
// completed messages and then run loadWarmup more (the warm-up the figures
// leave out), or with an error (the loads then stopped and joined).
func (ls *loadSet) start(deadline time.Time, interrupt *csrc.Flag) (*runningLoads, error) {
	rl := &runningLoads{ls: ls, stopFlag: csrc.NewFlag(), outs: make([]bwOutcome, len(ls.sides))}
	for i := range ls.sides {
		c := csrc.NewCounter()
		rl.progress = append(rl.progress, c)
		done := make(chan struct{})
		rl.done = append(rl.done, done)
		st := ls.step(i, rl.stopFlag)
		rl.perSignal = append(rl.perSignal, uint64(max(1, st.plan.CQMod)))
		go func() {
			defer close(done)
			rl.outs[i] = st.postBW(c)
		}()
	}
	for i, c := range rl.progress {
		for c.Load() == 0 {
			// The interrupt first: a load that failed because the step
			// was stopped (Ctrl-C tears the loopback server down) is no
			// failure of its own.
			if interrupt.IsSet() {
				rl.stop()
				return nil, errLoadsInterrupted
			}
			if time.Now().After(deadline) {
				rl.stop()
				return nil, fmt.Errorf("load %d (%s): no completion before the deadline", i+1, rbplan.LoadLabel(ls.plans[i]))
			}
			if err := rl.failed(); err != nil {
				rl.stop()
				return nil, err
			}
			time.Sleep(time.Millisecond)
		}
	}
	for end := time.Now().Add(loadWarmup); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if interrupt.IsSet() {
			rl.stop()
			return nil, errLoadsInterrupted
		}
	}
	if interrupt.IsSet() {
		rl.stop()
		return nil, errLoadsInterrupted
	}
	if err := rl.failed(); err != nil {
		rl.stop()
		return nil, err
	}
	return rl, nil
}

// errLoadsInterrupted: the step was stopped (Ctrl-C, a failed loop) while
// the loads warmed up.
var errLoadsInterrupted = errors.New("stopped while the loads warmed up")

// failed is a load that ended before stop (loads run until stopped, so
// that is a failure); nil while all run.
func (rl *runningLoads) failed() error {
	for i, done := range rl.done {
		select {
		case <-done:
			err := rl.outs[i].err
			if err == nil {
				err = errors.New("ended before it was stopped")
			}
			return fmt.Errorf("load %d (%s): %w", i+1, rbplan.LoadLabel(rl.ls.plans[i]), err)
		default:
		}
	}
	return nil
}

// stopErr stops the loads and returns the first failure of one: a load
// only stopped is none.
func (rl *runningLoads) stopErr() error {
	rl.stop()
	for i, o := range rl.outs {
		if o.err != nil && !errors.Is(o.err, csrc.ErrStopped) {
			return fmt.Errorf("load %d (%s): %w", i+1, rbplan.LoadLabel(rl.ls.plans[i]), o.err)
		}
	}
	return nil
}

// counts reads every load's completed messages so far.
func (rl *runningLoads) counts() []uint64 {
	out := make([]uint64, len(rl.progress))
	for i, c := range rl.progress {
		out[i] = c.Load()
	}
	return out
}

// stop stops the loads, joins their loops and frees the counters; once.
func (rl *runningLoads) stop() {
	if rl == nil || rl.stopped {
		return
	}
	rl.stopped = true
	rl.stopFlag.Set()
	for _, done := range rl.done {
		<-done
	}
	for _, c := range rl.progress {
		c.Free()
	}
	rl.stopFlag.Free()
}

// enough reports whether every load has moved by loadMinSignals signalled
// completions since before.
func (rl *runningLoads) enough(before []uint64) bool {
	for i, n := range rl.counts() {
		if n-before[i] < rl.minMessages(i) {
			return false
		}
	}
	return true
}

// minMessages is how many messages load i must complete in the window to
// have counted loadMinSignals signalled completions.
func (rl *runningLoads) minMessages(i int) uint64 { return loadMinSignals * rl.perSignal[i] }

// loadFigures are each load's bandwidth between two readings of counts.
func (rl *runningLoads) figures(before, after []uint64, seconds float64) []results.LoadFigures {
	var out []results.LoadFigures
	for i, p := range rl.ls.plans {
		msgs := after[i] - before[i]
		f := results.LoadFigures{Load: rbplan.LoadLabel(p), Test: p.Test, Size: p.Sizes[0], QPs: p.MaxQPs(), Messages: msgs, Seconds: seconds,
			TooShort: msgs < rl.minMessages(i)}
		if seconds > 0 {
			f.Gbps = float64(msgs) * float64(p.Sizes[0]) * 8 / seconds / 1e9
		}
		out = append(out, f)
	}
	return out
}
