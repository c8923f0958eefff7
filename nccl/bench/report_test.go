package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// nccl-tests passes a run from 90% of NCCL_TESTS_MIN_BW (common.cu).
func TestCheckBusBW(t *testing.T) {
	for _, c := range []struct {
		avg, min float64
		ok       bool
	}{
		{100, 111, true}, // 99.9 needed
		{100, 112, false},
		{100, 0, true},
		{0, -1, true},
	} {
		r := &results.NCCLRun{AvgBusBW: c.avg}
		r.CheckBusBW(c.min)
		if r.MinBusBW.Okay != c.ok || (r.BelowMinBusBW() == "") != c.ok {
			t.Errorf("avg %g min %g: okay %v (%q), want %v", c.avg, c.min, r.MinBusBW.Okay, r.BelowMinBusBW(), c.ok)
		}
		var b bytes.Buffer
		WriteFooter(&b, r, Collectives[0])
		want := map[bool]string{true: " OK\n", false: " FAILED\n"}[c.ok]
		if !strings.Contains(b.String(), want) {
			t.Errorf("avg %g min %g: footer %q lacks %q", c.avg, c.min, b.String(), want)
		}
	}
}
