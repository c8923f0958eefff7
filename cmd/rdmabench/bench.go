package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	summaries := map[engine.Test]string{
		engine.SendBW: "SEND/RECV bandwidth (ib_send_bw)", engine.WriteBW: "RDMA WRITE bandwidth (ib_write_bw)",
		engine.ReadBW: "RDMA READ bandwidth (ib_read_bw)", engine.SendLat: "SEND/RECV latency (ib_send_lat)",
		engine.WriteLat: "RDMA WRITE latency (ib_write_lat)", engine.ReadLat: "RDMA READ latency (ib_read_lat)",
		engine.AtomicBW: "atomic fetch-and-add / compare-and-swap rate (ib_atomic_bw)", engine.AtomicLat: "atomic latency (ib_atomic_lat)",
	}
	for _, t := range engine.Tests {
		t := t
		name := strings.ReplaceAll(string(t), "_", "-")
		register(name, summaries[t], func(args []string, stdout, stderr io.Writer) int {
			return runTest(t, args, stdout, stderr)
		})
	}
	register("serve", "serve benchmark clients one after another (the server side)", runServe)
}

// deviceFlags are the flags both sides share.
type deviceFlags struct {
	dev      *string
	port     *int
	gidIndex *int
	tcpPort  *int
}

func addDeviceFlags(fs *pflag.FlagSet) deviceFlags {
	return deviceFlags{
		dev:      fs.StringP("ib-dev", "d", "", "RDMA device (default: the first one)"),
		port:     fs.IntP("ib-port", "i", 1, "device port"),
		gidIndex: fs.IntP("gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)"),
		tcpPort:  fs.IntP("port", "p", engine.DefaultPort, "TCP port of the control connection"),
	}
}

func (d deviceFlags) config() engine.DeviceConfig {
	return engine.DeviceConfig{Device: *d.dev, Port: *d.port, GIDIndex: *d.gidIndex}
}

func (d deviceFlags) validate() error {
	if *d.port < 1 || *d.port > 255 {
		return fmt.Errorf("--ib-port %d outside 1..255", *d.port)
	}
	if *d.gidIndex < -1 || *d.gidIndex > 255 {
		return fmt.Errorf("--gid-index %d outside 0..255", *d.gidIndex)
	}
	if *d.tcpPort < 1 || *d.tcpPort > 65535 {
		return fmt.Errorf("--port %d outside 1..65535", *d.tcpPort)
	}
	return nil
}

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
	name := strings.ReplaceAll(string(test), "_", "-")
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

func runTest(test engine.Test, args []string, stdout, stderr io.Writer) int {
	name := strings.ReplaceAll(string(test), "_", "-")
	tc, err := parseTest(test, args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		tc.fs.SetOutput(stderr)
		tc.fs.Usage()
		return 0
	}
	if err == nil {
		err = tc.checkArgs()
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
		return exitcode.BadInput
	}
	cfg := engine.ClientConfig{Device: tc.dc, Plan: tc.plan}
	cfg.Device.Warnings = stderr
	if !*tc.loopback { // loopback's port lives as long as its one run: no token
		if cfg.Token, err = loadToken(*tc.tokenFile, stderr); err != nil {
			fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
			return exitcode.BadInput
		}
	}
	if code, err := tc.checkDevices(cfg.Device); err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
		return code
	}
	if !*tc.asJSON {
		table := render.Table{W: stdout, Opts: render.TextOptions{Gbits: *tc.gbits, PerQP: *tc.perQP, CPU: *tc.cpuUtil}}
		cfg.Observer = table
		if isTerminal(stdout) { // a pipe or a file gets the table alone
			cfg.Observer = &render.Progress{Inner: table, W: stdout, Total: tc.plan.Measurements() * *tc.out.repeat}
		}
	}
	var rawFile *os.File
	if *tc.raw != "" {
		f, err := os.Create(*tc.raw)
		if err != nil {
			fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
			return exitcode.BadInput
		}
		defer f.Close()
		fmt.Fprintln(f, "size,qp,iteration,latency_ns")
		rawFile, cfg.Raw = f, f
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	runs, err := tc.measureRepeats(ctx, cfg, stdout)
	run, err := finishRepeats(runs, *tc.out.repeat, err)
	if rawFile != nil {
		if cerr := rawFile.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if werr := tc.writeResults(ctx, run, stdout); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
		return runExitCode(err, len(runs) > 0)
	}
	return exitcode.OK
}

