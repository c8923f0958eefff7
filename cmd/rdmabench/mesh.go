package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/inventory"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/mesh"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

func init() {
	register("mesh", "all pairs of nodes: bandwidth and latency matrices, outliers traced to a node or a link (under srun, mpirun, torchrun)", runMesh)
}

// meshProto names the mesh's rendezvous: ncclbench's processes (or another
// version of the mesh) on the port are refused, not joined.
const meshProto = "rdmabench-mesh/3" // 2: tasks and outcomes numbered (Seq); 3: a task's part

// meshSetup is a direction's fixed overhead in the estimate by default
// (--setup-estimate): connection, handshake, QP and memory set-up, twice
// (write-bw, send-lat). 2 s is what a direction costs beyond its
// measurement on the rxe target (emulated CPUs); an HCA's verbs set-up
// takes milliseconds, and the live progress lines correct the estimate
// from the rounds' real pace.
const meshSetup = 2 * time.Second

// meshNoticeAfter is when a rank still waiting at the rendezvous says
// what for (once; it goes on waiting).
const meshNoticeAfter = 5 * time.Second

// screenLatMin is the fewest send-lat ping-pongs of a screening pass: a
// p50 of fewer says little.
const screenLatMin = 100

// screenControls is how many healthy directions a screened mesh retests
// beside its outliers, to judge the retests (alone, full length) against
// directions measured the same way.
const screenControls = 8

// meshOptions are the flags of rdmabench mesh.
type meshOptions struct {
	dev        string
	ibPort     int
	gidIndex   int
	serverPort int
	bwSize     int
	latSize    int
	bwDuration time.Duration
	latIters   uint64
	screen     time.Duration // --screen: the rounds' write-bw duration, both directions at once (0: off)
	setupEst   time.Duration // --setup-estimate: a direction's fixed cost in the estimates
	timeout    time.Duration
	rules      mesh.Rules
	maxRetests int
	perHost    int // --per-host: pairs of one host at once (0: no bound)
	pairsFile  string
	rendezvous string
	rdzvPort   int
	rdvTimeout time.Duration
	tokenFile  string
	asJSON     bool
	save       string
	metrics    string
	analyze    string // --analyze FILE: judge a saved mesh again
	planRanks  int    // --plan N: the schedule of N ranks, measured by nobody
}

// key is what every rank must agree on; rank 0 refuses a rank whose
// arguments differ (a mesh of mixed sizes measures nothing comparable).
func (o *meshOptions) key() string {
	return fmt.Sprintf("mesh -s %d --lat-size %d -D %v --lat-iters %d --timeout %v --screen %v", o.bwSize, o.latSize, o.bwDuration, o.latIters, o.timeout, o.screen)
}

// screening reports whether a task is the screening pass's: a round's
// direction under --screen. Retests (round 0) measure at full length.
func (o *meshOptions) screening(t mesh.Task) bool { return o.screen > 0 && t.Round != 0 }

// controls is the healthy directions retested beside the outliers.
func (o *meshOptions) controls() int {
	if o.screen > 0 {
		return screenControls
	}
	return 0
}

// screenLatIters is the send-lat ping-pongs of a screening pass: a tenth
// of --lat-iters, at least screenLatMin (and at most --lat-iters).
func (o *meshOptions) screenLatIters() uint64 {
	return min(o.latIters, max(o.latIters/10, screenLatMin))
}

// meshQueue is how long a rank's server keeps a client waiting while
// another client's run holds its device. In a mesh a server has one client
// at a time; another is a stale run (its client or rank 0 gave up), which
// the loss of a rank now cancels: a short wait, then a failed direction,
// not a healthy client held until rank 0 gives up on it.
func meshQueue() time.Duration { return 2 * proto.HandshakeTimeout }

// testBound is the longest engine.RunClient of one test may take, wait by
// wait as the engine bounds them: the dial, the greeting and token and the
// plan (a handshake each), the accept (the plan's set-up, the larger of a
// handshake and --timeout), when queued the server's wait and the set-up
// again, run and ready (a handshake each), the warm-up and the measured
// loops (a step each), the server's verdict (a step and a handshake), done
// and bye (a handshake each).
func (o *meshOptions) testBound(t engine.Test) time.Duration {
	p := o.plan(t, false)
	hs, step := proto.HandshakeTimeout, engine.StepTime(p)
	setup := max(hs, p.Timeout)
	return 8*hs + 2*setup + meshQueue() + 3*step
}

