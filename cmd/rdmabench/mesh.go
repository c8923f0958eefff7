package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
	"unicode"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/mesh/rank"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	register("mesh", "all pairs of nodes: bandwidth and latency matrices, outliers traced to a node or a link (under srun, mpirun, torchrun)", runMesh)
}

// meshProto names the mesh's rendezvous: ncclbench's processes (or another
// version of the mesh) on the port are refused, not joined.
const meshProto = "rdmabench-mesh/3" // 2: tasks and outcomes numbered (Seq); 3: a task's part

// meshOptions are the flags of rdmabench mesh; rank.Sizing holds those
// that size each direction's measurement.
type meshOptions struct {
	rank.Sizing
	dev        string
	ibPort     int
	gidIndex   int
	serverPort int
	host       string // --host: this rank's host as the mesh names it
	rules      mesh.Rules
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
	quick      bool   // --quick: the search's plan (with --plan; not yet measured)
}

func parseMeshFlags(args []string, stderr io.Writer) (*meshOptions, int, bool) {
	fs := newFlagSet("mesh", stderr)
	o := &meshOptions{}
	fs.StringVarP(&o.dev, "ib-dev", "d", "", "RDMA device (default: the first one); a list mlx5_0,mlx5_1,... gives each rank on a node the one at its local rank (a rank per NIC)")
	fs.IntVarP(&o.ibPort, "ib-port", "i", 1, "device port")
	fs.IntVarP(&o.gidIndex, "gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)")
	fs.IntVarP(&o.serverPort, "port", "p", 0, "TCP port of this rank's server for the others' measurements (default: any free port)")
	fs.StringVar(&o.host, "host", "", "this rank's host as the mesh names it (default: the short hostname): ranks of one host share it in the schedule and the verdicts; for ranks whose hostname does not say their machine (containers, a fabric emulated on one host)")
	size := fs.StringP("size", "s", "1M", "write-bw message size")
	latSize := fs.String("lat-size", "8", "send-lat message size")
	durflag.VarP(fs, &o.BWDuration, "duration", "D", 2*time.Second, "write-bw per direction for this long")
	fs.Uint64Var(&o.LatIters, "lat-iters", 1000, "send-lat ping-pongs per direction (a tenth more, at most 100, as warm-up)")
	durflag.VarP(fs, &o.Screen, "screen", "", 0, "screen first: every pair's two directions at once, write-bw for this long and a tenth of --lat-iters (at least 100), then the outliers retested alone at -D and --lat-iters (for large meshes; see --plan)")
	durflag.VarP(fs, &o.SetupEst, "setup-estimate", "", rank.DefaultSetup, "a direction's fixed cost beyond its measurement, for the estimates (--plan): 2 s on the emulated rxe target, far less on an HCA")
	durflag.VarP(fs, &o.Timeout, "timeout", "", 20*time.Second, "deadline of each measurement step beyond its duration")
	fs.Float64Var(&o.rules.BWFraction, "bw-fraction", mesh.DefaultRules.BWFraction, "a direction below this fraction of its reference bandwidth (the better of its two ranks' other pairs) is an outlier, if also beyond --sigmas")
	fs.Float64Var(&o.rules.LatMultiple, "lat-multiple", mesh.DefaultRules.LatMultiple, "a direction above this multiple of its reference latency is an outlier, if also beyond --sigmas")
	fs.Float64Var(&o.rules.Sigmas, "sigmas", mesh.DefaultRules.Sigmas, "an outlier is also beyond this many spreads of one measurement (the fabric's noise, from the two directions of each pair)")
	fs.Float64Var(&o.rules.ExpectBW, "expect-bw", 0, "the fabric's expected write-bw per direction in Gb/s: the reference of every direction between hosts (default: its ranks' other pairs of its class)")
	fs.IntVar(&o.MaxRetests, "max-retests", -1, "outliers measured again alone, at most (-1: as many as --retest-budget allows)")
	durflag.VarP(fs, &o.Budget, "retest-budget", "", 0, "time the retests of outliers may take, each measuring only its slow figure (0: a quarter of the rounds' expected time, at least 1m)")
	fs.IntVar(&o.perHost, "per-host", 0, "at most this many pairs of one host at once (0: no bound), so that ranks of one host (a rank per NIC) do not measure their CPU, memory and PCIe sharing; ranks on one NIC never run two pairs at once")
	fs.StringVar(&o.pairsFile, "pairs", "", "measure only these pairs: a file of rank pairs, one a line (\"3 7\")")
	fs.StringVar(&o.rendezvous, "rendezvous", "", "host:port of rank 0 (default MASTER_ADDR:MASTER_PORT, else derived from Slurm's, Open MPI's or a Kubernetes Indexed Job's variables)")
	fs.IntVar(&o.rdzvPort, "rdzv-port", 0, "rendezvous port on MASTER_ADDR or the derived host (default MASTER_PORT, MASTER_PORT+1 under torchrun, or derived from the job id)")
	durflag.VarP(fs, &o.rdvTimeout, "rendezvous-timeout", "", 120*time.Second, "how long to wait for every rank to join")
	fs.StringVar(&o.tokenFile, "token-file", "", "job token every rank must hold, for the rendezvous and the measurements (default $"+tokenEnv+")")
	fs.BoolVar(&o.asJSON, "json", false, "print the mesh document (JSON) instead of the report")
	fs.StringVar(&o.save, "save", "", "also write the mesh document to FILE (for plot)")
	fs.StringVar(&o.analyze, "analyze", "", "judge a saved mesh (--save FILE) again with this command's --bw-fraction, --lat-multiple, --sigmas and --expect-bw, without measuring")
	fs.IntVar(&o.planRanks, "plan", 0, "print the rounds and the expected time of a mesh of N ranks (of the --pairs given), without measuring")
	fs.BoolVar(&o.quick, "quick", false, "with --plan: the quick mode's rounds and time (random perfect matchings, then adaptive rounds naming each suspect; docs/mesh.md#quick-mode); a mesh measured in quick mode is not built yet")
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
	if o.BWSize, err = rbplan.ParseSize(*size); err != nil {
		return bad("-s: %v", err)
	}
	if o.LatSize, err = rbplan.ParseSize(*latSize); err != nil {
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
	case o.MaxRetests < -1 || o.MaxRetests > 1<<20:
		return bad("--max-retests %d outside -1..%d", o.MaxRetests, 1<<20)
	case o.Budget < 0:
		return bad("--retest-budget %v is negative", o.Budget)
	case o.perHost < 0 || o.perHost > 1<<16:
		return bad("--per-host %d outside 0..%d", o.perHost, 1<<16)
	case o.planRanks != 0 && (o.planRanks < 2 || o.planRanks > 1<<16):
		return bad("--plan %d outside 2..%d ranks", o.planRanks, 1<<16)
	case o.planRanks != 0 && o.analyze != "":
		return bad("--plan and --analyze: one at a time")
	case o.quick && o.planRanks == 0:
		return bad("--quick goes with --plan N for now: the quick mode's search is planned and simulated (docs/mesh.md#quick-mode), not yet measured")
	case o.quick && o.pairsFile != "":
		return bad("--quick chooses its own pairs: no --pairs")
	case o.planRanks != 0 && (o.save != "" || o.metrics != ""):
		return bad("--plan measures nothing: --save and --metrics go with a mesh or --analyze")
	case o.Screen != 0 && (o.Screen < 100*time.Millisecond || o.Screen >= o.BWDuration):
		return bad("--screen %s outside 0.1 s..-D (%s): the screening pass is the shorter one", durflag.Seconds(o.Screen), durflag.Seconds(o.BWDuration))
	case o.SetupEst < 0 || o.SetupEst > time.Hour:
		return bad("--setup-estimate %s outside 0..3600 seconds", durflag.Seconds(o.SetupEst))
	}
	if err := checkRendezvousFlag(o.rendezvous); err != nil {
		return bad("%v", err)
	}
	if err := checkHostFlag(o.host); err != nil {
		return bad("%v", err)
	}
	// The plans are checked here, on every rank, so that a bad size is one
	// line at start and not a failure in every direction.
	for _, p := range []engine.Plan{o.Plan(engine.WriteBW, false), o.Plan(engine.SendLat, false), o.Plan(engine.WriteBW, true), o.Plan(engine.SendLat, true)} {
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

// checkHostFlag is --host as a name the report, the metrics' labels and
// the document can carry: printable, no spaces, at most 64 bytes.
func checkHostFlag(v string) error {
	if len(v) > 64 {
		return fmt.Errorf("--host %.20q...: longer than 64 bytes", v)
	}
	for _, c := range v {
		if c <= ' ' || c == 0x7f || c == '"' || c == '\\' || !unicode.IsPrint(c) {
			return fmt.Errorf("--host %q: want a host name without spaces, quotes or control characters", v)
		}
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
	}{{"--duration", o.BWDuration, 100 * time.Millisecond}, {"--rendezvous-timeout", o.rdvTimeout, time.Second}} {
		if d.v < d.min || d.v > rbplan.MaxDuration {
			return fmt.Errorf("%s %s outside %s..%s seconds", d.name, durflag.Seconds(d.v), durflag.Seconds(d.min), durflag.Seconds(rbplan.MaxDuration))
		}
	}
	if o.Timeout <= 0 || o.Timeout > rbplan.MaxDuration {
		return fmt.Errorf("--timeout %v outside (0, %v]", o.Timeout, rbplan.MaxDuration)
	}
	return nil
}

func runMesh(args []string, stdout, stderr io.Writer) int {
	o, code, done := parseMeshFlags(args, stderr)
	if done {
		return code
	}
	switch {
	case o.analyze != "" || o.planRanks != 0:
		// Written here, and only here.
		if err := o.checkOutputs(); err != nil {
			return usageErr(stderr, "mesh", "%v", err)
		}
	}
	switch {
	case o.analyze != "":
		return analyzeMesh(o, stdout, stderr)
	case o.planRanks != 0:
		return planMesh(o, stdout, stderr)
	}
	usage := func(format string, a ...any) int { return usageErr(stderr, "mesh", format, a...) }
	env, err := launch.Detect(os.Getenv)
	if err != nil {
		return usage("%v", err)
	}
	if env.Size < 2 {
		return usage("%d rank: start one process per node (or per NIC) with srun, mpirun or torchrun; see rdmabench mesh --help", env.Size)
	}
	rdv, err := launch.FindRendezvous(o.rendezvous, o.rdzvPort, env, os.Getenv)
	if err != nil {
		return usage("%v", err)
	}
	token, err := loadToken(o.tokenFile, stderr)
	if err != nil {
		return usage("%v", err)
	}
	var pairs []mesh.Pair
	badInput := ""
	if env.Rank == 0 {
		// Rank 0 reads the pairs and writes --save and --metrics, on its
		// own host: the others' file systems need not have the paths. The
		// others learn of a bad one from rank 0 once they joined.
		if err := o.checkOutputs(); err != nil {
			fmt.Fprintf(stderr, "rdmabench mesh: %v\n", err)
			badInput = "rank 0 cannot write its outputs (see rank 0's message)"
		} else if o.pairsFile != "" {
			if pairs, err = readPairs(o.pairsFile, env.Size); err != nil {
				fmt.Fprintf(stderr, "rdmabench mesh: --pairs %s: %v\n", o.pairsFile, err)
				badInput = "--pairs " + o.pairsFile + " is not a list of this mesh's pairs (see rank 0's message)"
			}
		}
	}
	dev, err := rank.LocalDevice(o.dev, env)
	if err != nil {
		return usage("%v", err)
	}
	cfg := o.rankConfig(env, rdv, token, stdout, stderr)
	cfg.Device.Device, cfg.BadInput = dev, badInput
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return rank.New(cfg).Run(ctx, rdv, pairs)
}

// rankConfig is the rank of these options: rank 0 says its schedule and
// progress on stderr and its report on stdout.
func (o *meshOptions) rankConfig(env launch.Env, rdv launch.Rendezvous, token []byte, stdout, stderr io.Writer) rank.Config {
	progress := &render.Rounds{W: stderr, Prefix: "rdmabench mesh:"}
	return rank.Config{
		Env: env, Device: engine.DeviceConfig{Port: o.ibPort, GIDIndex: o.gidIndex}, Token: token,
		Host: o.host, Sizing: o.Sizing, Rules: o.rules, PerHost: o.perHost, ServerPort: o.serverPort, RendezvousTimeout: o.rdvTimeout,
		Proto: meshProto, Key: o.Key(), TokenHint: "--token-file or " + tokenEnv, Version: toolInfo, Stderr: stderr,
		Planned: func(m *results.Mesh, sch mesh.Schedule) {
			fmt.Fprintf(stderr, "rdmabench mesh: %d ranks (%s), %s\n", env.Size, env.Source, describeSchedule(sch, o))
			if note := sharedNote(m, sch, o); note != "" {
				fmt.Fprintf(stderr, "rdmabench mesh: %s\n", note)
			}
			fmt.Fprintf(stderr, "rdmabench mesh: rendezvous: %s (%s)\n", rdv.Addr, rdv.From)
			if token == nil {
				fmt.Fprintf(stderr, "rdmabench mesh: no token (--token-file or %s): while the mesh runs, anyone who can reach the ranks' ports can run plans on them\n", tokenEnv)
			}
			progress.Begin()
		},
		Round: progress.Done, Retest: progress.Retested,
		Report: func(m *results.Mesh, interrupted bool) int { return o.report(m, interrupted, "", stdout, stderr) },
	}
}

// report shows a mesh, measured or --analyze'd: its report on stdout,
// --save and --metrics, and the exit status. what names the saved mesh
// in the line that says nothing was measured.
func (o *meshOptions) report(m *results.Mesh, interrupted bool, what string, stdout, stderr io.Writer) int {
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
		fmt.Fprintf(stderr, "rdmabench mesh: %v\n", err)
		return exitcode.Findings
	case interrupted:
		return exitcode.Interrupted
	case !anyMeasured(m):
		// Every direction failed or no pair could run (ranks lost or
		// without a device): nothing was judged.
		fmt.Fprintf(stderr, "rdmabench mesh: %sno direction measured: nothing to judge\n", what)
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
	if o.Screen > 0 {
		return fmt.Sprintf("%s of up to %s at once, screening both directions of each at once: write-bw %s for %v and send-lat %s %d times, + %v set-up = %v a round; expected about %v, then %d healthy directions (controls) and each outlier retested alone at full length (write-bw for %v, send-lat %d times): about %v each, %v for the controls, then the outliers' retests within %v (at most %v in all)",
			render.Plural(len(s.Rounds), "round"), render.Plural(s.Widest, "pair"), render.SizeName(o.BWSize), o.Screen, render.SizeName(o.LatSize), o.ScreenLatIters(),
			o.SetupEst, o.ScreenEstimate(), s.Est.Round(time.Second), o.Controls(), o.BWDuration, o.LatIters, o.Estimate().Round(100*time.Millisecond),
			(time.Duration(o.Controls()) * o.Estimate()).Round(time.Second), s.Budget.Round(time.Second), s.Bound.Round(time.Second))
	}
	return fmt.Sprintf("%s of up to %s at once, both directions of each: write-bw %s for %v, send-lat %s %d times; expected about %v, then the outliers' retests (each its slow figure alone, a bandwidth about %v) within %v (at most %v in all)",
		render.Plural(len(s.Rounds), "round"), render.Plural(s.Widest, "pair"), render.SizeName(o.BWSize), o.BWDuration, render.SizeName(o.LatSize), o.LatIters,
		s.Est.Round(time.Second), o.Estimate().Round(time.Second), s.Budget.Round(time.Second), s.Bound.Round(time.Second))
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
	if o.quick {
		fmt.Fprintln(stdout, mesh.QuickPlan(o.planRanks, nil, mesh.QuickOptions{}))
		return 0
	}
	s := o.Schedule(o.planRanks, pairs)
	fmt.Fprintf(stdout, "rdmabench mesh --plan %d: %s; %d directions\n", o.planRanks, describeSchedule(s, o), s.Dirs)
	return 0
}

// analyzeMesh is --analyze FILE: a saved mesh judged again with this
// command's thresholds, without measuring; its report and exit status
// as the mesh's own (--save and --metrics hold the mesh judged again).
func analyzeMesh(o *meshOptions, stdout, stderr io.Writer) int {
	m, err := results.ReadMeshFile(o.analyze)
	if err != nil {
		return usageErr(stderr, "mesh", "--analyze: %v", err)
	}
	o.rules.MarkOutliers(m)
	o.rules.Analyze(m)
	return o.report(m, false, "--analyze "+o.analyze+": ", stdout, stderr)
}

func readPairs(path string, n int) ([]mesh.Pair, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return mesh.ParsePairs(f, n)
}
