package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/durflag"
	rbplan "github.com/rdmabench/rdmabench/plan"
)

// testCLI is a test's command line once parsed: the plan, and the flags
// that say how to run and report it.
type testCLI struct {
	fs                                      *pflag.FlagSet
	df                                      deviceFlags
	plan                                    engine.Plan
	dc                                      engine.DeviceConfig
	peerCPUs                                []int
	asJSON, gbits, loopback, perQP, cpuUtil *bool
	peerDev, hgrm, raw, tokenFile           *string
	cpus, peerCPUList                       *string
	loads                                   *[]string
	out                                     outputFlags
}

// parseTest parses a test's flags and builds its plan: for the command line
// and for each --load SPEC alike, so that a SPEC reads as a command would.
// On pflag.ErrHelp the flag set is there to print the usage.
func parseTest(test engine.Test, args []string, stderr io.Writer) (*testCLI, error) {
	name := test.Command()
	fs := newFlagSet(name, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rdmabench %s [flags] HOST | --loopback\n", name)
		fs.PrintDefaults()
	}
	cli := &testCLI{fs: fs}
	cli.df = addDeviceFlags(fs)
	req := addPlanFlags(fs, test)
	mem := addMemoryFlags(fs)
	cli.addRunFlags(fs)
	fs.SetOutput(io.Discard) // pflag would print usage on every error; the caller prints one line
	usage := fs.Usage
	fs.Usage = func() {} // pflag calls it on --help too; the caller calls it once
	perr := fs.Parse(args)
	fs.Usage = usage
	if perr != nil {
		if errors.Is(perr, pflag.ErrHelp) {
			return cli, perr
		}
		return cli, fmt.Errorf("%v (see --help)", perr)
	}
	if err := cli.df.validate(); err != nil {
		return cli, err
	}
	if err := cli.out.validate(); err != nil {
		return cli, err
	}
	req.Given, req.Repeat, req.LatencyFiles = fs.Changed, *cli.out.repeat, *cli.hgrm != "" || *cli.raw != ""
	cli.dc = cli.df.config()
	var err error
	if cli.dc.CPUs, err = parseCPUFlag("--cpus", *cli.cpus); err != nil {
		return cli, err
	}
	if cli.peerCPUs, err = parseCPUFlag("--peer-cpus", *cli.peerCPUList); err != nil {
		return cli, err
	}
	if req.Memory, req.PeerMemory, err = mem.specs(fs); err != nil {
		return cli, err
	}
	for _, spec := range *cli.loads {
		l, err := parseLoadSpec(spec)
		if err != nil {
			return cli, err
		}
		req.Loads = append(req.Loads, l)
	}
	cli.plan, err = req.Build()
	return cli, err
}