// directionBound is the longest one direction may take before its client
// rank is given up: both tests at their engine's worst case, and the task
// and its outcome (a handshake each). A stuck server makes the client's
// engine fail first, so the failure is the direction's, not the client's.
func (o *meshOptions) directionBound() time.Duration {
	return o.testBound(engine.WriteBW) + o.testBound(engine.SendLat) + 2*proto.HandshakeTimeout
}

// meshSignalBytes is about how many bytes a signalled completion covers in
// the mesh's write-bw. 256 KiB: a path of a few MB/s (a degraded link; four
// busy-polling ranks on two emulated CPUs) still signals several times a
// second, so a 1 s window is not empty; the cost on a fast path is nil.
const meshSignalBytes = 256 << 10

// meshPingPong is a ping-pong's round trip in the estimate: a few
// microseconds on an HCA, rounded up for the warm-up and the polling.
const meshPingPong = 20 * time.Microsecond

// estimate is what a direction should take at full length.
func (o *meshOptions) estimate() time.Duration {
	return o.bwDuration + time.Duration(o.latIters)*meshPingPong + o.setupEst
}

// screenEstimate is what a screening direction should take (both of a
// pair at once take the same).
func (o *meshOptions) screenEstimate() time.Duration {
	return o.screen + time.Duration(o.screenLatIters())*meshPingPong + o.setupEst
}

