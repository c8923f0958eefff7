package plan_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/plan/plantest"
)

// Fuzz targets for what a user or a peer hands the plan: sizes, byte counts
// and whole plans as a server decodes them. The seeds in testdata/fuzz run
// as ordinary tests; `make fuzz` explores further (CGO_ENABLED=0 too).

// FuzzPlanValidate decodes a plan as a server does; a plan Validate passes
// stays within the limits (engine's FuzzPlanResources checks what the
// engine derives from it), and survives the wire.
func FuzzPlanValidate(f *testing.F) {
	for _, s := range plantest.Seeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p plan.Plan
		if json.Unmarshal(data, &p) != nil {
			return
		}
		checkLimits(t, p)
	})
}

func checkLimits(t *testing.T, p plan.Plan) {
	t.Helper()
	if p.Validate() != nil {
		return
	}
	if n := len(p.Sizes); n < 1 || n > plan.MaxSizes {
		t.Fatalf("%d sizes passed", n)
	}
	for _, s := range p.Sizes {
		if s < 1 || s > plan.MaxMessageSize {
			t.Fatalf("size %d passed", s)
		}
	}
	if q := p.MaxQPs(); q < 1 || q > plan.MaxQPs {
		t.Fatalf("%d QPs passed", q)
	}
	if len(p.Loads) > plan.MaxLoads {
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
	var back plan.Plan
	if err := json.Unmarshal(b, &back); err != nil || back.Validate() != nil {
		t.Fatalf("a valid plan does not survive the wire: %v", err)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8", "64K", "1m", "8M", "4KB", "2MiB", "0", "-1", "9M", "1G", " 12k ", "9223372036854775807K", "KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := plan.ParseSize(s)
		if err != nil {
			return
		}
		if n < 1 || n > plan.MaxMessageSize {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		if back, err := plan.ParseSize(strconv.Itoa(n)); err != nil || back != n {
			t.Fatalf("ParseSize(%q) = %d, but %d reads back as %d, %v", s, n, n, back, err)
		}
	})
}

func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"4096", "4K", "2M", "3GiB", "1t", "", "0", "-1", "1X", "99999999999T", "4611686018427387904"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := plan.ParseBytes(s)
		if err != nil {
			return
		}
		if n < 1 || n > 1<<62 {
			t.Fatalf("ParseBytes(%q) = %d", s, n)
		}
		if back, err := plan.ParseBytes(strconv.FormatInt(n, 10)); err != nil || back != n {
			t.Fatalf("ParseBytes(%q) = %d does not read back: %d, %v", s, n, back, err)
		}
	})
}

// FuzzParseIntList is the --qps list: positive numbers, or one line of error.
func FuzzParseIntList(f *testing.F) {
	for _, s := range []string{"1,2,4,8,16", "1", " 3 , 5", "", ",", "0", "-1", "1,,2", "99999999999999999999", "1024,1025"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		list, err := plan.ParseIntList(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") && !strings.Contains(s, "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		if len(list) == 0 {
			t.Fatalf("plan.ParseIntList(%q) = %d numbers", s, len(list))
		}
		parts := make([]string, len(list))
		for i, n := range list {
			if n < 1 {
				t.Fatalf("plan.ParseIntList(%q) holds %d", s, n)
			}
			parts[i] = strconv.Itoa(n)
		}
		if back, err := plan.ParseIntList(strings.Join(parts, ",")); err != nil || len(back) != len(list) {
			t.Fatalf("%v does not read back: %v, %v", list, back, err)
		}
	})
}
