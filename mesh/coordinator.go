package mesh

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// Task is one direction for a client rank to measure: write-bw, then
// send-lat (or the one of them Part says), against the server rank's
// engine server at Addr.
type Task struct {
	Server int    `json:"server"`
	Addr   string `json:"addr"`
	Round  int    `json:"round"` // 0: a retest
	Part   Part   `json:"part,omitempty"`
	// Beside is how many other retests run at the same time as this one
	// (Options.RetestAtOnce; 0: alone, or a round's task).
	Beside int `json:"beside,omitempty"`
	// Seq numbers rank 0's tasks; the outcome echoes it, so that a late
	// outcome of a task rank 0 stopped waiting for is not taken for the
	// next one's.
	Seq int64 `json:"seq,omitempty"`
}

// Part is which of a direction's two tests a task runs.
type Part string

const (
	// BothParts: write-bw, then send-lat.
	BothParts Part = ""
	// BWPart and LatPart are one of them: with both directions of a pair
	// at once, the two directions' write-bw run together and then their
	// send-lat, so that no ping-pong waits behind the reverse direction's
	// stream (a loaded latency). On rxe's two emulated CPUs a screening
	// p50 is still about 100 times a retest's (every rank's busy-polling
	// loops share them): the controls measure that shift.
	BWPart  Part = "write-bw"
	LatPart Part = "send-lat"
)

// Runs says whether the part includes test t (BWPart or LatPart).
func (p Part) Runs(t Part) bool { return p == BothParts || p == t }

// merge is a direction's outcome from its two parts' (the write-bw's
// error first).
func merge(bw, lat Outcome) Outcome {
	out := Outcome{BWGbps: bw.BWGbps, LatP50us: lat.LatP50us, LatP99us: lat.LatP99us, Error: bw.Error, Interrupted: bw.Interrupted, Idle: bw.Idle}
	if out.Error == "" {
		out.Error, out.Interrupted, out.Idle = lat.Error, lat.Interrupted, lat.Idle
	}
	return out
}

// Outcome is a direction's figures, or why it could not be measured.
type Outcome struct {
	BWGbps   float64 `json:"bw_gbps"`
	LatP50us float64 `json:"lat_p50_us"`
	LatP99us float64 `json:"lat_p99_us"`
	Error    string  `json:"error,omitempty"`
	Seq      int64   `json:"seq,omitempty"`
	// Interrupted: ended by Ctrl-C, not failed; not blamed.
	Interrupted bool `json:"interrupted,omitempty"`
	// Idle: the test ran and nothing completed in its interval. A path
	// that drops everything does that, and so does a client that got no
	// CPU for the interval (hundreds of ranks on a few CPUs): blamed only
	// once a retest alone fails too.
	Idle bool `json:"idle,omitempty"`
}

// check refuses figures no measurement of part gives (a confused or
// hostile peer).
func (o Outcome) check(part Part) error {
	for _, v := range []float64{o.BWGbps, o.LatP50us, o.LatP99us} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("implausible figures %+v", o)
		}
	}
	if o.Error == "" && ((part.Runs(BWPart) && o.BWGbps == 0) || (part.Runs(LatPart) && o.LatP50us == 0)) {
		return fmt.Errorf("no figures and no error")
	}
	return nil
}

// Runner reaches the ranks for rank 0.
type Runner interface {
	// Measure has rank client measure one direction. An error means the
	// client rank is gone (dead, or no answer within the task's bound); a
	// measurement that failed is an Outcome with Error.
	Measure(ctx context.Context, client int, t Task) (Outcome, error)
	// Dead says whether a rank has left the mesh, and why.
	Dead(rank int) (string, bool)
}

// Options of a mesh run.
type Options struct {
	Rules Rules
	// MaxRetests bounds the outliers measured again alone by count (a
	// negative count: no bound but the budget): on a large mesh a bad
	// node makes 2(n−1) outliers, each retest a whole task.
	MaxRetests int
	// RetestBudget is how long the retests may take in all (0: no
	// bound but MaxRetests). A retest measures only the figure that was
	// an outlier: a latency hit by a scheduler stall costs a ping-pong of
	// milliseconds to clear, so a budget in time retests the many such
	// outliers of a large mesh where a count would give up on them.
	RetestBudget time.Duration
	// RetestAtOnce is how many outliers' write-bw a first pass of the
	// retests measures at the same time, no rank or NIC in two of them
	// (0 or 1: none, every retest alone). Sharing only slows a direction,
	// so one fine beside others is fine alone; the rest are measured
	// alone. A 256-rank mesh on 2 CPUs had 1514 outliers, 0.8 s each
	// alone: 20 minutes.
	RetestAtOnce int
	// Clock tells the time, for the budget (nil: the wall clock); the
	// simulations give their runners' modelled time.
	Clock func() time.Duration
	// Grace is how long the failed measurements of the last round (or of
	// the retests) wait, all together, for the rendezvous to say whether
	// their server rank died, so that the failure is put on it; the
	// failures of the other rounds wait for nothing: the next round's start
	// looks.
	Grace time.Duration
	// Round is called after each round (done of total), Retest after each
	// retest.
	Round, Retest func(done, total int)
	// BothAtOnce measures the two directions of a pair at the same time
	// (the screening pass: a round takes one direction's time, and a
	// full-duplex link carries both); the retests stay one at a time.
	BothAtOnce bool
	// Controls is how many healthy directions are retested beside the
	// outliers (first, beyond MaxRetests): a screened mesh's retests run
	// alone at full length, and are judged against directions measured
	// that way, not against the screening pass.
	Controls int
}

