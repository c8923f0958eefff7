package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/agent/daemon"
	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/agent/sizing"
	"github.com/rdmabench/rdmabench/agent/ud"
	"github.com/rdmabench/rdmabench/ethside/live"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/verbs"
)

func init() {
	register("agent", "an always-on fabric monitor: probes its peers over a UD QP and serves Prometheus /metrics (--plan prints what a fabric of agents costs)", runAgent)
}

// agentFlags are the agent's own flags; --plan's inputs are sizing.Input's.
type agentFlags struct {
	in                                       sizing.Input
	listen, peersFile, tokenFile, host, topo *string
	dev                                      *string
	slurmPort                                *uint16
	seed                                     *uint64
	timeout, lostAfter                       time.Duration
	lostInARow, port, gidIndex               *int
	answerRate                               *float64
	kube                                     *agentKubeFlags
}

func addAgentFlags(fs *pflag.FlagSet) *agentFlags {
	d := sizing.DefaultInput(0, 32)
	af := &agentFlags{in: d, timeout: rules.DefaultReach.Timeout, lostAfter: rules.DefaultReach.LostAfter}
	in := &af.in
	fs.IntVar(&in.Nodes, "plan", 0, "print the probes, traffic, series and RNIC failure detection time of a fabric of N nodes' agents, without probing")
	fs.IntVar(&in.ToRSize, "tor-size", d.ToRSize, "nodes under one ToR (or rail) in the plan: each node probes the others under its ToR")
	fs.IntVar(&in.K, "k", d.K, "peers under other ToRs each node probes, drawn anew every --redraw (with --topology)")
	fs.Float64Var(&in.Rate, "rate", d.Rate, "probes a second to each peer")
	fs.Float64Var(&in.Budget, "budget", d.Budget, "probes a second a node may send to all its peers together; the rate per peer is lowered to fit")
	durflag.VarP(fs, &in.Redraw, "redraw", "", d.Redraw, "how often the remote peers are drawn anew")
	af.listen = fs.String("listen", "", "HOST:PORT to serve /metrics and this agent's UD address on: the address its peers list for it")
	af.peersFile = fs.String("peers", "", "the peers file: one HOST:PORT a line, each peer agent's --listen (this agent's own line is skipped); read again when it changes or on SIGHUP")
	af.slurmPort = fs.Uint16("slurm-port", 0, "take the peers from Slurm's node list (sinfo), each node's agent at this port, instead of --peers")
	af.tokenFile = fs.String("token-file", "", "file holding the job token the agents prove to each other when they exchange addresses (default: $"+tokenEnv+")")
	af.host = fs.String("host", "", "this host's name as the peers file and topology name it (default: the short hostname)")
	af.topo = fs.String("topology", "", "file of `HOST TOR` lines: probe the peers under this host's ToR and --k drawn from other ToRs (default: every peer, one ToR-mesh)")
	af.seed = fs.Uint64("seed", 1, "the fabric's seed for the draws of remote peers: the same on every agent")
	durflag.VarP(fs, &af.timeout, "timeout", "", af.timeout, "a probe with no reply after this long is overdue: counts towards unreachable")
	durflag.VarP(fs, &af.lostAfter, "lost-after", "", af.lostAfter, "a probe with no reply after this long is lost (one answered between --timeout and this is late)")
	af.lostInARow = fs.Int("lost-in-a-row", rules.DefaultReach.LostInARow, "probes overdue in a row that make a peer unreachable")
	af.answerRate = fs.Float64("answer-rate", 20000, "replies a second this agent sends at most, whoever probes it")
	af.dev = fs.StringP("ib-dev", "d", "", "RDMA device (default: the first one); run one agent per RNIC with -d each")
	af.port = fs.IntP("ib-port", "i", 1, "device port")
	af.gidIndex = fs.IntP("gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)")
	af.kube = addAgentKubeFlags(fs)
	return af
}

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agent", stderr)
	af := addAgentFlags(fs)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	bad := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "rdmabench agent: "+format+"\n", args...)
		return exitcode.BadInput
	}
	if fs.NArg() > 0 {
		return bad("takes no arguments (got %q)", fs.Arg(0))
	}
	if fs.Changed("plan") {
		if err := af.in.Validate(); err != nil {
			return bad("%v", err)
		}
		if err := sizing.Make(af.in).WriteText(stdout); err != nil {
			return fail(stderr, "agent: %v", err)
		}
		return exitcode.OK
	}
	cfg, err := af.config(stderr)
	if err != nil {
		return bad("%v", err)
	}
	reload, stopReload := reloadOnHUP()
	defer stopReload()
	cfg.Reload = reload
	a, err := daemon.Listen(cfg)
	var devErr *daemon.DeviceError
	if errors.As(err, &devErr) {
		fmt.Fprintf(stderr, "rdmabench agent: %v\n", err)
		return exitcode.NotMeasured
	}
	if err != nil {
		return bad("%v", err)
	}
	if ifaces := agentNetdevs(*af.dev, *af.port); len(ifaces) > 0 {
		a.Metrics().ReadEthernet(live.Reader{Ifaces: ifaces})
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	fmt.Fprintf(stderr, "rdmabench agent: %s serving /metrics and its address on %s\n", cfg.Self.Host, a.Addr())
	start := time.Now()
	if err := a.Run(ctx); err != nil {
		return fail(stderr, "agent: %v", err)
	}
	s := a.Prober().Stats()
	fmt.Fprintf(stderr, "rdmabench agent: stopped after %v: %d probes sent, %d answered (%d late), %d lost\n",
		time.Since(start).Round(time.Second), s.Sent, s.Answered, s.Late, s.Lost)
	return exitcode.OK
}

