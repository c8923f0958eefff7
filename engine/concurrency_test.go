package engine

import (
	"math"
	"strings"
	"testing"
	"time"

	rbplan "github.com/rdmabench/rdmabench/plan"
)

func TestSpreadAndJain(t *testing.T) {
	tests := []struct {
		in               []float64
		min, med, max, j float64
	}{
		{[]float64{5, 5, 5, 5}, 5, 5, 5, 1},
		{[]float64{10, 0, 0, 0}, 0, 0, 10, 0.25}, // one QP took everything: 1/n
		{[]float64{1, 3}, 1, 2, 3, 16.0 / 20},
		{[]float64{4, 1, 2}, 1, 2, 4, 49.0 / 63},
	}
	for _, tt := range tests {
		s := Spread(tt.in)
		if s.MinGbps != tt.min || s.MedianGbps != tt.med || s.MaxGbps != tt.max || math.Abs(s.Jain-tt.j) > 1e-12 {
			t.Errorf("Spread(%v) = %+v, want min %v median %v max %v jain %v", tt.in, s, tt.min, tt.med, tt.max, tt.j)
		}
	}
}

// Each QP's figure is its bytes over its own interval; the aggregate is all
// bytes over the whole one. Equal counts over different intervals must give
// different figures, the slowest QP the minimum.
func TestBandwidthResultPerQPOwnIntervals(t *testing.T) {
	res := bandwidthResult(4096, 3, bwOutcome{perQP: []uint64{100, 100, 100}, perQPSeconds: []float64{0.1, 0.25, 0.1},
		messages: 300, seconds: 0.25})
	want := []float64{100 * 4096 * 8 / 0.1 / 1e9, 100 * 4096 * 8 / 0.25 / 1e9, 100 * 4096 * 8 / 0.1 / 1e9}
	for i, g := range res.PerQPGbps {
		if math.Abs(g-want[i]) > 1e-9 {
			t.Errorf("QP %d: %v Gb/s, want %v", i, g, want[i])
		}
	}
	if agg := 300 * 4096 * 8 / 0.25 / 1e9; math.Abs(res.BWAvgGbps-agg) > 1e-9 {
		t.Errorf("aggregate %v, want %v", res.BWAvgGbps, agg)
	}
	if res.Spread == nil || res.Spread.MinGbps != res.PerQPGbps[1] || res.Spread.Jain >= 0.99 {
		t.Errorf("spread %+v: want QP 1 the minimum and Jain below 1", res.Spread)
	}
}

func TestLastInSlot(t *testing.T) {
	// 10 messages over 4 slots: slot 0 holds 1,5,9; slot 1: 2,6,10; slot 2: 3,7; slot 3: 4,8.
	want := []uint64{9, 10, 7, 8}
	for s, w := range want {
		if got := lastInSlot(10, 4, s); got != w {
			t.Errorf("lastInSlot(10, 4, %d) = %d, want %d", s, got, w)
		}
	}
	if got := lastInSlot(2, 4, 3); got != 0 {
		t.Errorf("slot never used: %d", got)
	}
}

func TestPlanConcurrencyAndOperations(t *testing.T) {
	ok := map[string]func(*Plan){
		"sweep":        func(p *Plan) { p.QPs = []int{1, 2, 4, 8, 16} },
		"threads":      func(p *Plan) { p.QPs, p.Threads, p.SharedCQ = []int{8}, 4, true },
		"uc write":     func(p *Plan) { p.Transport = "UC" },
		"imm":          func(p *Plan) { p.Imm = true },
		"post list":    func(p *Plan) { p.PostList = 16 },
		"bidir":        func(p *Plan) { p.Bidirectional = true },
		"interval":     func(p *Plan) { p.Duration, p.Interval = 10*time.Second, time.Second },
		"verify write": func(p *Plan) { p.Verify = true },
	}
	for name, mutate := range ok {
		p := rbplan.DefaultPlan(WriteBW)
		mutate(&p)
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	bad := map[string]struct {
		test   Test
		mutate func(*Plan)
		want   string
	}{
		"ud write":       {WriteBW, func(p *Plan) { p.Transport = "UD" }, "UD carries SEND only"},
		"uc read":        {ReadBW, func(p *Plan) { p.Transport = "UC" }, "UC carries"},
		"read imm":       {ReadBW, func(p *Plan) { p.Imm = true }, "immediate data"},
		"atomic size":    {AtomicBW, func(p *Plan) { p.Sizes = []int{16} }, "8 bytes"},
		"atomic op":      {AtomicBW, func(p *Plan) { p.Atomic = "XOR" }, "atomic"},
		"lat sweep":      {SendLat, func(p *Plan) { p.QPs = []int{1, 2} }, "latency tests"},
		"post list > tx": {WriteBW, func(p *Plan) { p.PostList, p.TxDepth = 32, 16 }, "exceeds the tx depth"},
		"zero qps":       {WriteBW, func(p *Plan) { p.QPs = []int{0} }, "QP count"},
		"threads":        {WriteBW, func(p *Plan) { p.Threads = 0 }, "threads"},
		"transport":      {SendBW, func(p *Plan) { p.Transport = "XRC" }, "transport"},
		"verify ud":      {SendBW, func(p *Plan) { p.Transport, p.Verify = "UD", true }, "--verify"},
		"tiny interval":  {WriteBW, func(p *Plan) { p.Interval = time.Millisecond }, "interval"},
	}
	for name, c := range bad {
		p := rbplan.DefaultPlan(c.test)
		c.mutate(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
}
