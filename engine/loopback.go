package engine

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/rdmabench/rdmabench/results"
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
			dev, _ = defaultDevice() // openSide reports a missing device
		}
		if list := resolveCPUs(cfg.Device, dev); list != nil {
			cfg.Device.CPUs, peer.CPUs = splitCPUs(list)
		}
	}
	cfg.peerCPUs = peer.CPUs
	cfg.peerSamePort = (peer.Device == "" || peer.Device == cfg.Device.Device) && peer.Port == cfg.Device.Port
	if shared := intersect(cfg.Device.CPUs, peer.CPUs); len(shared) > 0 && !cfg.Plan.ShareCPUs {
		return nil, fmt.Errorf("both sides' loops would busy-poll CPUs %s: give --cpus at least two CPUs (split between the sides) or --peer-cpus, or allow it with --share-cpus", intList(shared))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loopback control port: %w", err)
	}
	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	peer.Warnings = cfg.Device.Warnings
	go func() { served <- Serve(srvCtx, ln, ServerConfig{Device: peer, MaxClients: 1}) }()
	cfg.Addr = ln.Addr().String()
	cfg.Token = nil // the port is ours, for this run only
	run, err := RunClient(ctx, cfg)
	cancel()
	<-served
	return run, err
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
