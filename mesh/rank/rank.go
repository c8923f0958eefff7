// Package rank is one process of rdmabench mesh: its server for the
// others' measurements, the rendezvous, the directions it measures as a
// client, and on rank 0 the mesh.Session that runs the rounds. It wires
// the plain-Go mesh package to the engine; mesh itself knows nothing of
// it. What the command prints (the schedule, the progress, the report)
// comes back to it through Config's callbacks.
package rank

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/results"
)

// noticeAfter is when a rank still waiting at the rendezvous says what
// for (once; it goes on waiting).
const noticeAfter = 5 * time.Second

// Config is what a rank needs: its place in the launch, its device, what
// it measures and how rank 0 judges, and where its output goes.
type Config struct {
	Env    launch.Env
	Device engine.DeviceConfig // its Warnings, when nil, go to Stderr with the rank in front
	Token  []byte              // nil: no token
	Sizing Sizing
	Rules  mesh.Rules
	// PerHost bounds the pairs of one host at once (0: no bound).
	PerHost int
	// Quick: rank 0 measures the mesh in quick mode (a search, not every
	// pair; mesh --quick); the other ranks work its tasks as any.
	// QuickOffRail pairs any NIC with any other host's (--quick-off-rail).
	Quick, QuickOffRail bool
	// Host is this rank's host as the mesh names it ("": the short
	// hostname). Ranks of one Host are one machine to the schedule and the
	// verdicts (their pairs share it; several slow NICs of it blame it).
	Host string
	// ServerPort is this rank's server's TCP port (0: any free port).
	ServerPort        int
	RendezvousTimeout time.Duration
	// Proto names the rendezvous; Key is what every rank must agree on
	// (Sizing.Key); TokenHint says where the token comes from.
	Proto, Key, TokenHint string
	// BadInput, when not "", is rank 0's word to the others that its own
	// input was bad (its --pairs, its outputs): rank 0 tells them once
	// they joined, so that nobody waits for the rendezvous timeout, and
	// exits exitcode.BadInput without measuring.
	BadInput string
	// Version is rank 0's tool, for the document (asked on rank 0 only).
	Version func() *version.Info
	Stderr  io.Writer
	// Planned is told rank 0's schedule before the first round; Round and
	// Retest after each round and retest (done of total).
	Planned       func(m *results.Mesh, s mesh.Schedule)
	Round, Retest func(done, total int)
	// QuickRound is told each quick round done, of at most most.
	QuickRound func(done, most int)
	// Report shows rank 0's mesh once it ran (interrupted: ctx ended) and
	// returns the exit status.
	Report func(m *results.Mesh, interrupted bool) int
}

// Rank is one process of the mesh.
type Rank struct {
	cfg Config
}

// New is a rank of cfg.
func New(cfg Config) *Rank {
	r := &Rank{cfg: cfg}
	if r.cfg.Device.Warnings == nil {
		r.cfg.Device.Warnings = prefixed(cfg.Stderr, r.prefix())
	}
	return r
}

// host is this rank's host: Config.Host, else the short hostname.
func (r *Rank) host() string {
	if r.cfg.Host != "" {
		return r.cfg.Host
	}
	return launch.ShortHostname()
}

func (r *Rank) prefix() string { return fmt.Sprintf("rdmabench mesh: rank %d: ", r.cfg.Env.Rank) }

