package runner

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
)

func options(t *testing.T, coll string) *Options {
	t.Helper()
	if fakeNCCL == "" {
		t.Skip(noFake)
	}
	lib := fakeNCCL
	c, _ := bench.FindCollective(coll)
	types, _ := bench.ParseTypes("float")
	ops, _ := bench.ParseOps("sum")
	return &Options{Coll: c, Nthreads: 1, Ngpus: 1, MinBytes: 1024, MaxBytes: 4096, StepFactor: 2, Iters: 3, AggIters: 1, Warmup: 1, Check: 1,
		Types: types, Ops: ops, Timeout: time.Minute, Average: 1, NCCLLib: lib, RdvTimeout: 10 * time.Second, NoAnalysis: true,
		Getenv:   func(string) string { return "" }, // no launcher: one process
		ToolInfo: func(*nccl.Lib, error) *version.Info { return &version.Info{Tool: "ncclbench"} },
	}
}

// One process in this test's own process, on the stand-in: the table has
// every size, checked, and the footer's verdicts.
func TestRunOneProcess(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Run(options(t, "all_reduce"), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	text := out.String()
	for _, want := range []string{"# Out of bounds values : 0 OK", "# Avg bus bandwidth", "CPU test library"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	rows := 0
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "1024" || f[0] == "2048" || f[0] == "4096") {
			rows++
		}
	}
	if rows != 3 {
		t.Errorf("%d size rows, want 3:\n%s", rows, text)
	}
}

// Below NCCL_TESTS_MIN_BW the run exits 1 (with the figures kept) and
// says why in one line.
func TestRunBelowMinimum(t *testing.T) {
	o := options(t, "all_reduce")
	min := 1e9
	o.MinBusBW = &min
	var out, errOut bytes.Buffer
	if code := Run(o, &out, &errOut); code != ExitWrong || !strings.Contains(errOut.String(), "is below NCCL_TESTS_MIN_BW=") || !strings.Contains(out.String(), " FAILED") {
		t.Errorf("exit %d: %q\n%s", code, errOut.String(), out.String())
	}
}