// RetestBudget is the retests' default budget for a mesh whose rounds
// are expected to take rounds: a quarter of that, at least a minute.
func RetestBudget(rounds time.Duration) time.Duration {
	return max(time.Minute, rounds/4)
}

// Coordinator is rank 0's side of a mesh.
type Coordinator struct {
	Runner Runner
	Opts   Options
	// Mesh holds the ranks (a rank already Dead takes no part); Run fills
	// in the pairs, the medians and the verdicts.
	Mesh   *results.Mesh
	Rounds [][]Pair
	// Addrs are the ranks' engine servers, host:port.
	Addrs []string

	mu sync.Mutex
}

func (c *Coordinator) dead(r int) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rk := c.Mesh.Ranks[r]
	return rk.Dead, rk.Dead != ""
}

// markDead records why a rank left and when: its round, Rounds+1 for the
// retests (round 0).
func (c *Coordinator) markDead(r int, why string, round int) {
	if round == 0 {
		round = len(c.Rounds) + 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Mesh.Ranks[r].Dead == "" {
		c.Mesh.Ranks[r].Dead, c.Mesh.Ranks[r].DeadRound = why, round
	}
}

// sweepDead records the ranks the Runner knows have left.
func (c *Coordinator) sweepDead(round int) {
	for r := range c.Mesh.Ranks {
		if why, gone := c.Runner.Dead(r); gone {
			c.markDead(r, why, round)
		}
	}
}

// left is the error of a direction one of whose ranks has left.
func (c *Coordinator) left(ranks ...int) (string, bool) {
	for _, r := range ranks {
		if why, gone := c.dead(r); gone {
			return fmt.Sprintf("rank %d left the mesh: %s", r, why), true
		}
	}
	return "", false
}

// direction measures client → server. The measurement is cancelled when
// either rank leaves the mesh: a run towards a dead server must not hold
// its client, nor a run of a dropped client its server, into the next
// round.
func (c *Coordinator) direction(ctx context.Context, client, server, round int) Outcome {
	return c.directionPart(ctx, client, server, round, BothParts)
}

// pairAtOnce measures both directions of p at the same time, part by
// part: both write-bw, then both send-lat (a direction whose write-bw
// failed skips its send-lat).
func (c *Coordinator) pairAtOnce(ctx context.Context, p Pair, round int) (ab, ba Outcome) {
	bw := c.bothWays(ctx, p, round, BWPart, [2]bool{})
	lat := c.bothWays(ctx, p, round, LatPart, [2]bool{bw[0].Error != "", bw[1].Error != ""})
	return merge(bw[0], lat[0]), merge(bw[1], lat[1])
}

// bothWays measures part of both directions of p (A->B, B->A) at the same
// time, leaving out a direction whose skip is set.
func (c *Coordinator) bothWays(ctx context.Context, p Pair, round int, part Part, skip [2]bool) [2]Outcome {
	var out [2]Outcome
	var wg sync.WaitGroup
	for i, d := range [2][2]int{{p.A, p.B}, {p.B, p.A}} {
		if skip[i] {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = c.directionPart(ctx, d[0], d[1], round, part)
		}()
	}
	wg.Wait()
	return out
}

// directionPart measures part of client → server.
func (c *Coordinator) directionPart(ctx context.Context, client, server, round int, part Part) Outcome {
	return c.measureTask(ctx, client, Task{Server: server, Round: round, Part: part})
}

// measureTask has rank client measure task t (its Addr filled in here).
func (c *Coordinator) measureTask(ctx context.Context, client int, t Task) Outcome {
	server, round, part := t.Server, t.Round, t.Part
	t.Addr = c.Addrs[server]
	if why, gone := c.left(client, server); gone {
		return Outcome{Error: why}
	}
	dctx, stop := WatchLoss(ctx, func() (string, bool) {
		for _, r := range []int{client, server} {
			if why, gone := c.Runner.Dead(r); gone {
				return fmt.Sprintf("rank %d left the mesh: %s", r, why), true
			}
		}
		return "", false
	})
	defer stop()
	out, err := c.Runner.Measure(dctx, client, t)
	if err == nil {
		if cerr := out.check(part); cerr != nil {
			// Nonsense from a rank that is still there: a failed direction.
			out = Outcome{Error: fmt.Sprintf("rank %d reported %v", client, cerr)}
		}
	}
	if err != nil {
		c.markDead(client, err.Error(), round)
		why, _ := c.left(client)
		return Outcome{Error: why}
	}
	if out.Error != "" {
		// A server that died shows at the client first: put the failure
		// on it if the rendezvous knows already (attribute looks again
		// later).
		if why, gone := c.Runner.Dead(server); gone {
			c.markDead(server, why, round)
			return Outcome{Error: leftDuring(server, why, out.Error)}
		}
		out.Interrupted = ctx.Err() != nil
	}
	return out
}

func leftDuring(server int, why, failure string) string {
	return fmt.Sprintf("rank %d left the mesh during the measurement: %s (%s)", server, why, failure)
}

// WatchLoss is ctx, also cancelled (with lost's reason as its cause) once
// lost reports true; it looks every 100 ms. stop releases it.
func WatchLoss(ctx context.Context, lost func() (string, bool)) (context.Context, context.CancelFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
				if why, gone := lost(); gone {
					cancel(errors.New(why))
					return
				}
			}
		}
	}()
	return wctx, func() { cancel(nil) }
}

