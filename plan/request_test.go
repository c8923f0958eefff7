package plan_test

import (
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

// request is what the command line gives with no flag: the flags'
// defaults, nothing given.
func request(t results.Test, given ...string) plan.Request {
	def := plan.DefaultPlan(t)
	return plan.Request{Test: t, Size: "65536", Iterations: def.Iterations, Warmup: def.Warmup, Timeout: def.Timeout,
		TxDepth: def.TxDepth, RxDepth: def.RxDepth, CQMod: def.CQMod, Inline: -1, QPTimeout: 14, QP: 1, Threads: 1,
		PostList: 1, Transport: "RC", Atomic: string(results.FetchAndAdd), Repeat: 1,
		Given: func(f string) bool {
			for _, g := range given {
				if g == f {
					return true
				}
			}
			return false
		}}
}

func TestRequestRules(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   func() plan.Request
		want  string // the error; "" builds
		check func(p plan.Plan) bool
	}{
		{"defaults", func() plan.Request { return request(results.WriteBW) }, "", func(p plan.Plan) bool {
			return p.Sizes[0] == 65536 && p.Warmup == min(p.Iterations/10, plan.DefaultPlan(results.WriteBW).Warmup) && p.Inline == plan.DefaultInline(results.WriteBW, results.RC)
		}},
		{"-a and -s", func() plan.Request { r := request(results.WriteBW, "size"); r.All = true; return r }, "-a and -s exclude each other", nil},
		{"-a", func() plan.Request { r := request(results.WriteBW); r.All = true; return r }, "", func(p plan.Plan) bool { return len(p.Sizes) == len(plan.AllSizes()) }},
		{"atomics move 8 bytes", func() plan.Request { r := request(results.AtomicBW, "size"); r.Size = "16"; return r }, "atomics move 8 bytes", nil},
		{"atomic default size", func() plan.Request { return request(results.AtomicLat) }, "", func(p plan.Plan) bool { return p.Sizes[0] == 8 }},
		{"-q and --qps", func() plan.Request { r := request(results.WriteBW, "qp"); r.QPList = "1,2"; return r }, "-q and --qps exclude each other", nil},
		{"--qps", func() plan.Request { r := request(results.WriteBW); r.QPList = "4,1,2"; return r }, "", func(p plan.Plan) bool { return len(p.QPs) == 3 && p.QPs[0] == 4 }},
		{"bad --qps", func() plan.Request { r := request(results.WriteBW); r.QPList = "1,0"; return r }, "--qps: bad list", nil},
		{"--qp-timeout", func() plan.Request { r := request(results.WriteBW); r.QPTimeout = 32; return r }, "--qp-timeout 32 outside 1..31", nil},
		{"--rate window", func() plan.Request { r := request(results.SendLat); r.Rates = "1000,10,1000"; return r }, "", func(p plan.Plan) bool {
			return p.TxDepth == plan.DefaultRateWindow && len(p.Rates) == 2 && p.Rates[0] == 10
		}},
		{"--rate with -t", func() plan.Request {
			r := request(results.SendLat, "tx-depth")
			r.Rates, r.TxDepth = "1000", 8
			return r
		}, "", func(p plan.Plan) bool { return p.TxDepth == 8 }},
		{"--rate and --repeat", func() plan.Request { r := request(results.SendLat); r.Rates, r.Repeat = "1000", 3; return r }, "--rate and --repeat exclude each other", nil},
		{"--hgrm on bandwidth", func() plan.Request { r := request(results.WriteBW); r.LatencyFiles = true; return r }, "--hgrm and --raw apply to latency tests", nil},
		{"--warmup given", func() plan.Request { r := request(results.WriteBW, "warmup"); r.Warmup = 0; return r }, "", func(p plan.Plan) bool { return p.Warmup == 0 }},
		{"--load and --repeat", func() plan.Request {
			r := request(results.SendLat)
			r.Loads, r.Repeat = []plan.Plan{plan.DefaultPlan(results.WriteBW)}, 2
			return r
		}, "--load and --repeat exclude each other", nil},
		{"validated", func() plan.Request { r := request(results.WriteBW); r.Transport = "XX"; return r }, "transport", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.req().Build()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Build: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Build: %v, want %q", err, tc.want)
			case tc.check != nil && !tc.check(p):
				t.Errorf("plan %+v", p)
			}
		})
	}
}
