// Package daemon is `rdmabench agent` put together: the transport's loop
// (agent/ud) driving the prober (agent/probe), the HTTP server with
// /metrics and the token-guarded address record, the peers from a file
// (read again when it changes or on SIGHUP) or from Slurm, the pinglist
// drawn anew each period, the peers' addresses fetched and fetched again
// when a peer stops answering, and the device reopened when it goes.
// Everything here but the transport is plain Go; tests run it over a
// simulated transport.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/agent/exchange"
	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/pinglist"
	"github.com/rdmabench/rdmabench/agent/probe"
	"github.com/rdmabench/rdmabench/agent/wire"
)

// Transport is a live UD QP (agent/ud.Transport).
type Transport interface {
	probe.Transport
	Address(host, dev string) wire.Address
	Resolve(a wire.Address) (probe.Dest, error)
	Run(ctx context.Context, p probe.Driven) error
	Counts() metrics.Counts
	ClockNote() string // why the clock is the CPU's, "" for the RNIC's
	Close() error
}

// PeerSource lists the peers and says when they may have changed: the
// agent's Service's EndpointSlices in Kubernetes (kube.PeerSource).
type PeerSource interface {
	Peers(ctx context.Context) ([]pinglist.Peer, error)
	// Watch sends on changed (without blocking) when the peers may have
	// changed, until ctx ends.
	Watch(ctx context.Context, changed chan<- struct{})
	String() string
}

// Config is one agent.
type Config struct {
	Self  Self
	Dev   string // the -d device, "" for a node's agent (the metrics' local_dev)
	Token []byte

	PeersFile string     // or
	SlurmPort uint16     // peers from Slurm's node list at this port, or
	Source    PeerSource // peers listed and watched (Kubernetes' EndpointSlices)
	Sinfo     string     // the sinfo binary ("sinfo")

	Topology *pinglist.Topology // nil: every peer in one ToR-mesh
	K        int
	Redraw   time.Duration
	Seed     uint64

	Probe probe.Config

	// Open opens the transport; called again, every ReopenEvery, after
	// it failed or its loop ended in error.
	Open        func() (Transport, error)
	Clock       wire.Clock    // the transport's, for the metrics' label
	Now         func() uint64 // the transport's clock in ns (agent/ud.NowNS)
	ReopenEvery time.Duration

	Log    io.Writer       // one line an event
	Reload <-chan struct{} // SIGHUP
}

// Intervals of the daemon's housekeeping.
const (
	FileCheckEvery = 2 * time.Second // the peers file's stamp
	ResolveEvery   = time.Second     // the resolver's pass over unresolved and unanswering peers
	FetchTimeout   = 2 * time.Second // one address request
	fetchWorkers   = 8
	maxBackoff     = 16 * time.Second
)

// Agent is a running agent.
type Agent struct {
	cfg     Config
	m       *metrics.Set
	prober  *probe.Prober
	ln      net.Listener
	srv     *http.Server
	client  *http.Client
	logMu   sync.Mutex
	trMu    sync.Mutex
	tr      Transport // nil while the device is gone
	trErr   error
	closed  metrics.Counts     // the counts of transports closed before
	sendErr string             // the last send error logged
	badWhy  string             // the last bad datagram logged
	backoff map[string]backoff // resolver-owned
	first   []pinglist.Peer    // the peers read by Listen
	opened  Transport          // the transport Listen opened, for Run
}

type backoff struct {
	next    time.Time
	wait    time.Duration
	lastErr string // logged once, and again when the error changes
}

// Listen makes the agent and binds its port, so that a caller knows it
// listens before Run.
func Listen(cfg Config) (*Agent, error) {
	if err := cfg.checkPeerSource(); err != nil {
		return nil, err
	}
	if len(cfg.Token) == 0 {
		return nil, errors.New("no job token: give --token-file FILE (or RDMABENCH_TOKEN): peers fetch each other's addresses with it")
	}
	if cfg.Redraw <= 0 {
		cfg.Redraw = time.Minute
	}
	if cfg.ReopenEvery <= 0 {
		cfg.ReopenEvery = 2 * time.Second
	}
	if cfg.Sinfo == "" {
		cfg.Sinfo = "sinfo"
	}
	a := &Agent{cfg: cfg, backoff: map[string]backoff{},
		client: &http.Client{Timeout: FetchTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 1, IdleConnTimeout: 30 * time.Second}}}
	var err error
	if a.first, err = a.loadPeers(context.Background()); err != nil {
		return nil, err
	}
	if err := cfg.Probe.Validate(); err != nil {
		return nil, err
	}
	if a.ln, err = net.Listen("tcp", cfg.Self.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Self.Listen, err)
	}
	if a.opened, err = cfg.Open(); err != nil {
		a.ln.Close()
		return nil, &DeviceError{Err: err}
	}
	if note := a.opened.ClockNote(); note != "" {
		a.logf("%s", note)
	}
	a.m = metrics.New(metrics.Local{Host: cfg.Self.Host, Dev: cfg.Dev}, a.opened.Clock())
	if a.prober, err = probe.New(cfg.Probe, a.opened, a.m); err != nil {
		a.opened.Close()
		a.ln.Close()
		return nil, err
	}
	a.m.CountDatagrams(a.counts)
	mux := http.NewServeMux()
	mux.Handle("/metrics", a.m.Handler())
	mux.Handle(wire.AddressPath, exchange.Handler(cfg.Token, a.address))
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	return a, nil
}

