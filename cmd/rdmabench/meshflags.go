package main

import (
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/mesh/rank"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/publish"
)

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
	quick      bool   // --quick: a search instead of every pair (with --plan: its plan)
	offRail    bool   // --quick-off-rail: the search pairs any NIC with any other host's
}

func parseMeshFlags(args []string, stderr io.Writer) (*meshOptions, int, bool) {
	fs := newFlagSet("mesh", stderr)
	o := &meshOptions{}
	size, latSize := o.addFlags(fs)
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
	if err := o.validate(); err != nil {
		return bad("%v", err)
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

// addFlags binds mesh's flags to o; the sizes come back as given, to be
// parsed.
func (o *meshOptions) addFlags(fs *pflag.FlagSet) (size, latSize *string) {
	fs.StringVarP(&o.dev, "ib-dev", "d", "", "RDMA device (default: the first one); a list mlx5_0,mlx5_1,... gives each rank on a node the one at its local rank (a rank per NIC)")
	fs.IntVarP(&o.ibPort, "ib-port", "i", 1, "device port")
	fs.IntVarP(&o.gidIndex, "gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)")
	fs.IntVarP(&o.serverPort, "port", "p", 0, "TCP port of this rank's server for the others' measurements (default: any free port)")
	fs.StringVar(&o.host, "host", "", "this rank's host as the mesh names it (default: the short hostname): ranks of one host share it in the schedule and the verdicts; for ranks whose hostname does not say their machine (containers, a fabric emulated on one host)")
	size = fs.StringP("size", "s", "1M", "write-bw message size")
	latSize = fs.String("lat-size", "8", "send-lat message size")
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
	fs.IntVar(&o.AtOnce, "retest-at-once", rank.DefaultAtOnce, "retest this many outliers' write-bw at the same time (no rank or NIC in two) before the rest alone: one fine beside others is fine alone, so only those slow there are measured alone (1: every retest alone)")
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
	fs.BoolVar(&o.quick, "quick", false, "measure in quick mode: rounds of random perfect matchings on each rail, both directions of each pair at once (write-bw only), then adaptive rounds pairing each suspect with ranks known good until it is named (NIC, node, host, rail, link) or cleared; with --plan, its rounds and time (docs/mesh.md#quick-mode)")
	fs.BoolVar(&o.offRail, "quick-off-rail", false, "with --quick: pair any rank with any other host's, not only NIC i with NIC i (the rails; a slow rail is then not told)")
	fs.StringVar(&o.metrics, "metrics", "", "write the mesh in the Prometheus text format to FILE, replaced atomically (rank 0; node_exporter's textfile collector)")
	return size, latSize
}

// validate checks the flags' ranges and which go together.
func (o *meshOptions) validate() error {
	switch {
	case o.ibPort < 1 || o.ibPort > 255:
		return fmt.Errorf("--ib-port %d outside 1..255", o.ibPort)
	case o.gidIndex < -1 || o.gidIndex > 255:
		return fmt.Errorf("--gid-index %d outside 0..255", o.gidIndex)
	case o.serverPort < 0 || o.serverPort > 65535:
		return fmt.Errorf("--port %d outside 0..65535", o.serverPort)
	case !(o.rules.BWFraction > 0 && o.rules.BWFraction <= 1):
		return fmt.Errorf("--bw-fraction %g outside (0, 1]", o.rules.BWFraction)
	case !(o.rules.LatMultiple >= 1 && o.rules.LatMultiple <= 1000):
		return fmt.Errorf("--lat-multiple %g outside 1..1000", o.rules.LatMultiple)
	case !(o.rules.Sigmas >= 1 && o.rules.Sigmas <= 100):
		return fmt.Errorf("--sigmas %g outside 1..100", o.rules.Sigmas)
	case !(o.rules.ExpectBW >= 0 && o.rules.ExpectBW <= 1e6):
		return fmt.Errorf("--expect-bw %g outside 0..1000000 Gb/s", o.rules.ExpectBW)
	case o.MaxRetests < -1 || o.MaxRetests > 1<<20:
		return fmt.Errorf("--max-retests %d outside -1..%d", o.MaxRetests, 1<<20)
	case o.AtOnce < 1 || o.AtOnce > 1<<12:
		return fmt.Errorf("--retest-at-once %d outside 1..%d", o.AtOnce, 1<<12)
	case o.Budget < 0:
		return fmt.Errorf("--retest-budget %v is negative", o.Budget)
	case o.perHost < 0 || o.perHost > 1<<16:
		return fmt.Errorf("--per-host %d outside 0..%d", o.perHost, 1<<16)
	case o.planRanks != 0 && (o.planRanks < 2 || o.planRanks > 1<<16):
		return fmt.Errorf("--plan %d outside 2..%d ranks", o.planRanks, 1<<16)
	case o.planRanks != 0 && o.analyze != "":
		return fmt.Errorf("--plan and --analyze: one at a time")
	case o.offRail && !o.quick:
		return fmt.Errorf("--quick-off-rail goes with --quick")
	case o.quick && o.analyze != "":
		return fmt.Errorf("--quick and --analyze: a quick mesh's verdict is its search's; --analyze judges a full mesh again")
	case o.quick && o.metrics != "":
		return fmt.Errorf("--quick: --metrics goes with a full mesh (the search measures some pairs twice, others never); --save keeps its verdict")
	case o.quick && o.pairsFile != "":
		return fmt.Errorf("--quick chooses its own pairs: no --pairs")
	case o.planRanks != 0 && (o.save != "" || o.metrics != ""):
		return fmt.Errorf("--plan measures nothing: --save and --metrics go with a mesh or --analyze")
	case o.Screen != 0 && (o.Screen < 100*time.Millisecond || o.Screen >= o.BWDuration):
		return fmt.Errorf("--screen %s outside 0.1 s..-D (%s): the screening pass is the shorter one", durflag.Seconds(o.Screen), durflag.Seconds(o.BWDuration))
	case o.SetupEst < 0 || o.SetupEst > time.Hour:
		return fmt.Errorf("--setup-estimate %s outside 0..3600 seconds", durflag.Seconds(o.SetupEst))
	}
	return nil
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
