// Package plantest holds what the plan's fuzz targets and the engine's
// share: the seed plans, as a server receives them (JSON).
package plantest

import (
	"encoding/json"

	"github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

// Seeds are every test's default plan, one at every limit, one with
// values out of range, and a loaded-latency plan whose loads are plans.
func Seeds() [][]byte {
	var seeds [][]byte
	add := func(p any) {
		b, err := json.Marshal(p)
		if err != nil {
			panic(err)
		}
		seeds = append(seeds, b)
	}
	for _, t := range results.Tests {
		add(plan.DefaultPlan(t))
	}
	big := plan.DefaultPlan(results.WriteBW)
	big.Sizes, big.Iterations, big.Warmup, big.QPs, big.Verify = []int{plan.MaxMessageSize}, plan.MaxIterations, plan.MaxIterations, []int{plan.MaxQPs}, true
	add(big)
	seeds = append(seeds, []byte(`{"test":"write_bw","sizes":[-1,0,9999999999],"qps":[0,-5],"threads":-1}`))
	loaded := plan.DefaultPlan(results.WriteLat)
	loaded.Loads = []plan.Plan{plan.DefaultPlan(results.WriteBW), plan.DefaultPlan(results.SendBW)}
	add(loaded)
	return seeds
}