// checkArgs checks what the plan does not hold: -D against -n, the HOST
// or --loopback, and every output path, before the device is opened (a
// long run must not end by losing its results to a typo in a path).
func (tc *testCLI) checkArgs() error {
	fs := tc.fs
	switch {
	// As perftest, which refuses the two together (a --load's SPEC says
	// instead that both belong to the measurement).
	case fs.Changed("duration") && fs.Changed("iters"):
		return errors.New("-D and -n exclude each other: a size runs for a duration or for a number of iterations")
	case *tc.loopback && fs.NArg() > 0:
		return errors.New("--loopback takes no HOST")
	case !*tc.loopback && fs.NArg() != 1:
		return errors.New("give the server's HOST (or --loopback)")
	case (*tc.peerDev != "" || tc.peerCPUs != nil) && !*tc.loopback:
		return errors.New("--peer-dev and --peer-cpus need --loopback")
	case !*tc.loopback && isHostList(fs.Arg(0)):
		return fmt.Errorf("%q: the server is one host (run serve on one node and give its name; rdmabench mesh tests many)", fs.Arg(0))
	}
	var inputs []string
	if *tc.tokenFile != "" {
		inputs = append(inputs, *tc.tokenFile)
	}
	return publish.CheckOutputs([]publish.Output{{Flag: "--save", Path: *tc.out.save}, {Flag: "--metrics", Path: *tc.out.metrics},
		{Flag: "--hgrm", Path: *tc.hgrm}, {Flag: "--raw", Path: *tc.raw}}, inputs)
}

// checkDevices opens nothing: it says whether -d (and --peer-dev) name a
// device and port here, with the exit code when not.
func (tc *testCLI) checkDevices(dc engine.DeviceConfig) (int, error) {
	if code, err := checkDevice(dc, "-d"); err != nil {
		return code, err
	}
	if *tc.loopback && *tc.peerDev != "" {
		peer := dc
		peer.Device = *tc.peerDev
		return checkDevice(peer, "--peer-dev")
	}
	return exitcode.OK, nil
}