// config is the daemon's configuration from the flags: the bad input as
// an error of one line.
func (af *agentFlags) config(stderr io.Writer) (daemon.Config, error) {
	switch {
	case *af.listen == "":
		return daemon.Config{}, errors.New("--listen HOST:PORT is required (or --plan N to print a plan)")
	case *af.gidIndex < -1 || *af.gidIndex > 255:
		return daemon.Config{}, fmt.Errorf("--gid-index %d outside 0..255", *af.gidIndex)
	case *af.port < 1 || *af.port > 255:
		return daemon.Config{}, fmt.Errorf("--ib-port %d outside 1..255", *af.port)
	}
	token, err := loadToken(*af.tokenFile, stderr)
	if err != nil {
		return daemon.Config{}, err
	}
	cfg := daemon.Config{
		Self:      daemon.Self{Host: *af.host, Listen: *af.listen},
		Dev:       *af.dev,
		Token:     token,
		PeersFile: *af.peersFile,
		SlurmPort: *af.slurmPort,
		K:         af.in.K,
		Redraw:    af.in.Redraw,
		Seed:      *af.seed,
		Probe:     probe.Config{Rate: af.in.Rate, Budget: af.in.Budget, Reach: rules.Reach{LostInARow: *af.lostInARow, Timeout: af.timeout, LostAfter: af.lostAfter}},
		Now:       ud.NowNS,
		Log:       stderr,
	}
	if cfg.Self.Host == "" {
		cfg.Self.Host = launch.ShortHostname()
	}
	if src, err := af.kube.source(stderr); err != nil {
		return cfg, err
	} else if src != nil {
		cfg.Source = src
	}
	if *af.topo != "" {
		if cfg.Topology, err = readTopology(*af.topo, cfg.Self.Host); err != nil {
			return cfg, err
		}
	}
	udCfg := ud.Config{Device: *af.dev, Port: *af.port, GIDIndex: *af.gidIndex, AnswerRate: *af.answerRate}
	cfg.Open = func() (daemon.Transport, error) { return ud.Open(udCfg) }
	return cfg, nil
}

// readTopology reads --topology, which must name this host.
func readTopology(path, host string) (*pinglist.Topology, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	topo, err := pinglist.ParseTopology(f, path)
	if err != nil {
		return nil, err
	}
	if _, ok := topo.ToR(host); !ok {
		return nil, fmt.Errorf("host %s is not in %s (give --host as the topology names it)", host, path)
	}
	return topo, nil
}

// reloadOnHUP turns SIGHUP into a request to read the peers again (one
// pending at most); stop ends it.
func reloadOnHUP() (reload chan struct{}, stop func()) {
	reload = make(chan struct{}, 1)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()
	return reload, func() {
		signal.Stop(hup)
		close(hup)
		<-done
	}
}

// agentNetdevs are the netdevs behind the agent's RNIC port, whose
// Ethernet side it exports (none on InfiniBand, or where sysfs says none).
func agentNetdevs(dev string, port int) []string {
	if dev == "" {
		var err error
		if dev, err = verbs.DefaultDevice(); err != nil {
			return nil
		}
	}
	ifaces, _ := live.NetdevsOf("/sys", dev, port)
	return ifaces
}
