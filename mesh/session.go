package mesh

import (
	"context"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// Costs are what one direction takes, for a schedule's estimate and bound:
// Direction at full length and ScreenDirection screening (both of a pair
// at once take that too) as expected, DirectionBound at the worst before
// its client is given up.
type Costs struct {
	Direction, ScreenDirection, DirectionBound time.Duration
	// Screen: the rounds screen (--screen); the retests run at full length.
	Screen               bool
	MaxRetests, Controls int
	// RetestBudget is the retests' time (0: RetestBudget of the rounds').
	RetestBudget time.Duration
}

// Schedule is a mesh's rounds and what they should take.
type Schedule struct {
	Rounds [][]Pair
	Dirs   int // directions measured
	Widest int // pairs in the largest round
	// Est is the rounds' expected time, Bound the most the mesh may take
	// with every retest, Budget the retests' time.
	Est, Bound, Budget time.Duration
}

// NewSchedule is the schedule of rounds at costs c: each round runs its
// pairs at once, one direction after the other, or under Screen both at
// once, shorter; then the retests and the controls, one at a time.
func NewSchedule(rounds [][]Pair, c Costs) Schedule {
	s := Schedule{Rounds: rounds}
	for _, r := range rounds {
		s.Dirs += 2 * len(r)
		s.Widest = max(s.Widest, len(r))
	}
	n := time.Duration(len(rounds))
	s.Est, s.Bound = n*2*c.Direction, n*2*c.DirectionBound
	if c.Screen {
		s.Est, s.Bound = n*c.ScreenDirection, n*c.DirectionBound
	}
	s.Budget = c.RetestBudget
	if s.Budget <= 0 {
		s.Budget = RetestBudget(s.Est)
	}
	// The controls run whatever the budget; the last retest it starts may
	// run to its bound.
	retests := s.Budget + time.Duration(c.Controls+1)*c.DirectionBound
	if c.MaxRetests >= 0 {
		retests = min(retests, time.Duration(min(c.MaxRetests, s.Dirs)+c.Controls)*c.DirectionBound)
	}
	s.Bound += retests + time.Minute
	return s
}

// Session is rank 0's whole mesh as a command runs it: the document's
// settings, the pairs, how ranks of one host share the rounds, and the
// Leader over the rendezvous. The command keeps its flags and its output.
type Session struct {
	// Doc is the document to fill: kind, schema, launcher, version and
	// what each direction measures, set by the caller.
	Doc *results.Mesh
	// Pairs, if not nil, are the only pairs measured (--pairs).
	Pairs []Pair
	// PerHost bounds the pairs of one host at once (0: no bound); a NIC
	// is never in two at once.
	PerHost int
	Costs   Costs
	// Leader runs the mesh; its Rounds and Bound are the Session's to set
	// once the ranks are in.
	Leader *Leader
	// Planned, if set, is told the schedule once the ranks are in, before
	// the first round (to say what is about to run).
	Planned func(m *results.Mesh, s Schedule)
	// Quick, if set, measures the mesh in quick mode with these options
	// (mesh --quick): a search, not every pair; Planned is told a
	// Schedule of no rounds and the search's bound.
	Quick *QuickOptions
}

// Run gathers the ranks, schedules the pairs so that ranks sharing a NIC
// (or more than PerHost pairs of a host) do not run at once, runs the
// mesh and returns its document, verdicts included.
func (s *Session) Run(ctx context.Context) *results.Mesh {
	ld := s.Leader
	if s.Quick != nil {
		ld.Quick = s.Quick
		ld.Plan = s.quickPlan
		ld.Lead(ctx, s.Doc)
		return s.Doc
	}
	ld.Plan = func(m *results.Mesh) ([][]Pair, time.Duration) {
		rounds := Tournament(ld.Size)
		if s.Pairs != nil {
			rounds = Subset(ld.Size, s.Pairs)
		}
		share := make([]Share, len(m.Ranks))
		for i, rk := range m.Ranks {
			share[i] = Share{NIC: rk.NIC(), Host: rk.Host}
		}
		if ld.Opts.Controls == 0 {
			ld.Opts.Controls = ControlsFor(m.Ranks, s.PerHost, 0)
			s.Costs.Controls = ld.Opts.Controls
		}
		sch := NewSchedule(LimitShared(rounds, share, s.PerHost), s.Costs)
		ld.Opts.RetestBudget = sch.Budget
		if s.Planned != nil {
			s.Planned(m, sch)
		}
		return sch.Rounds, sch.Bound
	}
	ld.Lead(ctx, s.Doc)
	return s.Doc
}

// quickPlan is a quick search's schedule: no rounds known in advance,
// and its bound, every round it may run at a direction's bound.
func (s *Session) quickPlan(m *results.Mesh) ([][]Pair, time.Duration) {
	rounds := s.Quick.MaxRounds
	if rounds <= 0 {
		rounds = max(s.Quick.RandomRounds, DefaultQuickOptions.RandomRounds) + 32
	}
	sch := Schedule{Bound: time.Duration(rounds)*s.Costs.DirectionBound + time.Minute}
	if s.Planned != nil {
		s.Planned(m, sch)
	}
	return nil, sch.Bound
}

// SharedControls is how many healthy directions a mesh retests beside its
// outliers to measure the noise a pair's two directions share, which the
// directions' difference cannot show: where a host's NICs run pairs at
// once (the rounds slow each other, the retests alone do not), and on a
// mesh too small for the pairs' fit to tell it (a host's busy moments
// while both directions ran). A retest is then judged against directions
// measured the same way, and a rank by its typical pair against that
// noise.
const SharedControls = 8

// ControlsFor is the controls a mesh of these ranks needs: given (what the
// command asked: its screening's) if any; else SharedControls when some
// host has several NICs whose pairs may run at once (perHost not 1);
// else none.
func ControlsFor(ranks []results.MeshRank, perHost, given int) int {
	if given > 0 || perHost == 1 {
		return given
	}
	for _, g := range hostGroups(ranks, true) {
		if len(g.nics) > 1 {
			return SharedControls
		}
	}
	return 0
}
