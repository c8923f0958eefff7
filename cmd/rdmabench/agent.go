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

	"github.com/rdmabench/rdmabench/agent/daemon"
	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/plan"
	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/rules"
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

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agent", stderr)
	d := plan.DefaultInput(0, 32)
	in := d
	fs.IntVar(&in.Nodes, "plan", 0, "print the probes, traffic, series and RNIC failure detection time of a fabric of N nodes' agents, without probing")
	fs.IntVar(&in.ToRSize, "tor-size", d.ToRSize, "nodes under one ToR (or rail) in the plan: each node probes the others under its ToR")
	fs.IntVar(&in.K, "k", d.K, "peers under other ToRs each node probes, drawn anew every --redraw (with --topology)")
	fs.Float64Var(&in.Rate, "rate", d.Rate, "probes a second to each peer")
	fs.Float64Var(&in.Budget, "budget", d.Budget, "probes a second a node may send to all its peers together; the rate per peer is lowered to fit")
	durflag.VarP(fs, &in.Redraw, "redraw", "", d.Redraw, "how often the remote peers are drawn anew")
	listen := fs.String("listen", "", "HOST:PORT to serve /metrics and this agent's UD address on: the address its peers list for it")
	peersFile := fs.String("peers", "", "the peers file: one HOST:PORT a line, each peer agent's --listen (this agent's own line is skipped); read again when it changes or on SIGHUP")
	slurmPort := fs.Uint16("slurm-port", 0, "take the peers from Slurm's node list (sinfo), each node's agent at this port, instead of --peers")
	tokenFile := fs.String("token-file", "", "file holding the job token the agents prove to each other when they exchange addresses (default: $"+tokenEnv+")")
	host := fs.String("host", "", "this host's name as the peers file and topology name it (default: the short hostname)")
	topoFile := fs.String("topology", "", "file of `HOST TOR` lines: probe the peers under this host's ToR and --k drawn from other ToRs (default: every peer, one ToR-mesh)")
	seed := fs.Uint64("seed", 1, "the fabric's seed for the draws of remote peers: the same on every agent")
	timeout := rules.DefaultReach.Timeout
	durflag.VarP(fs, &timeout, "timeout", "", timeout, "a probe with no reply after this long is overdue: counts towards unreachable")
	lostAfter := rules.DefaultReach.LostAfter
	durflag.VarP(fs, &lostAfter, "lost-after", "", lostAfter, "a probe with no reply after this long is lost (one answered between --timeout and this is late)")
	lostInARow := fs.Int("lost-in-a-row", rules.DefaultReach.LostInARow, "probes overdue in a row that make a peer unreachable")
	answerRate := fs.Float64("answer-rate", 20000, "replies a second this agent sends at most, whoever probes it")
	dev := fs.StringP("ib-dev", "d", "", "RDMA device (default: the first one); run one agent per RNIC with -d each")
	port := fs.IntP("ib-port", "i", 1, "device port")
	gidIndex := fs.IntP("gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	bad := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "rdmabench agent: "+format+"\n", args...)
		return 2
	}
	if fs.NArg() > 0 {
		return bad("takes no arguments (got %q)", fs.Arg(0))
	}
	if fs.Changed("plan") {
		if err := in.Validate(); err != nil {
			return bad("%v", err)
		}
		if err := plan.Make(in).WriteText(stdout); err != nil {
			return fail(stderr, "agent: %v", err)
		}
		return 0
	}
	if *listen == "" {
		return bad("--listen HOST:PORT is required (or --plan N to print a plan)")
	}
	if *gidIndex < -1 || *gidIndex > 255 {
		return bad("--gid-index %d outside 0..255", *gidIndex)
	}
	if *port < 1 || *port > 255 {
		return bad("--ib-port %d outside 1..255", *port)
	}
	token, err := loadToken(*tokenFile, stderr)
	if err != nil {
		return bad("%v", err)
	}
	cfg := daemon.Config{
		Self:      daemon.Self{Host: *host, Listen: *listen},
		Dev:       *dev,
		Token:     token,
		PeersFile: *peersFile,
		SlurmPort: *slurmPort,
		K:         in.K,
		Redraw:    in.Redraw,
		Seed:      *seed,
		Probe:     probe.Config{Rate: in.Rate, Budget: in.Budget, Reach: rules.Reach{LostInARow: *lostInARow, Timeout: timeout, LostAfter: lostAfter}},
		Now:       ud.NowNS,
		Log:       stderr,
	}
	if cfg.Self.Host == "" {
		cfg.Self.Host = launch.ShortHostname()
	}
	if *topoFile != "" {
		f, err := os.Open(*topoFile)
		if err != nil {
			return bad("%v", err)
		}
		cfg.Topology, err = pinglist.ParseTopology(f, *topoFile)
		f.Close()
		if err != nil {
			return bad("%v", err)
		}
		if _, ok := cfg.Topology.ToR(cfg.Self.Host); !ok {
			return bad("host %s is not in %s (give --host as the topology names it)", cfg.Self.Host, *topoFile)
		}
	}
	udCfg := ud.Config{Device: *dev, Port: *port, GIDIndex: *gidIndex, AnswerRate: *answerRate}
	cfg.Open = func() (daemon.Transport, error) { return ud.Open(udCfg) }

	reload := make(chan struct{}, 1)
	cfg.Reload = reload
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for range hup {
			select {
			case reload <- struct{}{}:
			default:
			}
		}
	}()

	a, err := daemon.Listen(cfg)
	var devErr *daemon.DeviceError
	if errors.As(err, &devErr) {
		fmt.Fprintf(stderr, "rdmabench agent: %v\n", err)
		return exitcode.NotMeasured
	}
	if err != nil {
		return bad("%v", err)
	}
	if ifaces := agentNetdevs(*dev, *port); len(ifaces) > 0 {
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
	return 0
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