func parseMeshFlags(args []string, stderr io.Writer) (*meshOptions, int, bool) {
	fs := newFlagSet("mesh", stderr)
	o := &meshOptions{}
	fs.StringVarP(&o.dev, "ib-dev", "d", "", "RDMA device (default: the first one); a list mlx5_0,mlx5_1,... gives each rank on a node the one at its local rank (a rank per NIC)")
	fs.IntVarP(&o.ibPort, "ib-port", "i", 1, "device port")
	fs.IntVarP(&o.gidIndex, "gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)")
	fs.IntVarP(&o.serverPort, "port", "p", 0, "TCP port of this rank's server for the others' measurements (default: any free port)")
	size := fs.StringP("size", "s", "1M", "write-bw message size")
	latSize := fs.String("lat-size", "8", "send-lat message size")
	durflag.VarP(fs, &o.bwDuration, "duration", "D", 2*time.Second, "write-bw per direction for this long")
	fs.Uint64Var(&o.latIters, "lat-iters", 1000, "send-lat ping-pongs per direction (a tenth more, at most 100, as warm-up)")
	durflag.VarP(fs, &o.screen, "screen", "", 0, "screen first: every pair's two directions at once, write-bw for this long and a tenth of --lat-iters (at least 100), then the outliers retested alone at -D and --lat-iters (for large meshes; see --plan)")
	durflag.VarP(fs, &o.setupEst, "setup-estimate", "", meshSetup, "a direction's fixed cost beyond its measurement, for the estimates (--plan): 2 s on the emulated rxe target, far less on an HCA")
	durflag.VarP(fs, &o.timeout, "timeout", "", 20*time.Second, "deadline of each measurement step beyond its duration")
	fs.Float64Var(&o.rules.BWFraction, "bw-fraction", mesh.DefaultRules.BWFraction, "a direction below this fraction of its reference bandwidth (the better of its two ranks' other pairs) is an outlier, if also beyond --sigmas")
	fs.Float64Var(&o.rules.LatMultiple, "lat-multiple", mesh.DefaultRules.LatMultiple, "a direction above this multiple of its reference latency is an outlier, if also beyond --sigmas")
	fs.Float64Var(&o.rules.Sigmas, "sigmas", mesh.DefaultRules.Sigmas, "an outlier is also beyond this many spreads of one measurement (the fabric's noise, from the two directions of each pair)")
	fs.Float64Var(&o.rules.ExpectBW, "expect-bw", 0, "the fabric's expected write-bw per direction in Gb/s: the reference of every direction between hosts (default: its ranks' other pairs of its class)")
	fs.IntVar(&o.maxRetests, "max-retests", 64, "outliers measured again alone, at most")
	fs.IntVar(&o.perHost, "per-host", 0, "at most this many pairs of one host at once (0: no bound), so that ranks of one host (a rank per NIC) do not measure their CPU, memory and PCIe sharing; ranks on one NIC never run two pairs at once")
	fs.StringVar(&o.pairsFile, "pairs", "", "measure only these pairs: a file of rank pairs, one a line (\"3 7\")")
	fs.StringVar(&o.rendezvous, "rendezvous", "", "host:port of rank 0 (default MASTER_ADDR:MASTER_PORT, else derived from Slurm's or Open MPI's variables)")
	fs.IntVar(&o.rdzvPort, "rdzv-port", 0, "rendezvous port on MASTER_ADDR or the derived host (default MASTER_PORT, MASTER_PORT+1 under torchrun, or derived from the job id)")
	durflag.VarP(fs, &o.rdvTimeout, "rendezvous-timeout", "", 120*time.Second, "how long to wait for every rank to join")
	fs.StringVar(&o.tokenFile, "token-file", "", "job token every rank must hold, for the rendezvous and the measurements (default $"+tokenEnv+")")
	fs.BoolVar(&o.asJSON, "json", false, "print the mesh document (JSON) instead of the report")
	fs.StringVar(&o.save, "save", "", "also write the mesh document to FILE (for plot)")
	fs.StringVar(&o.analyze, "analyze", "", "judge a saved mesh (--save FILE) again with this command's --bw-fraction, --lat-multiple, --sigmas and --expect-bw, without measuring")
	fs.IntVar(&o.planRanks, "plan", 0, "print the rounds and the expected time of a mesh of N ranks (of the --pairs given), without measuring")
	fs.StringVar(&o.metrics, "metrics", "", "write the mesh in the Prometheus text format to FILE, replaced atomically (rank 0; node_exporter's textfile collector)")
	if code, done := parseFlags(fs, args, stderr); done {
		return nil, code, true
	}
	bad := func(format string, a ...any) (*meshOptions, int, bool) {
		return nil, usageErr(stderr, "mesh", format, a...), true
	}
	if fs.NArg() > 0 {
		return bad("takes no arguments (got %q): start one per node with srun, mpirun or torchrun", fs.Arg(0))
	}
	var err error
	if o.bwSize, err = rbplan.ParseSize(*size); err != nil {
		return bad("-s: %v", err)
	}
	if o.latSize, err = rbplan.ParseSize(*latSize); err != nil {
		return bad("--lat-size: %v", err)
	}
	if err := o.durations(); err != nil {
		return bad("%v", err)
	}
	switch {
	case o.ibPort < 1 || o.ibPort > 255:
		return bad("--ib-port %d outside 1..255", o.ibPort)
	case o.gidIndex < -1 || o.gidIndex > 255:
		return bad("--gid-index %d outside 0..255", o.gidIndex)
	case o.serverPort < 0 || o.serverPort > 65535:
		return bad("--port %d outside 0..65535", o.serverPort)
	case !(o.rules.BWFraction > 0 && o.rules.BWFraction <= 1):
		return bad("--bw-fraction %g outside (0, 1]", o.rules.BWFraction)
	case !(o.rules.LatMultiple >= 1 && o.rules.LatMultiple <= 1000):
		return bad("--lat-multiple %g outside 1..1000", o.rules.LatMultiple)
	case !(o.rules.Sigmas >= 1 && o.rules.Sigmas <= 100):
		return bad("--sigmas %g outside 1..100", o.rules.Sigmas)
	case !(o.rules.ExpectBW >= 0 && o.rules.ExpectBW <= 1e6):
		return bad("--expect-bw %g outside 0..1000000 Gb/s", o.rules.ExpectBW)
	case o.maxRetests < 0 || o.maxRetests > 1<<20:
		return bad("--max-retests %d outside 0..%d", o.maxRetests, 1<<20)
	case o.perHost < 0 || o.perHost > 1<<16:
		return bad("--per-host %d outside 0..%d", o.perHost, 1<<16)
	case o.planRanks != 0 && (o.planRanks < 2 || o.planRanks > 1<<16):
		return bad("--plan %d outside 2..%d ranks", o.planRanks, 1<<16)
	case o.planRanks != 0 && o.analyze != "":
		return bad("--plan and --analyze: one at a time")
	case o.planRanks != 0 && (o.save != "" || o.metrics != ""):
		return bad("--plan measures nothing: --save and --metrics go with a mesh or --analyze")
	case o.screen != 0 && (o.screen < 100*time.Millisecond || o.screen >= o.bwDuration):
		return bad("--screen %s outside 0.1 s..-D (%s): the screening pass is the shorter one", durflag.Seconds(o.screen), durflag.Seconds(o.bwDuration))
	case o.setupEst < 0 || o.setupEst > time.Hour:
		return bad("--setup-estimate %s outside 0..3600 seconds", durflag.Seconds(o.setupEst))
	}
	if err := checkRendezvousFlag(o.rendezvous); err != nil {
		return bad("%v", err)
	}
	// The plans are checked here, on every rank, so that a bad size is one
	// line at start and not a failure in every direction.
	for _, p := range []engine.Plan{o.plan(engine.WriteBW, false), o.plan(engine.SendLat, false), o.plan(engine.WriteBW, true), o.plan(engine.SendLat, true)} {
		if err := p.Validate(); err != nil {
			return bad("%s: %v", p.Test, err)
		}
	}
	return o, 0, false
}