// Addr is where the agent listens.
func (a *Agent) Addr() net.Addr { return a.ln.Addr() }

// Prober is the agent's prober, for tests.
func (a *Agent) Prober() *probe.Prober { return a.prober }

// Metrics is the agent's metrics, for more families (the Ethernet side).
func (a *Agent) Metrics() *metrics.Set { return a.m }

func (a *Agent) logf(format string, args ...any) {
	if a.cfg.Log == nil {
		return
	}
	a.logMu.Lock()
	defer a.logMu.Unlock()
	fmt.Fprintf(a.cfg.Log, "rdmabench agent: "+format+"\n", args...)
}

// address is the record the HTTP handler serves: none while the device
// is gone.
func (a *Agent) address() (wire.Address, error) {
	a.trMu.Lock()
	defer a.trMu.Unlock()
	if a.tr == nil {
		if a.trErr != nil {
			return wire.Address{}, fmt.Errorf("no UD QP: %v", a.trErr)
		}
		return wire.Address{}, errors.New("no UD QP yet")
	}
	return a.tr.Address(a.cfg.Self.Host, a.cfg.Dev), nil
}

// down is the transport while the device is gone: every probe fails to
// leave, so the agent's own series show it losing every peer.
type down struct{ err error }

func (d down) Clock() wire.Clock                             { return wire.ClockCPU }
func (d down) Send(probe.Dest, wire.Message) (uint64, error) { return 0, d.err }

// Run runs the agent until ctx ends; it returns nil then, after every
// goroutine stopped and the device closed. A first peers list that cannot
// be read is Listen's error; later ones are logged and the last good list
// kept.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first := a.first
	var wg sync.WaitGroup
	serveErr := make(chan error, 1)
	wg.Add(5)
	go func() {
		defer wg.Done()
		if err := a.srv.Serve(a.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			serveErr <- err
			cancel()
		}
	}()
	go func() { defer wg.Done(); a.peersLoop(ctx, first) }()
	go func() { defer wg.Done(); a.resolveLoop(ctx) }()
	go func() { defer wg.Done(); a.transportLoop(ctx) }()
	go func() { defer wg.Done(); a.m.RefreshEthernet(ctx) }()
	<-ctx.Done()
	shut, done := context.WithTimeout(context.Background(), 2*time.Second)
	a.srv.Shutdown(shut)
	done()
	wg.Wait()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve on %s: %w", a.cfg.Self.Listen, err)
	default:
	}
	return nil
}

// transportLoop opens the device and runs its loop; when the loop fails
// (the device removed, its QP in error) it closes it, probes fail while it
// is gone, and it is opened again every ReopenEvery.
func (a *Agent) transportLoop(ctx context.Context) {
	logged := ""
	for ctx.Err() == nil {
		tr, err := a.opened, error(nil)
		if tr == nil {
			tr, err = a.cfg.Open()
		}
		a.opened = nil
		if err != nil {
			if msg := err.Error(); msg != logged {
				a.logf("the device does not open: %v (trying again every %v)", err, a.cfg.ReopenEvery)
				logged = msg
			}
			a.setTransport(nil, err)
			a.tickDown(ctx, down{err}, a.cfg.ReopenEvery)
			continue
		}
		if logged != "" {
			a.logf("the device is open again")
		}
		logged = ""
		a.setTransport(tr, nil)
		err = tr.Run(ctx, a.prober)
		a.setTransport(nil, err)
		tr.Close()
		if err != nil && ctx.Err() == nil {
			a.logf("the UD QP stopped: %v (reopening every %v)", err, a.cfg.ReopenEvery)
			logged = err.Error()
			a.tickDown(ctx, down{err}, a.cfg.ReopenEvery)
		}
	}
}

