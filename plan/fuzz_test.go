package plan

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// Fuzz targets for what a user or a peer hands the plan: sizes, byte counts
// and whole plans as a server decodes them. The seeds in testdata/fuzz run
// as ordinary tests; `make fuzz` explores further (CGO_ENABLED=0 too).

// FuzzPlanValidate decodes a plan as a server does; a plan Validate passes
// stays within the limits (engine's FuzzPlanResources checks what the
// engine derives from it), and survives the wire.
func FuzzPlanValidate(f *testing.F) {
	for _, t := range results.Tests {
		b, _ := json.Marshal(DefaultPlan(t))
		f.Add(b)
	}
	big := DefaultPlan(results.WriteBW)
	big.Sizes, big.Iterations, big.Warmup, big.QPs, big.Verify = []int{MaxMessageSize}, MaxIterations, MaxIterations, []int{MaxQPs}, true
	b, _ := json.Marshal(big)
	f.Add(b)
	f.Add([]byte(`{"test":"write_bw","sizes":[-1,0,9999999999],"qps":[0,-5],"threads":-1}`))
	loaded := DefaultPlan(results.WriteLat)
	loaded.Loads = []Plan{DefaultPlan(results.WriteBW), DefaultPlan(results.SendBW)}
	b, _ = json.Marshal(loaded)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p Plan
		if json.Unmarshal(data, &p) != nil {
			return
		}
		checkLimits(t, p)
	})
}

func checkLimits(t *testing.T, p Plan) {
	t.Helper()
	if p.Validate() != nil {
		return
	}
	if n := len(p.Sizes); n < 1 || n > MaxSizes {
		t.Fatalf("%d sizes passed", n)
	}
	for _, s := range p.Sizes {
		if s < 1 || s > MaxMessageSize {
			t.Fatalf("size %d passed", s)
		}
	}
	if q := p.MaxQPs(); q < 1 || q > MaxQPs {
		t.Fatalf("%d QPs passed", q)
	}
	if len(p.Loads) > MaxLoads {
		t.Fatalf("%d loads passed", len(p.Loads))
	}
	for _, l := range p.Loads {
		if len(l.Loads) > 0 || l.Test.IsLatency() {
			t.Fatalf("load %+v passed", l)
		}
		checkLimits(t, l)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil || back.Validate() != nil {
		t.Fatalf("a valid plan does not survive the wire: %v", err)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8", "64K", "1m", "8M", "4KB", "2MiB", "0", "-1", "9M", "1G", " 12k ", "9223372036854775807K", "KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			return
		}
		if n < 1 || n > MaxMessageSize {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		if back, err := ParseSize(strconv.Itoa(n)); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d, but %d reads back as %d, %v", s, n, n, back, err)
		}
	})
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"4096", "4K", "2M", "3GiB", "1t", "", "0", "-1", "1X", "99999999999T", "4611686018427387904"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err != nil {
			return
		}
		if n < 1 || n > 1<<62 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		if back, err := ParseBytes(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("ParseBytes(%q) = %d does not read back: %d, %v", s, n, back, err)
		}
	})
}