// checkRendezvousFlag is --rendezvous as a host and a port, checked on
// every rank at start: "127.0.0.1" without its port is one line, not a
// rank that waits for nobody.
func checkRendezvousFlag(v string) error {
	if v == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("--rendezvous %q: want host:port (rank 0's address and a port, the same on every rank)", v)
	}
	n, err := strconv.Atoi(port)
	switch {
	case host == "":
		return fmt.Errorf("--rendezvous %q: no host: want host:port (rank 0's address)", v)
	case err != nil || n < 1 || n > 65535:
		return fmt.Errorf("--rendezvous %q: port %q is not 1..65535", v, port)
	}
	return nil
}

// outputs are the files mesh writes (rank 0), checked on every rank before
// the rendezvous against its inputs.
func (o *meshOptions) checkOutputs() error {
	return publish.CheckOutputs([]publish.Output{{Flag: "--save", Path: o.save}, {Flag: "--metrics", Path: o.metrics}},
		[]string{o.analyze, o.pairsFile, o.tokenFile})
}

func (o *meshOptions) durations() error {
	for _, d := range []struct {
		name string
		v    time.Duration
		min  time.Duration
	}{{"--duration", o.bwDuration, 100 * time.Millisecond}, {"--rendezvous-timeout", o.rdvTimeout, time.Second}} {
		if d.v < d.min || d.v > rbplan.MaxDuration {
			return fmt.Errorf("%s %s outside %s..%s seconds", d.name, durflag.Seconds(d.v), durflag.Seconds(d.min), durflag.Seconds(rbplan.MaxDuration))
		}
	}
	if o.timeout <= 0 || o.timeout > rbplan.MaxDuration {
		return fmt.Errorf("--timeout %v outside (0, %v]", o.timeout, rbplan.MaxDuration)
	}
	return nil
}

// plan is one direction's plan of a test: one size for a duration; the
// screening pass's shorter one when screen.
func (o *meshOptions) plan(t engine.Test, screen bool) engine.Plan {
	p := rbplan.DefaultPlan(t)
	p.Timeout = o.timeout
	iters, dur := o.latIters, o.bwDuration
	if screen {
		iters, dur = o.screenLatIters(), o.screen
	}
	if t.IsLatency() {
		// Iteration mode: a duration-mode ping-pong keeps only chunks of
		// round trips inside its margins, and a slow path has none there.
		p.Sizes, p.Iterations = []int{o.latSize}, iters
		p.Warmup = min(iters/10, p.Warmup)
	} else {
		p.Sizes, p.Duration = []int{o.bwSize}, dur
		// Duration mode counts signalled completions inside the window: one
		// every 100 MiB messages is none at all on a slow path (a bad link,
		// emulation); see meshSignalBytes.
		p.CapSignalBytes(meshSignalBytes)
	}
	return p
}

// meshRank is one process of the mesh.
type meshRank struct {
	o      *meshOptions
	env    launch.Env
	dc     engine.DeviceConfig
	token  []byte
	stderr io.Writer
}

func (mr *meshRank) prefix() string { return fmt.Sprintf("rdmabench mesh: rank %d: ", mr.env.Rank) }

// measure runs one direction as the client: write-bw, then send-lat, or
// the one the task's part names.
func (mr *meshRank) measure(ctx context.Context, t mesh.Task) mesh.Outcome {
	var out mesh.Outcome
	for _, test := range []engine.Test{engine.WriteBW, engine.SendLat} {
		part := mesh.BWPart
		if test.IsLatency() {
			part = mesh.LatPart
		}
		if !t.Part.Runs(part) {
			continue
		}
		run, err := engine.RunClient(ctx, engine.ClientConfig{Addr: t.Addr, Device: mr.dc, Plan: mr.o.plan(test, mr.o.screening(t)), Token: mr.token, Mode: "client"})
		if err == nil && (run == nil || len(run.Results) != 1) {
			err = errors.New("no result")
		}
		if err != nil {
			out.Error = fmt.Sprintf("%s to rank %d: %v", test, t.Server, err)
			return out
		}
		res := run.Results[0]
		switch {
		case test.IsLatency() && (res.Lat == nil || res.Lat.P50 <= 0):
			out.Error = fmt.Sprintf("%s to rank %d: no latency figures", test, t.Server)
			return out
		case test.IsLatency():
			out.LatP50us, out.LatP99us = res.Lat.P50, res.Lat.P99
		case res.BWAvgGbps <= 0:
			out.Error = fmt.Sprintf("%s to rank %d: nothing completed in the measured interval (a longer -D)", test, t.Server)
			return out
		default:
			out.BWGbps = res.BWAvgGbps
		}
	}
	return out
}