// Run is a rank from its rendezvous on, its exit status the result: ctx
// ending (Ctrl-C, SIGTERM) ends every wait within a second, rank 0
// reports what was measured, and the rank exits 130. pairs, if not nil
// (rank 0), are the only pairs measured.
func (r *Rank) Run(ctx context.Context, rdv launch.Rendezvous, pairs []mesh.Pair) int {
	if r.cfg.Env.Rank == 0 && r.cfg.BadInput != "" {
		return r.refuse(ctx, rdv)
	}
	// This rank's server, for the others' measurements towards it.
	ln, info := r.listen()
	if ln != nil {
		defer ln.Close()
	}
	g, code := r.join(ctx, rdv, info)
	if g == nil {
		return code
	}
	// The port's facts after the join: the rank is at the rendezvous as
	// soon as it listens, so Ctrl-C there always finds it waiting, and the
	// inventory (slow on an emulated device) overlaps the others' joins.
	if info.Error == "" {
		var err error
		if info.Rank, err = r.portFacts(); err != nil {
			info.Error = err.Error()
		}
		info.Rank.Host = r.host()
	}
	// The device and buffers this rank's server and client sides keep
	// across all its tasks: closed last, after both have stopped (the
	// client's measurements end inside work and coordinate).
	kept := engine.NewKept()
	defer kept.Close()
	r.cfg.Device.Kept = kept
	var serveWG sync.WaitGroup
	serveCtx, stopServe := context.WithCancel(ctx)
	if info.Error == "" {
		serveWG.Add(1)
		go func() {
			defer serveWG.Done()
			engine.Serve(serveCtx, ln, engine.ServerConfig{Device: r.cfg.Device, Token: r.cfg.Token, QueueTimeout: QueueTimeout()})
		}()
	}
	defer func() {
		stopServe()
		serveWG.Wait()
	}()
	if r.cfg.Env.Rank != 0 {
		return r.work(ctx, g, info)
	}
	return r.coordinate(ctx, g, info, rdv, pairs)
}

// refuse is rank 0 with bad input of its own (its line already said):
// it waits at the rendezvous only to tell the others, so that they stop
// at once rather than at their rendezvous timeout, and exits BadInput
// whether or not they came (Interrupted on Ctrl-C), without a second line.
func (r *Rank) refuse(ctx context.Context, rdv launch.Rendezvous) int {
	c := &r.cfg
	g, err := launch.JoinContext(ctx, r.joinConfig(rdv, r.host()))
	if err == nil {
		mesh.GatherInfo(ctx, g, c.Env.Size, time.Now().Add(c.RendezvousTimeout))
		mesh.Start(g, c.Env.Size, 0, c.BadInput)
		g.Close()
	}
	if ctx.Err() != nil {
		return exitcode.Interrupted
	}
	return exitcode.BadInput
}

// listen opens this rank's server's port; info says what went wrong, if
// anything (the rank still joins, to say so).
func (r *Rank) listen() (net.Listener, mesh.Info) {
	var info mesh.Info
	ln, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(r.cfg.ServerPort)))
	if err != nil {
		info.Error = fmt.Sprintf("cannot listen for the others' measurements: %v", err)
		ln = nil
	} else {
		info.ServerPort = ln.Addr().(*net.TCPAddr).Port
	}
	info.Rank.Host = r.host()
	return ln, info
}

// joinConfig is this rank's side of the rendezvous, as host.
func (r *Rank) joinConfig(rdv launch.Rendezvous, host string) launch.Config {
	c := &r.cfg
	return launch.Config{
		Addr: rdv.Addr, Rank: c.Env.Rank, Size: c.Env.Size, Timeout: c.RendezvousTimeout,
		Hello: launch.Hello{Host: host, Pid: os.Getpid(), Key: c.Key},
		Token: c.Token, PortHint: rdv.Hint, Proto: c.Proto, TokenHint: c.TokenHint, KeepGoing: true,
	}
}

// join is the rendezvous; no group and the exit status when it failed.
func (r *Rank) join(ctx context.Context, rdv launch.Rendezvous, info mesh.Info) (*launch.Group, int) {
	stderr := r.cfg.Stderr
	cfg := r.joinConfig(rdv, info.Rank.Host)
	cfg.Waiting = func(line string) { fmt.Fprintf(stderr, "%s%s\n", r.prefix(), line) }
	cfg.NoticeAfter = noticeAfter
	g, err := launch.JoinContext(ctx, cfg)
	if err == nil {
		return g, 0
	}
	fmt.Fprintf(stderr, "%s%v\n", r.prefix(), err)
	var mm *launch.MismatchError
	switch {
	case errors.As(err, &mm):
		return nil, exitcode.BadInput
	case ctx.Err() != nil:
		return nil, exitcode.Interrupted
	}
	return nil, exitcode.NotMeasured
}