// measureRepeats runs the measurement --repeat times, each on a new
// connection; the first failure ends the repeats and keeps what they
// measured.
func (tc *testCLI) measureRepeats(ctx context.Context, cfg engine.ClientConfig, stdout io.Writer) ([]*results.Run, error) {
	measure := func() (*results.Run, error) {
		if *tc.loopback {
			cfg.Mode = "loopback"
			peer := cfg.Device
			peer.CPUs = tc.peerCPUs
			if *tc.peerDev != "" {
				peer.Device = *tc.peerDev
			}
			return engine.RunLoopback(ctx, cfg, peer)
		}
		cfg.Addr = net.JoinHostPort(tc.fs.Arg(0), strconv.Itoa(*tc.df.tcpPort))
		return engine.RunClient(ctx, cfg)
	}
	var runs []*results.Run
	for i := range *tc.out.repeat {
		if *tc.out.repeat > 1 && cfg.Observer != nil {
			fmt.Fprintf(stdout, " Repeat %d of %d\n", i+1, *tc.out.repeat)
		}
		r, err := measure()
		if r != nil {
			runs = append(runs, r)
		}
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// writeResults writes what was measured (nothing when run is nil): -J's
// document, --hgrm and --save, --metrics, --push; the first error.
func (tc *testCLI) writeResults(ctx context.Context, run *results.Run, stdout io.Writer) error {
	if run == nil {
		return nil
	}
	run.Version = toolInfo()
	var err error
	if *tc.asJSON {
		err = render.JSON(stdout, run)
	}
	if *tc.hgrm != "" {
		if herr := writeHgrms(*tc.hgrm, run); herr != nil && err == nil {
			err = herr
		}
	}
	if oerr := tc.out.write(ctx, run); oerr != nil && err == nil {
		err = oerr
	}
	return err
}

// runExitCode is a run command's status after err: Interrupted on Ctrl-C;
// NotMeasured when nothing was measured (no RDMA, the device or the port
// unusable, the server unreachable or refusing us at connect); Findings for
// a run that failed part way (a completion error, a peer that died).
func runExitCode(err error, measured bool) int {
	switch {
	case errors.Is(err, engine.ErrInterrupted):
		return exitcode.Interrupted
	case errors.Is(err, publish.ErrOutput):
		return exitcode.BadInput
	case !measured || isNoRDMA(err):
		return exitcode.NotMeasured
	}
	return exitcode.Findings
}

// isHostList: a Slurm host list (node[1-2]) or a comma-separated one given
// where one host goes. An IPv6 address in brackets ([fe80::1]) is one host.
func isHostList(host string) bool {
	if strings.Contains(host, ",") {
		return true
	}
	i := strings.Index(host, "[")
	return i > 0 && strings.Contains(host[i:], "]")
}

// finishRepeats merges the runs of a --repeat that asked for asked repeats
// and ended with err (nil when every repeat ran through), and writes into
// the document what compare needs to tell a whole run from a damaged one:
// how many repeats were asked, and the error that ended them. The engine sets the failing repeat's error in the run it returns,
// but a repeat that failed before it measured anything (the peer gone
// before the handshake) returns none, and the merged run would carry the
// last good repeat's: no error at all. err is returned joined with a
// failure to merge; run is nil when nothing was measured.
func finishRepeats(runs []*results.Run, asked int, err error) (*results.Run, error) {
	if len(runs) == 0 {
		return nil, err
	}
	run, merr := results.MergeRepeats(runs)
	if merr != nil {
		return nil, errors.Join(err, merr)
	}
	if asked > 1 {
		run.RepeatAsked = asked
	}
	if err != nil {
		run.Error = err.Error()
		run.Interrupted = run.Interrupted || errors.Is(err, engine.ErrInterrupted)
	}
	return run, err
}

// parseCPUFlag reads a CPU list flag; "" is nil (the default).
func parseCPUFlag(name, v string) ([]int, error) {
	if v == "" {
		return nil, nil
	}
	list, err := rdmasys.ParseCPUList(v)
	if err != nil || len(list) == 0 {
		return nil, fmt.Errorf("%s %q: want a CPU list such as 0-3,8", name, v)
	}
	return list, nil
}

// writeHgrms writes one .hgrm per size and series: FILE itself for one
// size, else FILE with the size before the extension (lat.hgrm →
// lat-8.hgrm); --load's loaded series adds "-loaded" (lat-loaded.hgrm),
// each --rate series its rate, corrected and not (lat-rate1000.hgrm,
// lat-rate1000-uncorrected.hgrm).
func writeHgrms(path string, run *results.Run) error {
	ext := filepath.Ext(path)
	for _, res := range run.Results {
		if res.Hist == nil {
			continue
		}
		base := strings.TrimSuffix(path, ext)
		if len(run.Results) > 1 {
			base = fmt.Sprintf("%s-%d", base, res.Size)
		}
		if err := writeHgrm(base+ext, res.Hist, run.Latency); err != nil {
			return err
		}
		if err := writeHgrm(base+"-loaded"+ext, res.LoadedHist, run.Latency); err != nil {
			return err
		}
		for _, s := range res.Rates {
			if err := writeHgrm(fmt.Sprintf("%s-rate%d%s", base, s.Rate, ext), s.Hist, run.RateLatency); err != nil {
				return err
			}
			if err := writeHgrm(fmt.Sprintf("%s-rate%d-uncorrected%s", base, s.Rate, ext), s.UncorrectedHist, run.RateLatency); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeHgrm replaces path atomically, as --save and --metrics are: a
// plotting script never reads half a histogram.
func writeHgrm(path string, h *hdrhistogram.Histogram, sample string) error {
	if h == nil {
		return nil
	}
	return publish.WriteFileAtomic(path, func(w io.Writer) error { return render.Hgrm(w, h, sample) })
}

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", stderr)
	df := addDeviceFlags(fs)
	bind := fs.String("bind", "", "address to listen on (default: all)")
	cpus := fs.String("cpus", "", "pin the server's loop threads to these CPUs in turn (default: the NIC's NUMA node)")
	maxClients := fs.Int("max-clients", 0, "exit after serving this many clients (default: serve forever)")
	maxMem := fs.String("max-mem", "", "refuse plans that register more memory than this, e.g. 4G (default: a quarter of RAM, or the memlock limit when lower)")
	maxQPs := fs.Int("max-qps", rbplan.MaxQPs, "refuse plans with more QPs")
	maxThreads := fs.Int("max-threads", engine.DefaultMaxThreads, "refuse plans that need more loop threads")
	tokenFile := fs.String("token-file", "", "serve only clients that prove they hold the token in FILE (default $"+tokenEnv+")")
	maxHandshakes := fs.Int("max-handshakes", engine.DefaultMaxHandshakes, "connections in their handshake or waiting for their turn at once; more are closed at once")
	queueTimeout := durflag.P(fs, "queue-timeout", "", engine.DefaultQueueTimeout, "how long a client waits while another client's run holds the device, then is told the server is busy")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if err := df.validate(); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.BadInput
	}
	if fs.NArg() > 0 || *maxClients < 0 {
		fmt.Fprintln(stderr, "rdmabench serve: takes no arguments, and --max-clients must be ≥ 0")
		return exitcode.BadInput
	}
	dc := df.config()
	dc.Warnings = stderr
	var err error
	if dc.CPUs, err = parseCPUFlag("--cpus", *cpus); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.BadInput
	}
	budget := engine.Budget{MaxQPs: *maxQPs, MaxThreads: *maxThreads}
	if *maxMem != "" {
		if budget.MaxMem, err = rbplan.ParseBytes(*maxMem); err != nil {
			fmt.Fprintf(stderr, "rdmabench serve: --max-mem: %v\n", err)
			return exitcode.BadInput
		}
	}
	if *maxQPs < 1 || *maxThreads < 1 || *maxHandshakes < 1 {
		fmt.Fprintln(stderr, "rdmabench serve: --max-qps, --max-threads and --max-handshakes must be at least 1")
		return exitcode.BadInput
	}
	if *queueTimeout <= 0 || *queueTimeout > rbplan.MaxDuration {
		fmt.Fprintf(stderr, "rdmabench serve: --queue-timeout %v outside (0, %v]\n", *queueTimeout, rbplan.MaxDuration)
		return exitcode.BadInput
	}
	token, err := loadToken(*tokenFile, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.BadInput
	}
	// perftest fails at start without its device: so do we, rather than
	// listen forever and tell only the first client.
	if code, err := checkDevice(dc, "-d"); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return code
	}
	addr := net.JoinHostPort(*bind, strconv.Itoa(*df.tcpPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.NotMeasured
	}
	fmt.Fprintf(stdout, "rdmabench serve: listening on %s\n", ln.Addr())
	if token == nil {
		fmt.Fprintf(stderr, "rdmabench serve: no token (--token-file or %s): anyone who can reach %s can run plans on this server\n", tokenEnv, ln.Addr())
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	scfg := engine.ServerConfig{Device: dc, Log: stdout, MaxClients: *maxClients, Budget: budget,
		Token: token, MaxHandshakes: *maxHandshakes, QueueTimeout: *queueTimeout}
	if err := engine.Serve(ctx, ln, scfg); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return 1
	}
	if ctx.Err() != nil { // Serve stopped the client's loops and freed everything
		fmt.Fprintln(stderr, "rdmabench serve: interrupted")
		return 130
	}
	return 0
}

// loadFlags are the flags a --load SPEC may give: what shapes its traffic.
// The rest (device, peer, outputs, -n, -D) belong to the measurement.
var loadFlags = map[string]bool{
	"size": true, "tx-depth": true, "rx-depth": true, "inline-size": true, "mtu": true, "sl": true,
	"tclass": true, "qp-timeout": true, "cq-mod": true, "qp": true, "threads": true, "connection": true,
	"imm": true, "post-list": true, "atomic-type": true,
}

// parseLoadSpec reads one --load SPEC, "TEST FLAGS...", with the command
// line's own flag parser.
func parseLoadSpec(spec string) (engine.Plan, error) {
	f := strings.Fields(spec)
	if len(f) == 0 {
		return engine.Plan{}, errors.New(`--load "": want a bandwidth test and its flags, e.g. "write-bw -q 4 -s 1M"`)
	}
	test := engine.Test(strings.ReplaceAll(f[0], "-", "_"))
	if !test.Valid() || test.IsLatency() {
		return engine.Plan{}, fmt.Errorf("--load %q: %q is not a bandwidth test (send-bw, write-bw, read-bw, atomic-bw)", spec, f[0])
	}
	for _, a := range f[1:] {
		if a == "--load" || strings.HasPrefix(a, "--load=") {
			return engine.Plan{}, fmt.Errorf("--load %q: a load has no loads of its own", spec)
		}
	}
	// The SPEC's parse prints nothing (not even --help's usage): its
	// error comes back as the one line.
	cli, err := parseTest(test, f[1:], io.Discard)
	if errors.Is(err, pflag.ErrHelp) {
		return engine.Plan{}, fmt.Errorf("--load %q: see %s --help for its flags", spec, f[0])
	}
	if err != nil {
		return engine.Plan{}, fmt.Errorf("--load %q: %w", spec, err)
	}
	if cli.fs.NArg() > 0 {
		return engine.Plan{}, fmt.Errorf("--load %q: takes no HOST (the load goes to the measurement's peer)", spec)
	}
	var bad []string
	cli.fs.Visit(func(fl *pflag.Flag) {
		if !loadFlags[fl.Name] {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		verb := "belongs"
		if len(bad) > 1 {
			verb = "belong"
		}
		return engine.Plan{}, fmt.Errorf("--load %q: %s %s to the measurement, not to a load (a load takes -s -q -t -r -I -m -S -T -u -Q -c -l -A --threads --imm)", spec, strings.Join(bad, " "), verb)
	}
	return cli.plan, nil
}