// portFacts is this rank's port as the inventory reads it.
func (mr *meshRank) portFacts() (results.MeshRank, error) {
	dev := mr.dc.Device
	if dev == "" {
		var err error
		if dev, err = verbs.DefaultDevice(); errors.Is(err, verbs.ErrNoDevices) {
			return results.MeshRank{}, errors.New("no RDMA device on this host")
		} else if err != nil {
			return results.MeshRank{}, fmt.Errorf("no RDMA device on this host (%w)", err)
		}
	}
	devs, err := inventory.Collect([]string{dev})
	if err != nil {
		return results.MeshRank{}, err
	}
	for _, p := range devs[0].Ports {
		if p.Number != mr.o.ibPort {
			continue
		}
		gid := p.NCCLGIDIndex
		if mr.o.gidIndex >= 0 {
			gid = mr.o.gidIndex
		}
		rk := results.NewMeshRank(p.Port, devs[0].FWVer, gid)
		rk.Placement("/sys")
		return rk, nil
	}
	return results.MeshRank{}, fmt.Errorf("%s has no port %d", dev, mr.o.ibPort)
}

func runMesh(args []string, stdout, stderr io.Writer) int {
	o, code, done := parseMeshFlags(args, stderr)
	if done {
		return code
	}
	if err := o.checkOutputs(); err != nil {
		return usageErr(stderr, "mesh", "%v", err)
	}
	switch {
	case o.analyze != "":
		return analyzeMesh(o, stdout, stderr)
	case o.planRanks != 0:
		return planMesh(o, stdout, stderr)
	}
	mr := &meshRank{o: o, stderr: stderr}
	usage := func(format string, a ...any) int { return usageErr(stderr, "mesh", format, a...) }
	var err error
	if mr.env, err = launch.Detect(os.Getenv); err != nil {
		return usage("%v", err)
	}
	if mr.env.Size < 2 {
		return usage("%d rank: start one process per node (or per NIC) with srun, mpirun or torchrun; see rdmabench mesh --help", mr.env.Size)
	}
	rdv, err := launch.FindRendezvous(o.rendezvous, o.rdzvPort, mr.env, os.Getenv)
	if err != nil {
		return usage("%v", err)
	}
	if mr.token, err = loadToken(o.tokenFile, stderr); err != nil {
		return usage("%v", err)
	}
	var pairs []mesh.Pair
	if o.pairsFile != "" && mr.env.Rank == 0 {
		if pairs, err = readPairs(o.pairsFile, mr.env.Size); err != nil {
			// The others learn it from rank 0 once they joined.
			fmt.Fprintf(stderr, "rdmabench mesh: --pairs %s: %v\n", o.pairsFile, err)
			code = exitcode.BadInput
		}
	}
	dev, err := localDevice(o.dev, mr.env)
	if err != nil {
		return usage("%v", err)
	}
	mr.dc = engine.DeviceConfig{Device: dev, Port: o.ibPort, GIDIndex: o.gidIndex, Warnings: prefixed(stderr, mr.prefix())}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return mr.run(ctx, rdv, pairs, code, stdout)
}

