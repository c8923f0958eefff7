// Package runner is ncclbench's engine: it places the process's GPUs, meets
// the other processes (launch/), creates and tears down the communicators,
// runs and times the collectives as nccl-tests does, checks their results,
// watches for hung and failed ranks and writes the report. cmd/ncclbench
// holds the flags; the stand-in NCCL (nccl/testdata/fakenccl) stands in for
// NCCL and CUDA in the tests.
package runner

import (
	"errors"
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/ntjson"
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

// Validate checks the options' ranges and the ones that exclude each
// other, as nccl-tests' flags name them; one error of one line.
func (o *Options) Validate() error {
	switch {
	case o.Nthreads != 1:
		return errors.New("-t: only one thread per process is supported; use -g for several GPUs per process")
	case o.Ngpus < 1:
		return errors.New("-g must be at least 1")
	case o.Iters < 1:
		return errors.New("-n must be at least 1")
	case o.AggIters < 1:
		return errors.New("-m must be at least 1")
	case o.Warmup < 0:
		return errors.New("-w must not be negative")
	case o.Check < 0:
		return errors.New("-c must not be negative")
	case o.Average < 0 || o.Average > 3:
		return errors.New("-a must be 0, 1, 2 or 3")
	case o.Blocking < 0 || o.Blocking > 3:
		return errors.New("-z must be 0, 1, 2 or 3 (as nccl-tests)")
	case o.Root < -1:
		return errors.New("-r must be a rank or -1")
	case o.PerIter != 0 && o.PerIter != 1:
		return errors.New("-I must be 0 or 1")
	case o.PerIterSkp < 0 || o.PerIterSkp >= o.Iters:
		return fmt.Errorf("-K %d: must be between 0 and %d (-n %d)", o.PerIterSkp, o.Iters-1, o.Iters)
	case o.PerIter == 1 && o.Iters > MaxPerIter:
		return fmt.Errorf("-I 1 with -n %d: at most %d iterations are timed one by one", o.Iters, MaxPerIter)
	case o.PerIterSkp > 0 && o.PerIter == 0:
		return errors.New("-K needs per-iteration timing (-I 1)")
	case o.PushTimeout <= 0:
		return fmt.Errorf("--push-timeout %v must be positive", o.PushTimeout)
	case o.PushJob == "":
		return errors.New("--push-job must not be empty")
	case o.Graphs < 0:
		return fmt.Errorf("-G %d: the number of CUDA graph launches cannot be negative", o.Graphs)
	case o.Graphs > 0 && o.PerIter == 1:
		// nccl-tests drops -I with a warning; a flag silently lost is worse.
		return errors.New("-G and -I 1: per-iteration timing cannot see inside a CUDA graph (nccl-tests disables -I); choose one")
	case o.Graphs > 0 && o.Blocking != 0:
		return fmt.Errorf("-G and -z %d: a blocking collective waits for its stream, which a CUDA graph capture forbids; choose one", o.Blocking)
	case o.OutputFile != "" && !ntjson.IsJSONName(o.OutputFile):
		return fmt.Errorf("-J %s: only JSON files (FILE.json) are written, as by nccl-tests", o.OutputFile)
	}
	return nil
}
