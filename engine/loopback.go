package engine

import (
	"context"
	"fmt"
	"net"
)

// RunLoopback runs both sides in this process: a one-client server on a
// loopback port, and the client against it. The two sides may use one device
// or two (peer).
func RunLoopback(ctx context.Context, cfg ClientConfig, peer DeviceConfig) (*Run, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("loopback control port: %w", err)
	}
	srvCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- Serve(srvCtx, ln, ServerConfig{Device: peer, MaxClients: 1}) }()
	cfg.Addr = ln.Addr().String()
	run, err := RunClient(ctx, cfg)
	cancel()
	<-served
	return run, err
}