// addPlanFlags binds the flags that shape the plan to a request of test.
func addPlanFlags(fs *pflag.FlagSet, test engine.Test) *rbplan.Request {
	def := rbplan.DefaultPlan(test)
	r := &rbplan.Request{Test: test}
	fs.StringVarP(&r.Size, "size", "s", strconv.Itoa(def.Sizes[0]), "message size, with an optional K or M suffix")
	fs.BoolVarP(&r.All, "all", "a", false, "run sizes 2 B to 8 MiB, powers of two")
	fs.Uint64VarP(&r.Iterations, "iters", "n", def.Iterations, "iterations per size")
	durflag.VarP(fs, &r.Duration, "duration", "D", 0, "run each size this long instead of -n (warm-up and cool-down excluded)")
	fs.IntVarP(&r.TxDepth, "tx-depth", "t", def.TxDepth, "send queue depth")
	fs.IntVarP(&r.RxDepth, "rx-depth", "r", def.RxDepth, "receive queue depth (send tests)")
	fs.IntVarP(&r.Inline, "inline-size", "I", -1, "send messages up to this size inline (default as perftest: 0 for bandwidth, send-lat 236 (UD 188), write-lat 220; capped by the device)")
	fs.IntVarP(&r.MTU, "mtu", "m", 0, "path MTU: 256..4096 (default: the smaller active MTU)")
	fs.IntVarP(&r.SL, "sl", "S", 0, "service level")
	fs.IntVarP(&r.TC, "tclass", "T", 0, "traffic class")
	fs.IntVarP(&r.QPTimeout, "qp-timeout", "u", 14, "local ACK timeout of RC QPs: 4.096 µs × 2^N, 1..31 (raise it on slow or emulated links where an ACK can take longer than 67 ms)")
	fs.IntVarP(&r.CQMod, "cq-mod", "Q", def.CQMod, "signal one completion every N requests")
	fs.Uint64Var(&r.Warmup, "warmup", def.Warmup, "unmeasured iterations before each size (default: a tenth of -n, at most 500 for bandwidth and 100 for latency; 0 keeps every sample)")
	durflag.VarP(fs, &r.Timeout, "timeout", "", def.Timeout, "deadline of each step (connect, each size)")
	fs.IntVarP(&r.QP, "qp", "q", 1, "QPs (bandwidth: all at once; latency: one ping-pong per QP, each on its own thread)")
	fs.StringVar(&r.QPList, "qps", "", "sweep these QP counts, e.g. 1,2,4,8,16 (bandwidth tests)")
	fs.IntVar(&r.Threads, "threads", 1, "client threads, each with its QPs, CQ and loop (the server uses as many)")
	fs.BoolVar(&r.ShareCPU, "share-cpus", false, "allow more busy-polling loop threads than pinned CPUs (they then share CPUs)")
	fs.BoolVar(&r.SharedCQ, "shared-cq", false, "one CQ shared by all threads instead of one per thread")
	fs.BoolVarP(&r.Bidirectional, "bidirectional", "b", false, "both directions at once; figures are the sum, each direction shown")
	durflag.VarP(fs, &r.Interval, "interval", "", 0, "print a bandwidth line every this long, like iperf3")
	fs.StringVarP(&r.Transport, "connection", "c", "RC", "transport: RC, UC (send, write) or UD (send)")
	fs.BoolVar(&r.Imm, "imm", false, "WRITE_WITH_IMM / SEND_WITH_IMM instead of WRITE / SEND")
	fs.StringVarP(&r.Atomic, "atomic-type", "A", string(engine.FetchAndAdd), "atomic tests: FETCH_AND_ADD or CMP_AND_SWAP")
	fs.IntVarP(&r.PostList, "post-list", "l", 1, "requests per ibv_post_send call (message rate at small sizes)")
	fs.BoolVar(&r.Verify, "verify", false, "check every byte against a per-message pattern on the receiving side; exit 1 on any bad byte")
	fs.StringVar(&r.Rates, "rate", "", "latency tests: after the idle ping-pong, send -n requests open-loop at each of these rates (requests per second per QP, e.g. 1000,10000,100000), up to -t in flight (default 32), timed from each request's due time (coordinated omission corrected)")
	return r
}

// addRunFlags binds the flags that say how to run and report the test.
func (cli *testCLI) addRunFlags(fs *pflag.FlagSet) {
	cli.gbits = fs.Bool("report-gbits", false, "report bandwidth in Gb/s instead of MiB/s")
	cli.asJSON = fs.Bool("json", false, "write one JSON document for the whole run to stdout")
	cli.loopback = fs.Bool("loopback", false, "run both sides in this process on one device (or -d A --peer-dev B)")
	cli.peerDev = fs.String("peer-dev", "", "with --loopback: the device of the other side")
	cli.hgrm = fs.String("hgrm", "", "write the latency percentile distribution (HdrHistogram .hgrm) to FILE")
	cli.raw = fs.String("raw", "", "write every latency sample (size,qp,iteration,ns) to FILE")
	cli.cpus = fs.String("cpus", "", "pin threads to these CPUs in turn, e.g. 0-3,8 (default: the NIC's NUMA node; --loopback splits the list between the sides)")
	cli.peerCPUList = fs.String("peer-cpus", "", "with --loopback: pin the other side's threads to these CPUs")
	cli.perQP = fs.Bool("per-qp", false, "print each QP's bandwidth under each row")
	cli.cpuUtil = fs.Bool("cpu-util", false, "print both sides' CPU use under each row (JSON always has it)")
	cli.loads = fs.StringArray("load", nil, "latency tests: run this bandwidth test (a SPEC such as \"write-bw -q 4 -s 1M\": a test and its flags) on QPs of its own to the same peer during a second, loaded ping-pong; repeatable")
	cli.tokenFile = fs.String("token-file", "", "prove to the server that we hold the token in FILE (default $"+tokenEnv+"); needed when serve has one")
	cli.out = addOutputFlags(fs)
}
