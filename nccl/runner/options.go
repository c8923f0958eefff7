// Package runner is ncclbench's engine: it places the process's GPUs, meets
// the other processes (launch/), creates and tears down the communicators,
// runs and times the collectives as nccl-tests does, checks their results,
// watches for hung and failed ranks and writes the report. cmd/ncclbench
// holds the flags; the stand-in NCCL (nccl/testdata/fakenccl) stands in for
// NCCL and CUDA in the tests.
package runner

import (
	"time"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
)

// Options are a run's settings: nccl-tests' flags and ncclbench's own.
type Options struct {
	Coll       bench.Collective
	Nthreads   int
	Ngpus      int
	MinBytes   int
	MaxBytes   int
	StepBytes  int
	StepFactor int
	Iters      int
	AggIters   int
	Warmup     int
	Check      int
	Types      []bench.Type
	Ops        []bench.Op
	Root       int
	Blocking   int
	Timeout    time.Duration // -T: per collective; 0: no limit
	Average    int
	JSON       bool
	Save       string
	NCCLLib    string
	CudartLib  string
	Rendezvous string
	RdzvPort   int
	TokenFile  string
	RdvTimeout time.Duration
	NCCLLog    string
	NoAnalysis bool
	OutputFile string   // -J: nccl-tests' JSON file
	PerIter    int      // -I 1: per-iteration timing
	PerIterSkp int      // -K: leading iterations left out of -I's summary
	Args       []string // the command line, for -J
	// Metrics (--metrics) is a Prometheus text file to write, Push
	// (--push) a Pushgateway to push to under PushJob and PushInstance
	// (default: the host's name), within PushTimeout; rank 0 only.
	Metrics, Push, PushJob, PushInstance string
	PushTimeout                          time.Duration
	// Getenv reads the launcher's variables (ranks, rendezvous, token);
	// nil is os.Getenv. NCCL reads its own NCCL_* from the process.
	Getenv func(string) string
	// ToolInfo says what the binary is and which NCCL it loaded, for the
	// report (cmd/ncclbench's version).
	ToolInfo func(lib *nccl.Lib, loadErr error) *version.Info
	CPUTime  bool     // -C 1: report the CPU time spent issuing each collective
	MinBusBW *float64 // NCCL_TESTS_MIN_BW (GB/s); nil: unchecked
	// Split (NCCL_TESTS_SPLIT, NCCL_TESTS_SPLIT_MASK) puts the processes
	// in groups of a communicator each, all running the benchmark at
	// once; the report is rank 0's group's, its times averaged over every
	// process, as nccl-tests does. nil: one communicator.
	Split *bench.Split
	// Graphs (-G N): capture the timed iterations into a CUDA graph and
	// launch it N times, as nccl-tests; 0: launch each collective.
	Graphs int
}

// Exit codes. 1 is what nccl-tests returns on wrong results.
const (
	ExitWrong = 1
	ExitUsage = 2
	ExitFail  = 3
)