// attribute puts the failures listed (indices of m.Pairs, or of their
// retests) on their server rank where the rendezvous now says it died,
// waiting at most wait for it, for all of them together.
func (c *Coordinator) attribute(ctx context.Context, failed []int, retest bool, wait time.Duration) {
	figs := func(i int) *results.MeshFigures {
		if retest {
			return c.Mesh.Pairs[i].Retest
		}
		return &c.Mesh.Pairs[i].MeshFigures
	}
	end := time.Now().Add(wait)
	for len(failed) > 0 {
		var left []int
		for _, i := range failed {
			p := &c.Mesh.Pairs[i]
			if why, gone := c.Runner.Dead(p.To); gone {
				round := p.Round
				if retest {
					round = 0
				}
				c.markDead(p.To, why, round)
				f := figs(i)
				f.Error = leftDuring(p.To, why, f.Error)
			} else {
				left = append(left, i)
			}
		}
		failed = left
		if time.Now().After(end) || ctx.Err() != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (o Outcome) figures() results.MeshFigures {
	return results.MeshFigures{BWGbps: o.BWGbps, LatP50us: o.LatP50us, LatP99us: o.LatP99us, Error: o.Error, Interrupted: o.Interrupted, Idle: o.Idle}
}

// unexplained lists the failed directions from index from on whose ranks
// are both still there: attribute may yet put them on a server that died.
func (c *Coordinator) unexplained(from int) []int {
	var out []int
	for i := from; i < len(c.Mesh.Pairs); i++ {
		p := c.Mesh.Pairs[i]
		if _, gone := c.left(p.From, p.To); p.Error != "" && !p.Interrupted && !gone {
			out = append(out, i)
		}
	}
	return out
}

func pairResult(from, to, round int, o Outcome) results.MeshPair {
	return results.MeshPair{From: from, To: to, Round: round, MeshFigures: o.figures()}
}

// Run measures every scheduled pair, both directions, round after round
// (the pairs of a round at once), retests the outliers alone and names
// the likely causes. A rank that dies is reported and the mesh goes on
// without it; ctx ending stops it after the directions running then.
func (c *Coordinator) Run(ctx context.Context) {
	m := c.Mesh
	start := time.Now()
	m.Rounds = len(c.Rounds)
	total := len(c.Rounds)
	var failed []int // the last round's failures not yet put on a rank
	for i, round := range c.Rounds {
		if ctx.Err() != nil {
			m.Error = "interrupted before round " + fmt.Sprint(i+1)
			break
		}
		c.attribute(ctx, failed, false, 0)
		c.sweepDead(i + 1) // ranks that left while they rested
		out := make([][2]results.MeshPair, len(round))
		var wg sync.WaitGroup
		for j, p := range round {
			if c.Opts.BothAtOnce {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ab, ba := c.pairAtOnce(ctx, p, i+1)
					out[j][0], out[j][1] = pairResult(p.A, p.B, i+1, ab), pairResult(p.B, p.A, i+1, ba)
				}()
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[j][0] = pairResult(p.A, p.B, i+1, c.direction(ctx, p.A, p.B, i+1))
				out[j][1] = pairResult(p.B, p.A, i+1, c.direction(ctx, p.B, p.A, i+1))
			}()
		}
		wg.Wait()
		first := len(m.Pairs)
		for _, o := range out {
			m.Pairs = append(m.Pairs, o[0], o[1])
		}
		failed = c.unexplained(first)
		if c.Opts.Round != nil {
			c.Opts.Round(i+1, total)
		}
	}
	c.attribute(ctx, failed, false, c.Opts.Grace)
	c.sweepDead(len(c.Rounds))
	// The rounds' figures are final: their references are made once.
	a := c.Opts.Rules.newAnalysis(m)
	a.markOutliers()
	c.retest(ctx, a)
	c.sweepDead(0)
	a.analyze()
	m.Mismatches = Mismatches(m.Ranks)
	m.ElapsedS = time.Since(start).Seconds()
}
