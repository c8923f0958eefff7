package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/rdmabench/rdmabench/internal/intlist"
	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

// RunLoopback runs both sides in this process: a one-client server on a
// loopback port, and the client against it. The two sides may use one device
// or two (peer). Their loop threads get disjoint CPUs: the client the first
// half of its list (--cpus, or the NIC's NUMA node), the server the rest,
// unless peer.CPUs says otherwise; a plan that would still put two spinning
// loops on one CPU is refused unless it allows sharing.
func RunLoopback(ctx context.Context, cfg ClientConfig, peer DeviceConfig) (*results.Run, error) {
	if peer.CPUs == nil {
		dev := cfg.Device.Device
		if dev == "" {
			dev, _ = verbs.DefaultDevice() // openSide reports a missing device
		}
		if list := resolveCPUs(cfg.Device, dev); list != nil {
			cfg.Device.CPUs, peer.CPUs = splitCPUs(list)
		}
	}
	cfg.peerCPUs = peer.CPUs
	cfg.peerSamePort = (peer.Device == "" || peer.Device == cfg.Device.Device) && peer.Port == cfg.Device.Port
	if shared := intersect(cfg.Device.CPUs, peer.CPUs); len(shared) > 0 && !cfg.Plan.ShareCPUs {
		return nil, fmt.Errorf("both sides' loops would busy-poll CPUs %s: give --cpus at least two CPUs (split between the sides) or --peer-cpus, or allow it with --share-cpus", intlist.Comma(shared))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loopback control port: %w", err)
	}
	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	peer.Warnings = cfg.Device.Warnings
	srvLog := &serverLog{}
	go func() {
		served <- Serve(srvCtx, ln, ServerConfig{Device: peer, MaxClients: 1, Log: srvLog, Budget: Budget{Loopback: true}})
	}()
	cfg.Addr = ln.Addr().String()
	cfg.Token = nil // the port is ours, for this run only
	run, err := RunClient(ctx, cfg)
	cancel()
	<-served
	// Our own server closed the connection: say why it did, or the
	// client's "closed the control connection" names neither who nor why.
	if why := srvLog.failure(); why != "" && errors.Is(err, proto.ErrPeerGone) {
		err = fmt.Errorf("%w (the loopback server's side ended: %s)", err, why)
	}
	return run, err
}

// serverLog keeps what the loopback server logged about its one client.
type serverLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *serverLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for line := range strings.Lines(string(p)) {
		if len(l.lines) < 16 { // one client: a line or two
			l.lines = append(l.lines, strings.TrimSpace(line))
		}
	}
	return len(p), nil
}

// failure is the reason the server logged for ending its client's session,
// without the "client ADDR: " prefix; "" when it logged none.
func (l *serverLog) failure() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		_, why, ok := strings.Cut(line, ": ")
		if ok && strings.HasPrefix(line, "client ") && why != "done" {
			return why
		}
	}
	return ""
}

func intersect(a, b []int) []int {
	var out []int
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