// run is a rank from its rendezvous on: ctx ending (Ctrl-C, SIGTERM) ends
// every wait within a second, rank 0 reports what was measured, and the
// rank exits 130.
func (mr *meshRank) run(ctx context.Context, rdv launch.Rendezvous, pairs []mesh.Pair, code int, stdout io.Writer) int {
	o, stderr, addr := mr.o, mr.stderr, rdv.Addr
	var err error

	// This rank's server, for the others' measurements towards it.
	var info mesh.Info
	ln, lerr := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(o.serverPort)))
	if lerr != nil {
		info.Error = fmt.Sprintf("cannot listen for the others' measurements: %v", lerr)
	} else {
		defer ln.Close()
		info.ServerPort = ln.Addr().(*net.TCPAddr).Port
	}
	host := launch.ShortHostname()
	g, err := launch.JoinContext(ctx, launch.Config{
		Addr: addr, Rank: mr.env.Rank, Size: mr.env.Size, Timeout: o.rdvTimeout,
		Hello:    launch.Hello{Host: host, Pid: os.Getpid(), Key: o.key()},
		Token:    mr.token,
		PortHint: rdv.Hint, Proto: meshProto, TokenHint: "--token-file or " + tokenEnv, KeepGoing: true,
		Waiting:     func(line string) { fmt.Fprintf(stderr, "%s%s\n", mr.prefix(), line) },
		NoticeAfter: meshNoticeAfter,
	})
	if err != nil {
		fmt.Fprintf(stderr, "%s%v\n", mr.prefix(), err)
		var mm *launch.MismatchError
		switch {
		case errors.As(err, &mm):
			return exitcode.BadInput
		case ctx.Err() != nil:
			return exitcode.Interrupted
		}
		return exitcode.NotMeasured
	}
	// The port's facts after the join: the rank is at the rendezvous as
	// soon as it listens, so Ctrl-C there always finds it waiting, and the
	// inventory (slow on an emulated device) overlaps the others' joins.
	if info.Error == "" {
		if info.Rank, err = mr.portFacts(); err != nil {
			info.Error = err.Error()
		}
	}
	info.Rank.Host = host
	var serveWG sync.WaitGroup
	serveCtx, stopServe := context.WithCancel(ctx)
	if info.Error == "" {
		serveWG.Add(1)
		go func() {
			defer serveWG.Done()
			engine.Serve(serveCtx, ln, engine.ServerConfig{Device: mr.dc, Token: mr.token, QueueTimeout: meshQueue()})
		}()
	}
	defer func() {
		stopServe()
		serveWG.Wait()
	}()
	if mr.env.Rank != 0 {
		return mr.work(ctx, g, info)
	}
	if code != 0 {
		mesh.GatherInfo(ctx, g, mr.env.Size, time.Now().Add(o.rdvTimeout))
		mesh.Start(g, mr.env.Size, 0, "--pairs "+o.pairsFile+" is not a list of this mesh's pairs (see rank 0's message)")
		g.Close()
		return code
	}
	return mr.coordinate(ctx, g, info, rdv, pairs, stdout)
}

// work is every rank but 0: measure what rank 0 asks until it says done.
func (mr *meshRank) work(ctx context.Context, g *launch.Group, info mesh.Info) int {
	err := mesh.Work(ctx, g, info, mr.o.rdvTimeout+30*time.Second, mr.measure)
	if err == nil && ctx.Err() == nil {
		err = g.Close()
	}
	switch {
	case ctx.Err() != nil:
		// Rank 0 learns it from the closed connection; this rank's
		// measurements are rank 0's to report.
		fmt.Fprintf(mr.stderr, "%sinterrupted (rank 0 reports what was measured)\n", mr.prefix())
		return exitcode.Interrupted
	case err != nil:
		fmt.Fprintf(mr.stderr, "%s%v\n", mr.prefix(), err)
		return exitcode.NotMeasured
	}
	return exitcode.OK
}

// coordinate is rank 0: mesh.Session gathers the ranks and runs the
// rounds; this says what runs and reports.
func (mr *meshRank) coordinate(ctx context.Context, g *launch.Group, info mesh.Info, rdv launch.Rendezvous, pairs []mesh.Pair, stdout io.Writer) int {
	o, n := mr.o, mr.env.Size
	host0, _, _ := net.SplitHostPort(rdv.Addr)
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, Launcher: mr.env.Source, Version: toolInfo(),
		BWSize: o.bwSize, LatSize: o.latSize, BWDurationS: o.bwDuration.Seconds(), LatIters: o.latIters}
	if o.screen > 0 {
		m.Screen = &results.MeshScreen{BWDurationS: o.screen.Seconds(), LatIters: o.screenLatIters()}
	}
	progress := &render.Rounds{W: mr.stderr, Prefix: "rdmabench mesh:"}
	s := &mesh.Session{
		Doc: m, Pairs: pairs, PerHost: o.perHost, Costs: o.costs(),
		Leader: &mesh.Leader{
			Link: g, Size: n, Self: info, Addr0: host0,
			Peer:     func(r int) (string, string) { return g.PeerAddr(r), g.Hellos[r].Host },
			GatherBy: time.Now().Add(o.rdvTimeout),
			Local:    mr.measure, DirectionBound: o.directionBound(),
			Opts: mesh.Options{Rules: o.rules, MaxRetests: o.maxRetests, Grace: 2 * time.Second, Round: progress.Done, Retest: progress.Retested, BothAtOnce: o.screen > 0, Controls: o.controls()},
		},
		Planned: func(m *results.Mesh, sch mesh.Schedule) {
			fmt.Fprintf(mr.stderr, "rdmabench mesh: %d ranks (%s), %s\n", n, mr.env.Source, describeSchedule(sch, o))
			if note := sharedNote(m, sch, o); note != "" {
				fmt.Fprintf(mr.stderr, "rdmabench mesh: %s\n", note)
			}
			fmt.Fprintf(mr.stderr, "rdmabench mesh: rendezvous: %s (%s)\n", rdv.Addr, rdv.From)
			if mr.token == nil {
				fmt.Fprintf(mr.stderr, "rdmabench mesh: no token (--token-file or %s): while the mesh runs, anyone who can reach the ranks' ports can run plans on them\n", tokenEnv)
			}
			progress.Begin()
		},
	}
	s.Run(ctx)
	if ctx.Err() != nil {
		// Interrupted: the ranks still there get a moment to say goodbye,
		// not the rendezvous timeout.
		g.SetTimeout(time.Second)
	}
	g.Close()
	var err error
	if o.asJSON {
		err = render.MeshJSON(stdout, m)
	} else {
		err = render.MeshText(stdout, m)
	}
	if werr := o.writeOutputs(m); err == nil {
		err = werr
	}
	switch {
	case err != nil:
		fmt.Fprintf(mr.stderr, "rdmabench mesh: %v\n", err)
		return exitcode.Findings
	case ctx.Err() != nil:
		return exitcode.Interrupted
	case !anyMeasured(m):
		// Every direction failed or no pair could run (ranks lost or
		// without a device): nothing was judged.
		fmt.Fprintf(mr.stderr, "rdmabench mesh: no direction measured: nothing to judge\n")
		return exitcode.NotMeasured
	case !render.MeshClean(m):
		return exitcode.Findings
	}
	return exitcode.OK
}

