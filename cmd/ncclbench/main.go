// Command ncclbench benchmarks NCCL collectives with nccl-tests' flags and
// table, without MPI: NCCL and the CUDA runtime are loaded at run time, and
// several processes meet through a small TCP rendezvous. It also reads
// NCCL's INFO log and says which network and transports NCCL really used.
//
//	ncclbench all_reduce -b 8 -e 128M -f 2 -g 8
//	torchrun --nproc-per-node 8 --nnodes 2 ... ncclbench all_gather -b 1M -e 1G -f 2
//	ncclbench analyze nccl.log
package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/suggest"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/runner"
	"github.com/rdmabench/rdmabench/publish"
)

// Exit codes (runner's).
const (
	exitWrong = runner.ExitWrong
	exitUsage = runner.ExitUsage
	exitFail  = runner.ExitFail
)

// usageError marks errors in the command line.
type usageError struct{ error }

const usageText = `usage: ncclbench COLLECTIVE [flags]     (nccl-tests flags)
       ncclbench analyze [--json] LOG...  (read NCCL_DEBUG=INFO logs, one or one per node)
       ncclbench version [--json]         (this binary, and the NCCL and CUDA runtime it finds)

collectives: all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv

Several processes: start one per node or per GPU with mpirun, srun or torchrun
(no MPI library needed); they meet at --rendezvous host:port (or
MASTER_ADDR/MASTER_PORT), which is rank 0's address; under srun, and
mpirun on one host, and in a Kubernetes Indexed Job or JobSet, it is
derived from the launcher's variables and the header says so (see
docs/launchers.md, docs/kubernetes.md). Give every process the
same job token (--token-file or NCCL_BENCH_TOKEN) to keep others out.

NCCL_TESTS_MIN_BW=GB/s: exit 1 when the average bus bandwidth is below 90%
of it, as nccl-tests (the footer says OK or FAILED).
NCCL_TESTS_SPLIT="MOD 8" (AND, OR, MOD, DIV; &, |, %, /) or
NCCL_TESTS_SPLIT_MASK=0x7: a communicator per group of processes, all at
once, as nccl-tests; the table is rank 0's group's.
`

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "ncclbench: %v\n", err)
		return code
	}
	rest := args[1:]
	name := ""
	// Invoked as all_reduce_perf (a symlink) works like nccl-tests.
	if c, ok := bench.FindCollective(filepath.Base(args[0])); ok {
		name = c.Name
	} else if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		name, rest = rest[0], rest[1:]
	}
	if name == "" && len(rest) > 0 && rest[0] == "--version" {
		name, rest = "version", rest[1:]
	}
	switch name {
	case "version":
		return runVersion(rest, stdout, stderr)
	case docsCommand:
		return runDocs(rest, stderr)
	case "":
		if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help") {
			fmt.Fprint(stdout, usageText)
			return 0
		}
		fmt.Fprint(stderr, usageText)
		return fail(exitUsage, errors.New("missing collective (e.g. ncclbench all_reduce -b 8 -e 128M -f 2)"))
	case "help":
		fmt.Fprint(stdout, usageText)
		return 0
	case "analyze":
		return analyze(rest, stdout, stderr)
	}
	coll, ok := bench.FindCollective(name)
	if !ok {
		return fail(exitUsage, unknownCommand(name))
	}
	o, err := parseFlags(coll, rest, stdout)
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return fail(exitUsage, err)
	}
	o.Args = args
	o.ToolInfo = toolInfo
	return runner.Run(o, stdout, stderr)
}

// unknownCommand is the error for a name that is no command: the nearest
// one when it looks like a typo of it, else the list.
func unknownCommand(name string) error {
	names := []string{"analyze", "version", "help"}
	for _, c := range bench.Collectives {
		names = append(names, c.Name)
	}
	// As FindCollective reads names (all_reduce_perf and allreduce are
	// all_reduce), and all-reduce too.
	spelling := func(s string) string {
		return strings.NewReplacer("_", "", "-", "").Replace(strings.TrimSuffix(strings.ToLower(s), "_perf"))
	}
	if near := suggest.Nearest(name, names, spelling); near != nil {
		return fmt.Errorf("unknown command %q%s", name, suggest.Phrase(near))
	}
	return fmt.Errorf("unknown command %q (want all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv, analyze or version)", name)
}