// counts are the datagrams' fates over every transport the agent opened.
func (a *Agent) counts() metrics.Counts {
	a.trMu.Lock()
	c := a.closed
	if a.tr != nil {
		now := a.tr.Counts()
		c = addCounts(c, now)
		c.LastBad = now.LastBad
	}
	a.trMu.Unlock()
	c.Stray = a.prober.Stats().Stray
	return c
}

func addCounts(a, b metrics.Counts) metrics.Counts {
	return metrics.Counts{Answered: a.Answered + b.Answered, Refused: a.Refused + b.Refused, Bad: a.Bad + b.Bad, Stray: a.Stray + b.Stray}
}

func (a *Agent) setTransport(tr Transport, err error) {
	a.trMu.Lock()
	if a.tr != nil && tr == nil {
		a.closed = addCounts(a.closed, a.tr.Counts())
	}
	a.tr, a.trErr = tr, err
	a.trMu.Unlock()
	if tr != nil {
		a.prober.SetTransport(tr)
	} else if err != nil {
		a.prober.SetTransport(down{err})
	}
}

// tickDown drives the prober for d with no device: its probes fail, and
// its peers' losses and unreachable gauges say so.
func (a *Agent) tickDown(ctx context.Context, tr down, d time.Duration) {
	end := time.Now().Add(d)
	for ctx.Err() == nil && time.Now().Before(end) {
		next := a.prober.Tick(a.cfg.Now())
		wait := time.Duration(next - a.cfg.Now())
		if next < a.cfg.Now() {
			wait = 0
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(wait, time.Until(end))):
		}
	}
}

// checkPeerSource wants exactly one source of the peers.
func (cfg *Config) checkPeerSource() error {
	n := 0
	for _, given := range []bool{cfg.PeersFile != "", cfg.SlurmPort != 0, cfg.Source != nil} {
		if given {
			n++
		}
	}
	switch {
	case n == 0:
		return errors.New("no peers: give --peers FILE, --slurm-port PORT or --kube-service NAME")
	case n > 1:
		return errors.New("--peers, --slurm-port and --kube-service: take the peers from one")
	}
	return nil
}

// loadPeers reads the peers: the file, the source, or Slurm's node list.
func (a *Agent) loadPeers(ctx context.Context) ([]pinglist.Peer, error) {
	if a.cfg.PeersFile != "" {
		return readPeersFile(a.cfg.PeersFile)
	}
	if a.cfg.Source != nil {
		return a.cfg.Source.Peers(ctx)
	}
	return slurmPeers(ctx, a.cfg.Sinfo, a.cfg.SlurmPort)
}

// peersLoop keeps the pinglist: from the peers read, drawn anew each
// Redraw; read again on SIGHUP, when the file's stamp changes, and (from
// Slurm) each Redraw.
func (a *Agent) peersLoop(ctx context.Context, all []pinglist.Peer) {
	period := func() uint64 { return uint64(time.Now().UnixNano() / int64(a.cfg.Redraw)) }
	stamp, _ := stampOf(a.cfg.PeersFile)
	apply := func(why string) {
		d := pinglist.Draw{Seed: a.cfg.Seed, Period: period()}
		peers, skipped, err := Pinglist(all, a.cfg.Self, a.cfg.Topology, a.cfg.K, d)
		if err != nil {
			a.logf("pinglist: %v (keeping the one before)", err)
			return
		}
		list := make([]probe.Peer, len(peers))
		for i, p := range peers {
			list[i] = probe.Peer{Peer: p}
		}
		if err := a.prober.SetPeers(list, a.cfg.Now()); err != nil {
			a.logf("pinglist: %v (keeping the one before)", err)
			return
		}
		if why != "" {
			note := ""
			if skipped > 0 {
				note = fmt.Sprintf("; %d peers' hosts are not in the topology, not probed", skipped)
			}
			a.logf("%s: probing %d peers at %.3g a second each%s", why, len(peers), a.cfg.Probe.EffectiveRate(len(peers)), note)
		}
	}
	apply("peers")
	reread := func(why string) {
		got, err := a.loadPeers(ctx)
		if err != nil {
			a.logf("%s: %v (keeping the %d peers read before)", why, err, len(all))
			return
		}
		all = got
		apply(why)
	}
	lastPeriod := period()
	fileTick := time.NewTicker(FileCheckEvery)
	defer fileTick.Stop()
	changed, joined := a.watchSource(ctx)
	defer joined()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			reread(a.cfg.Source.String() + " changed")
		case <-a.cfg.Reload:
			stamp, _ = stampOf(a.cfg.PeersFile)
			reread("SIGHUP")
		case <-fileTick.C:
			if a.cfg.PeersFile != "" {
				if s, err := stampOf(a.cfg.PeersFile); err == nil && s != stamp {
					stamp = s
					reread(a.cfg.PeersFile + " changed")
				}
			}
			if p := period(); p != lastPeriod {
				lastPeriod = p
				if a.cfg.SlurmPort != 0 {
					reread("Slurm's node list")
				} else if a.cfg.Topology != nil && a.cfg.K > 0 {
					apply("") // a new draw of remote peers, not worth a line each period
				}
			}
		}
	}
}

