package engine

import (
	"encoding/json"
	"testing"
	"time"

	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/plan/plantest"
)

// Fuzz targets for what a peer or a user hands the engine: the control
// protocol (greeting, frames, messages), plans, and sizes. The seeds in
// testdata/fuzz run as ordinary tests; `make fuzz` explores further.

// FuzzPlanResources decodes a plan as the server does and checks that a
// plan Validate passes (plan's FuzzPlanValidate checks its limits) gives
// the server bounded resources and deadlines.
func FuzzPlanResources(f *testing.F) {
	for _, s := range plantest.Seeds() {
		f.Add(s)
	}
	// What the engine derives more from: UD with many QPs, nothing at all,
	// and a --rate sweep.
	f.Add([]byte(`{"test":"send_lat","sizes":[2],"iterations":1,"tx_depth":1,"rx_depth":1,"cq_mod":1,"timeout":1,"transport":"UD","qps":[1024],"threads":1,"post_list":1}`))
	f.Add([]byte(`null`))
	rate := rbplan.DefaultPlan(SendLat)
	rate.Rates, rate.TxDepth = []int{1, 1000, rbplan.MaxRate}, 32
	b, _ := json.Marshal(rate)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Plan
		if json.Unmarshal(data, &p) != nil {
			return
		}
		checkPlan(t, p)
	})
}

// checkPlan validates p and, when it passes, checks the bounds every later
// step (budget, memory layout, CQ sizes, deadlines) depends on.
func checkPlan(t *testing.T, p Plan) {
	t.Helper()
	if err := p.Validate(); err != nil {
		return
	}
	for _, l := range p.Loads {
		checkPlan(t, l)
	}
	if n := loopThreads(p); n < 1 || n > 2*rbplan.MaxQPs {
		t.Fatalf("%d loop threads", n)
	}
	// The memory a plan registers is positive and bounded: the budget
	// compares it, and the allocation takes it as an int.
	if m := PlanMemory(p); m <= 0 || m > 2*(rbplan.MaxMessageSize+udGRH+verifyBytes+4096)*rbplan.MaxQPs {
		t.Fatalf("plan memory %d", m)
	}
	// Deadlines never lie in the past, however large the plan.
	for _, size := range []int{1, p.MaxSize()} {
		if d := stepTime(p, size); d < p.Timeout || d < 0 {
			t.Fatalf("step time %v for size %d, timeout %v", d, size, p.Timeout)
		}
	}
	_ = Budget{MaxMem: 1 << 30}.check(p, nil)
	c := shapeCQs(p, 32767)
	if c.txDepth < 1 || c.rxDepth < 1 {
		t.Fatalf("CQ shape lowered a depth below 1: %+v", c)
	}
}

// The step time of the largest plan Validate allows is a deadline in the
// future (it overflowed to a negative Duration before it was clamped).
func TestStepTimeOfTheLargestPlan(t *testing.T) {
	p := rbplan.DefaultPlan(WriteBW)
	p.Sizes, p.Iterations, p.Warmup, p.QPs = []int{rbplan.MaxMessageSize}, rbplan.MaxIterations, rbplan.MaxIterations, []int{rbplan.MaxQPs}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := stepTime(p, rbplan.MaxMessageSize); d < 50*365*24*time.Hour {
		t.Errorf("step time %v", d)
	}
}