func parseFlags(coll bench.Collective, args []string, stdout io.Writer) (*runner.Options, error) {
	fs := newFlagSet("ncclbench " + coll.Name)
	fs.SetOutput(io.Discard)
	o := &runner.Options{Coll: coll}
	raw := addFlags(fs, o)
	help := fs.BoolP("help", "h", false, "show this help")
	if err := fs.Parse(args); err != nil {
		return nil, usageError{err}
	}
	if *help {
		fmt.Fprint(stdout, usageText+"\nflags:\n"+fs.FlagUsages())
		return nil, pflag.ErrHelp
	}
	for name, v := range raw.unsupported {
		if *v != 0 {
			return nil, usageError{fmt.Errorf("--%s %d is not supported by ncclbench (only 0)", name, *v)}
		}
	}
	if fs.NArg() > 0 {
		return nil, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if err := raw.apply(o, coll); err != nil {
		return nil, usageError{err}
	}
	if err := o.Validate(); err != nil {
		return nil, usageError{err}
	}
	if *raw.cputime != 0 && *raw.cputime != 1 {
		return nil, usageError{errors.New("-C must be 0 or 1")}
	}
	if err := fromEnv(o); err != nil {
		return nil, usageError{err}
	}
	o.CPUTime = *raw.cputime == 1
	return o, nil
}

// rawFlags are the flags parsed into Options only after the parse: sizes,
// types and ops as given, -C, and nccl-tests' flags ncclbench accepts at
// their defaults only.
type rawFlags struct {
	minS, maxS, stepS, typeS, opS string
	cputime                       *int
	unsupported                   map[string]*int
}

// addFlags binds ncclbench's flags, nccl-tests' names and letters, to o.
func addFlags(fs *pflag.FlagSet, o *runner.Options) *rawFlags {
	raw := &rawFlags{unsupported: map[string]*int{}}
	minS, maxS, stepS, typeS, opS := &raw.minS, &raw.maxS, &raw.stepS, &raw.typeS, &raw.opS
	fs.IntVarP(&o.Nthreads, "nthreads", "t", 1, "threads per process (only 1 is supported)")
	fs.IntVarP(&o.Ngpus, "ngpus", "g", 1, "GPUs driven by each process")
	fs.StringVarP(minS, "minbytes", "b", "32M", "minimum size (K, M, G suffixes)")
	fs.StringVarP(maxS, "maxbytes", "e", "32M", "maximum size")
	fs.StringVarP(stepS, "stepbytes", "i", "1M", "size increment when -f is 1")
	fs.IntVarP(&o.StepFactor, "stepfactor", "f", 1, "size multiplication factor")
	fs.IntVarP(&o.Iters, "iters", "n", 20, "timed iterations")
	fs.IntVarP(&o.AggIters, "agg_iters", "m", 1, "operations aggregated in one group per iteration")
	fs.IntVarP(&o.Warmup, "warmup_iters", "w", 5, "warmup iterations")
	fs.IntVarP(&o.Check, "check", "c", 1, "check results (0/1, or N checks)")
	fs.StringVarP(opS, "op", "o", "sum", "reduction: sum, prod, min, max, avg, all")
	fs.StringVarP(typeS, "datatype", "d", "float", "type: int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 all")
	fs.IntVarP(&o.Root, "root", "r", 0, "root rank for broadcast and reduce (-1: every rank in turn)")
	fs.IntVarP(&o.Blocking, "blocking", "z", 0, "0: queue the iterations; 1: wait for each collective and barrier; 2: wait for each; 3: time only the collectives, barrier between iterations")
	durflag.VarP(fs, &o.Timeout, "timeout", "T", 600*time.Second, "how long one collective may take before the run is aborted, naming the process that holds it up; a wait for N queued collectives gets N times as long (0: no limit)")
	fs.IntVarP(&o.Average, "average", "a", 1, "time reported across processes: 0 rank 0, 1 average, 2 min, 3 max")
	fs.BoolVar(&o.JSON, "json", false, "print the whole run as JSON instead of the table")
	fs.StringVar(&o.Save, "save", "", "also write the run's JSON document to FILE (rank 0; replaced atomically), a baseline to keep")
	fs.StringVar(&o.NCCLLib, "nccl-lib", "", "libnccl.so.2 to load (file or directory)")
	fs.StringVar(&o.CudartLib, "cudart-lib", "", "libcudart.so to load (file or directory)")
	fs.StringVar(&o.Rendezvous, "rendezvous", "", "host:port of rank 0 for multi-process runs (default MASTER_ADDR:MASTER_PORT, else derived from Slurm's, Open MPI's or a Kubernetes Indexed Job's variables)")
	fs.IntVar(&o.RdzvPort, "rdzv-port", 0, "rendezvous port on MASTER_ADDR or the derived host (default MASTER_PORT, MASTER_PORT+1 under torchrun, or derived from the job id)")
	fs.StringVar(&o.TokenFile, "token-file", "", "job token every process must hold (default $NCCL_BENCH_TOKEN); keeps other processes out of the rendezvous")
	durflag.VarP(fs, &o.RdvTimeout, "rendezvous-timeout", "", 120*time.Second, "how long to wait for all processes to join")
	fs.StringVar(&o.NCCLLog, "nccl-log", "", "keep NCCL's INFO log in this file (rank N>0 appends .N)")
	fs.BoolVar(&o.NoAnalysis, "no-log-analysis", false, "do not set NCCL_DEBUG nor analyze NCCL's log")
	fs.StringVarP(&o.OutputFile, "output_file", "J", "", "also write nccl-tests' JSON file (FILE.json; rank 0; an existing FILE makes FILE.0, FILE.1, ...)")
	fs.IntVarP(&o.PerIter, "per_iter_timing", "I", 0, "1: time every iteration with CUDA events (-J gets per-process times and avg/min/max/p99/cv); with several ranks, also the straggler report")
	fs.IntVarP(&o.PerIterSkp, "per_iter_skip", "K", 0, "leading iterations left out of -I 1's summary")
	raw.cputime = fs.IntP("report_cputime", "C", 0, "1: the time column is the CPU time this process spent issuing each collective (nccl-tests' cputime; the bandwidths stay from the time)")
	fs.StringVar(&o.Metrics, "metrics", "", "also write the results in the Prometheus text format to FILE (rank 0; replaced atomically: node_exporter's textfile collector)")
	fs.StringVar(&o.Push, "push", "", "push the results to the Prometheus Pushgateway at URL (rank 0); a push replaces the last one of the same job, instance and run")
	fs.StringVar(&o.PushJob, "push-job", "ncclbench", "the job of the push's grouping key")
	fs.StringVar(&o.PushInstance, "push-instance", "", "the instance of the push's grouping key (default: this host's name)")
	durflag.VarP(fs, &o.PushTimeout, "push-timeout", "", publish.DefaultPushTimeout, "give up a push after this long")
	fs.IntVarP(&o.Graphs, "cudagraph", "G", 0, "capture the timed iterations into a CUDA graph and launch it this many times (0: no graph)")
	// nccl-tests flags accepted for compatibility, with their defaults only.
	for _, f := range []struct{ long, short, usage string }{
		{"parallel_init", "p", "parallel init (only 0)"},
		{"stream_null", "y", "use the NULL stream (only 0)"},
	} {
		raw.unsupported[f.long] = fs.IntP(f.long, f.short, 0, f.usage)
	}
	return raw
}

// apply parses the sizes, types and ops given into o.
func (raw *rawFlags) apply(o *runner.Options, coll bench.Collective) error {
	var err error
	if o.MinBytes, err = bench.ParseSize(raw.minS); err != nil {
		return fmt.Errorf("-b: %w", err)
	}
	if o.MaxBytes, err = bench.ParseSize(raw.maxS); err != nil {
		return fmt.Errorf("-e: %w", err)
	}
	if o.StepBytes, err = bench.ParseSize(raw.stepS); err != nil {
		return fmt.Errorf("-i: %w", err)
	}
	if _, err := bench.Sizes(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor); err != nil {
		return err
	}
	if o.Types, err = bench.ParseTypes(raw.typeS); err != nil {
		return fmt.Errorf("-d: %w", err)
	}
	if coll.HasOp {
		if o.Ops, err = bench.ParseOps(raw.opS); err != nil {
			return fmt.Errorf("-o: %w", err)
		}
	} else {
		o.Ops = []bench.Op{{Name: "none"}}
	}
	return nil
}

// fromEnv reads nccl-tests' variables: NCCL_TESTS_SPLIT(_MASK) and
// NCCL_TESTS_MIN_BW.
func fromEnv(o *runner.Options) error {
	// nccl-tests splits its processes into groups with these.
	split, err := bench.ParseSplit(os.Getenv("NCCL_TESTS_SPLIT_MASK"), os.Getenv("NCCL_TESTS_SPLIT"))
	switch {
	case err != nil:
		return err
	case split != nil && o.PerIter == 1:
		// The straggler analysis lines up the ranks of one communicator.
		return fmt.Errorf("%s with -I 1: per-iteration timing and the straggler report need one communicator; unset it or drop -I 1", split.Spec)
	}
	o.Split = split
	if v, set := os.LookupEnv("NCCL_TESTS_MIN_BW"); set {
		// nccl-tests' atof would read a typo as 0 and pass every run.
		min, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsNaN(min) || math.IsInf(min, 0) {
			return fmt.Errorf("NCCL_TESTS_MIN_BW=%q: want the minimum average bus bandwidth in GB/s, a number", v)
		}
		o.MinBusBW = &min
	}
	return nil
}
