package plan

import (
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

func TestValidGPU(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"0", true}, {"7", true}, {"0000:3b:00.0", true}, {"3b:00.0", true}, {"0000:3B:00.1", true},
		{"-1", false}, {"2048", false}, {"gpu0", false}, {"", false}, {"0000:3b:00", false}, {"0000:3b:00.9", false},
	} {
		if err := ValidGPU(tc.in); (err == nil) != tc.ok {
			t.Errorf("ValidGPU(%q) = %v, want ok=%v", tc.in, err, tc.ok)
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"8", 8, true}, {"64K", 65536, true}, {"1m", 1 << 20, true}, {"8M", 8 << 20, true},
		{"4KB", 4096, true}, {"0", 0, false}, {"-1", 0, false}, {"9M", 0, false}, {"x", 0, false}, {"1G", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestPlanValidate(t *testing.T) {
	good := DefaultPlan(results.WriteBW)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := AllSizes(); len(s) != 23 || s[0] != 2 || s[22] != 8<<20 {
		t.Errorf("AllSizes = %v", s)
	}
	mutations := map[string]func(*Plan){
		"test":       func(p *Plan) { p.Test = "nope" },
		"size":       func(p *Plan) { p.Sizes = []int{16 << 20} },
		"no sizes":   func(p *Plan) { p.Sizes = nil },
		"iters":      func(p *Plan) { p.Iterations = 0 },
		"depth":      func(p *Plan) { p.TxDepth = 0 },
		"mtu":        func(p *Plan) { p.MTU = 1500 },
		"sl":         func(p *Plan) { p.SL = 16 },
		"qp timeout": func(p *Plan) { p.QPTimeout = 32 },
		"timeout":    func(p *Plan) { p.Timeout = 0 },
		"duration":   func(p *Plan) { p.Duration = -time.Second },
	}
	for name, mutate := range mutations {
		p := DefaultPlan(results.WriteBW)
		mutate(&p)
		if p.Validate() == nil {
			t.Errorf("%s: invalid plan accepted", name)
		}
	}
	d := DefaultPlan(results.SendLat)
	d.Iterations, d.Duration = 0, 5*time.Second
	if err := d.Validate(); err != nil {
		t.Errorf("duration mode without iterations: %v", err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"4096": 4096, "4K": 4096, "2M": 2 << 20, "3GiB": 3 << 30, "1t": 1 << 40} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1", "1X", "99999999999T"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("ParseBytes(%q) accepted", bad)
		}
	}
}

func TestCapSignalBytes(t *testing.T) {
	for _, tc := range []struct{ size, cqMod, bytes, want int }{
		{65536, 100, 256 << 10, 4},
		{65536, 100, 64 << 10, 1},
		{1 << 20, 100, 256 << 10, 1}, // never below one
		{2, 100, 64 << 10, 100},      // never above the plan's
	} {
		p := DefaultPlan(results.WriteBW)
		p.Sizes, p.CQMod = []int{tc.size}, tc.cqMod
		p.CapSignalBytes(tc.bytes)
		if p.CQMod != tc.want {
			t.Errorf("size %d, cq-mod %d, %d bytes: %d, want %d", tc.size, tc.cqMod, tc.bytes, p.CQMod, tc.want)
		}
	}
}