// anyMeasured says whether any direction of m has its figures.
func anyMeasured(m *results.Mesh) bool {
	for _, p := range m.Pairs {
		if p.Measured() {
			return true
		}
	}
	return false
}

// writeOutputs writes --save and --metrics (a measured mesh or an
// --analyze'd one).
func (o *meshOptions) writeOutputs(m *results.Mesh) error {
	var err error
	if o.save != "" {
		if serr := publish.WriteFileAtomic(o.save, func(w io.Writer) error { return render.MeshJSON(w, m) }); serr != nil {
			err = fmt.Errorf("--save: %w", serr)
		}
	}
	if o.metrics != "" {
		mo := render.MetricsOptions{SlurmJobID: os.Getenv("SLURM_JOB_ID")}
		if merr := publish.WriteFileAtomic(o.metrics, func(w io.Writer) error { return render.MeshMetrics(w, m, mo) }); merr != nil && err == nil {
			err = fmt.Errorf("--metrics: %w", merr)
		}
	}
	return err
}

// costs are a direction's times for the schedule's estimate and bound.
func (o *meshOptions) costs() mesh.Costs {
	return mesh.Costs{Direction: o.estimate(), ScreenDirection: o.screenEstimate(), DirectionBound: o.directionBound(),
		Screen: o.screen > 0, MaxRetests: o.maxRetests, Controls: o.controls()}
}

// schedule is the mesh of n ranks, one a host (--plan): the tournament,
// or the rounds of the pairs given.
func (o *meshOptions) schedule(n int, pairs []mesh.Pair) mesh.Schedule {
	rounds := mesh.Tournament(n)
	if pairs != nil {
		rounds = mesh.Subset(n, pairs)
	}
	return mesh.NewSchedule(rounds, o.costs())
}

// sharedNote says how ranks that share a NIC or a host were scheduled:
// "" when every rank has a host of its own.
func sharedNote(m *results.Mesh, s mesh.Schedule, o *meshOptions) string {
	nics, hosts := map[string]int{}, map[string]int{}
	for _, rk := range m.Ranks {
		if rk.Device != "" {
			nics[rk.NIC()]++
			hosts[rk.Host]++
		}
	}
	sharedNIC, sharedHost := 0, 0
	for _, k := range nics {
		if k > 1 {
			sharedNIC++
		}
	}
	for _, k := range hosts {
		if k > 1 {
			sharedHost++
		}
	}
	switch {
	case sharedNIC == 0 && sharedHost == 0:
		return ""
	case o.perHost > 0:
		return fmt.Sprintf("%s with several ranks (%s shared by several); at most %d of a host's pairs at once (--per-host), none of a NIC's", render.Plural(sharedHost, "host"), render.Plural(sharedNIC, "NIC"), o.perHost)
	case sharedNIC > 0:
		return fmt.Sprintf("%s shared by several ranks: its pairs run one at a time (%s); the pairs of a host's different NICs run at once (--per-host to bound them)", render.Plural(sharedNIC, "NIC"), render.Plural(len(s.Rounds), "round"))
	}
	return fmt.Sprintf("%s with several NICs: their pairs run at once and share the host's CPUs, memory and PCIe (--per-host to bound them)", render.Plural(sharedHost, "host"))
}