// watchSource starts the source's watch; joined ends it. changed is nil
// (never ready) without a source.
func (a *Agent) watchSource(ctx context.Context) (changed <-chan struct{}, joined func()) {
	if a.cfg.Source == nil {
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	ch, done := make(chan struct{}, 1), make(chan struct{})
	go func() { defer close(done); a.cfg.Source.Watch(ctx, ch) }()
	return ch, func() { cancel(); <-done }
}

// resolveLoop fetches the address of every peer not resolved yet, and
// again of every peer that stopped answering (its agent may have
// restarted with another QP), with a backoff per peer.
func (a *Agent) resolveLoop(ctx context.Context) {
	tick := time.NewTicker(ResolveEvery)
	defer tick.Stop()
	for {
		a.resolvePass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (a *Agent) resolvePass(ctx context.Context) {
	if err := a.prober.TakeSendError(); err != nil && err.Error() != a.sendErr {
		a.sendErr = err.Error()
		a.logf("a probe did not leave: %v", err)
	}
	if c := a.counts(); c.LastBad != "" && c.LastBad != a.badWhy {
		a.badWhy = c.LastBad
		a.logf("a bad datagram (%d so far): %s", c.Bad, c.LastBad)
	}
	a.trMu.Lock()
	tr := a.tr
	a.trMu.Unlock()
	if tr == nil {
		return
	}
	now := time.Now()
	var due []probe.PeerState
	listed := map[string]bool{}
	for _, ps := range a.prober.Peers() {
		listed[ps.Addr] = true
		if ps.Resolved && ps.LostInARow < a.cfg.Probe.Reach.LostInARow {
			delete(a.backoff, ps.Addr)
			continue
		}
		if b, ok := a.backoff[ps.Addr]; ok && now.Before(b.next) {
			continue
		}
		due = append(due, ps)
	}
	for addr := range a.backoff {
		if !listed[addr] {
			delete(a.backoff, addr)
		}
	}
	type result struct {
		ps  probe.PeerState
		err error
	}
	work := make(chan probe.PeerState)
	results := make(chan result, len(due))
	var wg sync.WaitGroup
	for range min(fetchWorkers, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ps := range work {
				results <- result{ps, a.resolve(ctx, tr, ps)}
			}
		}()
	}
	for _, ps := range due {
		work <- ps
	}
	close(work)
	wg.Wait()
	close(results)
	for r := range results {
		b := a.backoff[r.ps.Addr]
		if r.err == nil {
			// Resolved, or the same address again: look again after the
			// shortest wait if it keeps not answering.
			b.wait, b.lastErr = ResolveEvery, ""
		} else {
			if msg := r.err.Error(); msg != b.lastErr {
				// Once per error, not once per try: a peer that refuses
				// connections and then the token shows both.
				a.logf("peer %s: %v (asking again with a backoff up to %v)", r.ps.Addr, r.err, maxBackoff)
				b.lastErr = msg
			}
			b.wait = min(max(2*b.wait, ResolveEvery), maxBackoff)
		}
		b.next = now.Add(b.wait)
		a.backoff[r.ps.Addr] = b
	}
}

// resolve fetches a peer's record and gives the prober a destination made
// on the current transport: resolvePass asks only for peers unresolved or
// not answering, and a destination made on a device since closed fails,
// even when the record is unchanged.
func (a *Agent) resolve(ctx context.Context, tr Transport, ps probe.PeerState) error {
	fctx, cancel := context.WithTimeout(ctx, FetchTimeout)
	defer cancel()
	rec, err := exchange.Fetch(fctx, a.client, ps.Addr, a.cfg.Token)
	if err != nil {
		return err
	}
	d, err := tr.Resolve(rec)
	if err != nil {
		return fmt.Errorf("address handle: %w", err)
	}
	return a.prober.SetDest(ps.Addr, d)
}

// DeviceError: the RDMA device did not open at the start (no RDMA in the
// kernel, a driver still loading, a device being reset). The agent could
// not measure, which is not bad input: its exit status tells them apart.
type DeviceError struct{ Err error }

func (e *DeviceError) Error() string { return e.Err.Error() }
func (e *DeviceError) Unwrap() error { return e.Err }
