package compare

import (
	"errors"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

func ncclRun(collective string, ranks int, timeUs float64, perIter []float64) *results.NCCLRun {
	half := results.NCCLResult{TimeUs: timeUs, BusBW: 1000 / timeUs}
	if perIter != nil {
		half.PerIter = &results.NCCLPerIter{Skipped: 1, TimesUs: perIter}
	}
	return &results.NCCLRun{Tool: results.NCCLTool, Config: results.NCCLConfig{Collective: collective, NRanks: ranks},
		Results: []results.NCCLPoint{{Size: 1 << 20, Type: "float", Redop: "sum", OutOfPlace: half, InPlace: half}}}
}

func TestNCCLRuns(t *testing.T) {
	// Without -I 1: the threshold alone; 10% slower is a regression of
	// both halves' time and bus bandwidth.
	rep, err := NCCLRuns(ncclRun("all_reduce", 8, 100, nil), ncclRun("all_reduce", 8, 110, nil), DefaultOptions)
	if err != nil || rep.Regressions != 4 || rep.Family != 0 || !rep.NCCL || rep.Test != "all_reduce" {
		t.Fatalf("%+v, %v", rep, err)
	}
	// With -I 1: the iterations after -K are the values (the first, 1000,
	// is skipped), and the rows are noise-aware.
	iters := func(base float64) []float64 { return []float64{1000, base, base + 1, base - 1, base + 0.5, base - 0.5} }
	rep, err = NCCLRuns(ncclRun("all_reduce", 8, 100, iters(100)), ncclRun("all_reduce", 8, 100, iters(100.2)), DefaultOptions)
	if err != nil || rep.Regressions != 0 || rep.Family != 4 || rep.Rows[1].Metric != Time || rep.Rows[1].Base != 100 {
		t.Fatalf("%+v, %v", rep, err)
	}
	for _, r := range rep.Rows {
		if !r.NoiseAware || r.Verdict != Same {
			t.Errorf("%s: noise-aware %v, %v", r.Metric, r.NoiseAware, r.Verdict)
		}
	}
	if _, err := NCCLRuns(ncclRun("all_reduce", 8, 100, nil), ncclRun("broadcast", 8, 100, nil), DefaultOptions); !errors.Is(err, ErrInvalid) {
		t.Errorf("other collective: %v", err)
	}
	if _, err := NCCLRuns(ncclRun("all_reduce", 8, 100, nil), ncclRun("all_reduce", 16, 100, nil), DefaultOptions); !errors.Is(err, ErrInvalid) {
		t.Errorf("other ranks: %v", err)
	}
	failed := ncclRun("all_reduce", 8, 100, nil)
	failed.Error = "rank 3: unhandled cuda error"
	if _, err := NCCLRuns(ncclRun("all_reduce", 8, 100, nil), failed, DefaultOptions); !errors.Is(err, ErrPartial) {
		t.Errorf("failed run: %v", err)
	}
}