func describeSchedule(s mesh.Schedule, o *meshOptions) string {
	if o.screen > 0 {
		return fmt.Sprintf("%s of up to %s at once, screening both directions of each at once: write-bw %s for %v and send-lat %s %d times, + %v set-up = %v a round; expected about %v, then %d healthy directions (controls) and each outlier retested alone at full length (write-bw for %v, send-lat %d times): about %v each, %v for the controls and --max-retests %d (at most %v in all)",
			render.Plural(len(s.Rounds), "round"), render.Plural(s.Widest, "pair"), render.SizeName(o.bwSize), o.screen, render.SizeName(o.latSize), o.screenLatIters(),
			o.setupEst, o.screenEstimate(), s.Est.Round(time.Second), o.controls(), o.bwDuration, o.latIters, o.estimate().Round(100*time.Millisecond),
			(time.Duration(o.maxRetests+o.controls()) * o.estimate()).Round(time.Second), o.maxRetests, s.Bound.Round(time.Second))
	}
	return fmt.Sprintf("%s of up to %s at once, both directions of each: write-bw %s for %v, send-lat %s %d times; expected about %v, plus about %v for each outlier retested (at most %v in all)",
		render.Plural(len(s.Rounds), "round"), render.Plural(s.Widest, "pair"), render.SizeName(o.bwSize), o.bwDuration, render.SizeName(o.latSize), o.latIters,
		s.Est.Round(time.Second), o.estimate().Round(time.Second), s.Bound.Round(time.Second))
}

// planMesh is --plan N: the schedule of a mesh of N ranks, measured by
// nobody.
func planMesh(o *meshOptions, stdout, stderr io.Writer) int {
	var pairs []mesh.Pair
	if o.pairsFile != "" {
		var err error
		if pairs, err = readPairs(o.pairsFile, o.planRanks); err != nil {
			fmt.Fprintf(stderr, "rdmabench mesh: --pairs %s: %v\n", o.pairsFile, err)
			return 2
		}
	}
	s := o.schedule(o.planRanks, pairs)
	fmt.Fprintf(stdout, "rdmabench mesh --plan %d: %s; %d directions\n", o.planRanks, describeSchedule(s, o), s.Dirs)
	return 0
}

// analyzeMesh is --analyze FILE: a saved mesh judged again with this
// command's thresholds, without measuring; its report and exit status
// as the mesh's own.
func analyzeMesh(o *meshOptions, stdout, stderr io.Writer) int {
	m, err := results.ReadMeshFile(o.analyze)
	if err != nil {
		return usageErr(stderr, "mesh", "--analyze: %v", err)
	}
	o.rules.MarkOutliers(m)
	o.rules.Analyze(m)
	if o.asJSON {
		err = render.MeshJSON(stdout, m)
	} else {
		err = render.MeshText(stdout, m)
	}
	// The mesh judged again is what --save and --metrics hold.
	if werr := o.writeOutputs(m); err == nil {
		err = werr
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "rdmabench mesh: %v\n", err)
		return exitcode.Findings
	case !anyMeasured(m):
		fmt.Fprintf(stderr, "rdmabench mesh: --analyze %s: no direction measured: nothing to judge\n", o.analyze)
		return exitcode.NotMeasured
	case !render.MeshClean(m):
		return exitcode.Findings
	}
	return exitcode.OK
}

// localDevice picks this rank's device from -d: one name for every rank,
// or a list indexed by the local rank (a rank per NIC on each node).
func localDevice(flag string, env launch.Env) (string, error) {
	list := strings.Split(flag, ",")
	if len(list) == 1 {
		return flag, nil
	}
	switch {
	case !env.LocalKnown:
		return "", fmt.Errorf("-d %s: the launcher (%s) gives no local rank to pick a device by; give one device", flag, env.Source)
	case env.LocalRank >= len(list):
		return "", fmt.Errorf("-d %s: local rank %d has no device in the list (%d devices)", flag, env.LocalRank, len(list))
	case strings.TrimSpace(list[env.LocalRank]) == "":
		return "", fmt.Errorf("-d %s: empty device name", flag)
	}
	return strings.TrimSpace(list[env.LocalRank]), nil
}

func readPairs(path string, n int) ([]mesh.Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mesh.ParsePairs(f, n)
}

// prefixed writes each warning line with the rank in front: under a
// launcher every rank's stderr is one stream.
func prefixed(w io.Writer, prefix string) io.Writer {
	return &prefixWriter{w: w, prefix: prefix}
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := io.WriteString(p.w, p.prefix+string(b)); err != nil {
		return 0, err
	}
	return len(b), nil
}