// work is every rank but 0: measure what rank 0 asks until it says done.
func (r *Rank) work(ctx context.Context, g *launch.Group, info mesh.Info) int {
	err := mesh.Work(ctx, g, info, r.cfg.RendezvousTimeout+30*time.Second, r.measure)
	if err == nil && ctx.Err() == nil {
		err = g.Close()
	}
	switch {
	case ctx.Err() != nil:
		// Rank 0 learns it from the closed connection; this rank's
		// measurements are rank 0's to report.
		fmt.Fprintf(r.cfg.Stderr, "%sinterrupted (rank 0 reports what was measured)\n", r.prefix())
		return exitcode.Interrupted
	case err != nil:
		fmt.Fprintf(r.cfg.Stderr, "%s%v\n", r.prefix(), err)
		return exitcode.NotMeasured
	}
	return exitcode.OK
}

// coordinate is rank 0: mesh.Session gathers the ranks and runs the
// rounds; Config's callbacks say what runs and report.
func (r *Rank) coordinate(ctx context.Context, g *launch.Group, info mesh.Info, rdv launch.Rendezvous, pairs []mesh.Pair) int {
	c, sz := &r.cfg, &r.cfg.Sizing
	host0, _, _ := net.SplitHostPort(rdv.Addr)
	m := r.document()
	s := &mesh.Session{
		Doc: m, Pairs: pairs, PerHost: c.PerHost, Costs: sz.Costs(),
		Leader: &mesh.Leader{
			Link: g, Size: c.Env.Size, Self: info, Addr0: host0,
			Peer:     func(k int) (string, string) { return g.PeerAddr(k), g.Hellos[k].Host },
			GatherBy: time.Now().Add(c.RendezvousTimeout),
			Local:    r.measure, DirectionBound: sz.DirectionBound(),
			Opts: mesh.Options{Rules: c.Rules, MaxRetests: sz.MaxRetests, RetestAtOnce: sz.AtOnce, Grace: 2 * time.Second, Round: c.Round, Retest: c.Retest, BothAtOnce: sz.Screen > 0, Controls: sz.Controls()},
		},
		Planned: c.Planned,
	}
	if c.Quick {
		s.Leader.Opts.Round = c.QuickRound
		s.Quick = &mesh.QuickOptions{Seed: uint64(time.Now().UnixNano()), Cost: sz.QuickCost(), OffRail: c.QuickOffRail}
	}
	s.Run(ctx)
	if ctx.Err() != nil {
		// Interrupted: the ranks still there get a moment to say goodbye,
		// not the rendezvous timeout.
		g.SetTimeout(time.Second)
	}
	g.Close()
	return c.Report(m, ctx.Err() != nil)
}

// document is rank 0's mesh before it runs: what each direction measures.
func (r *Rank) document() *results.Mesh {
	sz := &r.cfg.Sizing
	schema := results.MeshSchema
	if r.cfg.Quick {
		schema = results.MeshQuickSchema
	}
	m := &results.Mesh{Kind: results.MeshKind, Schema: schema, Launcher: r.cfg.Env.Source, Version: r.cfg.Version(),
		BWSize: sz.BWSize, LatSize: sz.LatSize, BWDurationS: sz.BWDuration.Seconds(), LatIters: sz.LatIters}
	if sz.Screen > 0 {
		m.Screen = &results.MeshScreen{BWDurationS: sz.Screen.Seconds(), LatIters: sz.ScreenLatIters()}
	}
	return m
}

// LocalDevice picks this rank's device from -d: one name for every rank,
// or a list indexed by the local rank (a rank per NIC on each node).
func LocalDevice(flag string, env launch.Env) (string, error) {
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
