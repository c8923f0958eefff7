package rank

import (
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/mesh"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/proto"
)

// DefaultSetup is a direction's fixed overhead in the estimate by default
// (--setup-estimate): one connection and handshake (engine.Session), and
// one QP set-up on each end for both its tests (write-bw's QPs serve
// send-lat; the device and buffers are the rank's, engine.Kept). 2 s was
// what a direction cost beyond its measurement on the rxe target
// (emulated CPUs), when each test made its own; an HCA's verbs set-up
// takes milliseconds, and the live progress lines correct the estimate
// from the rounds' real pace.
const DefaultSetup = 2 * time.Second

// screenLatMin is the fewest send-lat ping-pongs of a screening pass: a
// p50 of fewer says little.
const screenLatMin = 100

// screenControls is how many healthy directions a screened mesh retests
// beside its outliers, to judge the retests (alone, full length) against
// directions measured the same way.
const screenControls = 8

// signalBytes is about how many bytes a signalled completion covers in
// the mesh's write-bw. 256 KiB: a path of a few MB/s (a degraded link; four
// busy-polling ranks on two emulated CPUs) still signals several times a
// second, so a 1 s window is not empty; the cost on a fast path is nil.
const signalBytes = 256 << 10

// pingPong is a ping-pong's round trip in the estimate: a few
// microseconds on an HCA, rounded up for the warm-up and the polling.
const pingPong = 20 * time.Microsecond

// Sizing is what each direction measures (the flags every rank must
// share), and from it the plans, the estimates and the bounds.
type Sizing struct {
	BWSize     int
	LatSize    int
	BWDuration time.Duration
	LatIters   uint64
	Screen     time.Duration // --screen: the rounds' write-bw duration, both directions at once (0: off)
	SetupEst   time.Duration // --setup-estimate: a direction's fixed cost in the estimates
	Timeout    time.Duration
	MaxRetests int           // --max-retests: negative, no bound but the budget
	Budget     time.Duration // --retest-budget: 0, a quarter of the rounds' time (mesh.RetestBudget)
	AtOnce     int           // --retest-at-once: outliers' write-bw retested at the same time first (0, 1: alone)
}

// DefaultAtOnce is --retest-at-once's default: eight outliers' write-bw
// at a time, of disjoint ranks and NICs, before the rest alone.
const DefaultAtOnce = 8

// Key is what every rank must agree on; rank 0 refuses a rank whose
// arguments differ (a mesh of mixed sizes measures nothing comparable).
func (s *Sizing) Key() string {
	return fmt.Sprintf("mesh -s %d --lat-size %d -D %v --lat-iters %d --timeout %v --screen %v", s.BWSize, s.LatSize, s.BWDuration, s.LatIters, s.Timeout, s.Screen)
}

// Screening reports whether a task is the screening pass's: a round's
// direction under --screen. Retests (round 0) measure at full length.
func (s *Sizing) Screening(t mesh.Task) bool { return s.Screen > 0 && t.Round != 0 }

// Controls is the healthy directions retested beside the outliers.
func (s *Sizing) Controls() int {
	if s.Screen > 0 {
		return screenControls
	}
	return 0
}

// ScreenLatIters is the send-lat ping-pongs of a screening pass: a tenth
// of --lat-iters, at least screenLatMin (and at most --lat-iters).
func (s *Sizing) ScreenLatIters() uint64 {
	return min(s.LatIters, max(s.LatIters/10, screenLatMin))
}

// QueueTimeout is how long a rank's server keeps a client waiting while
// another client's run holds its device. In a mesh a server has one client
// at a time; another is a stale run (its client or rank 0 gave up), which
// the loss of a rank now cancels: a short wait, then a failed direction,
// not a healthy client held until rank 0 gives up on it.
func QueueTimeout() time.Duration { return 2 * proto.HandshakeTimeout }

// testBound is the longest engine.RunClient of one test may take, wait by
// wait as the engine bounds them: the dial, the greeting and token and the
// plan (a handshake each), the accept (the plan's set-up, the larger of a
// handshake and --timeout), when queued the server's wait and the set-up
// again, run and ready (a handshake each), the warm-up and the measured
// loops (a step each), the server's verdict (a step and a handshake), done
// and bye (a handshake each).
func (s *Sizing) testBound(t engine.Test) time.Duration {
	p := s.Plan(t, false)
	hs, step := proto.HandshakeTimeout, engine.StepTime(p)
	setup := max(hs, p.Timeout)
	return 8*hs + 2*setup + QueueTimeout() + 3*step
}

// DirectionBound is the longest one direction may take before its client
// rank is given up: both tests at their engine's worst case, and the task
// and its outcome (a handshake each). A stuck server makes the client's
// engine fail first, so the failure is the direction's, not the client's.
func (s *Sizing) DirectionBound() time.Duration {
	return s.testBound(engine.WriteBW) + s.testBound(engine.SendLat) + 2*proto.HandshakeTimeout
}

// Estimate is what a direction should take at full length.
func (s *Sizing) Estimate() time.Duration {
	return s.BWDuration + time.Duration(s.LatIters)*pingPong + s.SetupEst
}

// ScreenEstimate is what a screening direction should take (both of a
// pair at once take the same).
func (s *Sizing) ScreenEstimate() time.Duration {
	return s.Screen + time.Duration(s.ScreenLatIters())*pingPong + s.SetupEst
}

// Plan is one direction's plan of a test: one size for a duration; the
// screening pass's shorter one when screen.
func (s *Sizing) Plan(t engine.Test, screen bool) engine.Plan {
	p := rbplan.DefaultPlan(t)
	p.Timeout = s.Timeout
	iters, dur := s.LatIters, s.BWDuration
	if screen {
		iters, dur = s.ScreenLatIters(), s.Screen
	}
	if t.IsLatency() {
		// Iteration mode: a duration-mode ping-pong keeps only chunks of
		// round trips inside its margins, and a slow path has none there.
		p.Sizes, p.Iterations = []int{s.LatSize}, iters
		p.Warmup = min(iters/10, p.Warmup)
	} else {
		p.Sizes, p.Duration = []int{s.BWSize}, dur
		// Duration mode counts signalled completions inside the window: one
		// every 100 MiB messages is none at all on a slow path (a bad link,
		// emulation); see signalBytes.
		p.CapSignalBytes(signalBytes)
	}
	return p
}

// Costs are a direction's times for the schedule's estimate and bound.
func (s *Sizing) Costs() mesh.Costs {
	return mesh.Costs{Direction: s.Estimate(), ScreenDirection: s.ScreenEstimate(), DirectionBound: s.DirectionBound(),
		Screen: s.Screen > 0, MaxRetests: s.MaxRetests, Controls: s.Controls(), RetestBudget: s.Budget}
}

// Schedule is the mesh of n ranks, one a host (--plan): the tournament,
// or the rounds of the pairs given.
func (s *Sizing) Schedule(n int, pairs []mesh.Pair) mesh.Schedule {
	rounds := mesh.Tournament(n)
	if pairs != nil {
		rounds = mesh.Subset(n, pairs)
	}
	return mesh.NewSchedule(rounds, s.Costs())
}

// QuickCost is a quick round's expected time: a direction's write-bw
// (the screening's where --screen is given: both directions of each pair
// run at once, as the screening's do) and its set-up, and the control
// plane's cost as mesh.DefaultQuickCost assumes it.
func (s *Sizing) QuickCost() mesh.QuickCost {
	d := s.BWDuration
	if s.Screen > 0 {
		d = s.Screen
	}
	c := mesh.DefaultQuickCost
	c.Measure = d + s.SetupEst
	return c
}
