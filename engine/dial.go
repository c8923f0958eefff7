package engine

// The client's connection to a server: the handshake, the plan's
// request, and the errors of dialing.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/rdmabench/rdmabench/auth"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/proto"
)

// requestPlan sends the plan and returns the server's accept; reuse asks
// to run it on the last plan's QPs (local are theirs). A server busy with
// another client first says how long it may keep us waiting.
func requestPlan(ctx context.Context, conn *proto.Conn, cfg ClientConfig, local []proto.Endpoint, loads [][]proto.Endpoint, reuse bool) (proto.Message, error) {
	// Ctrl-C ends the wait, which may be long when queued.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	m := proto.Message{Type: proto.KindPlan, Plan: &cfg.Plan, Endpoints: local, LoadEndpoints: loads, Also: cfg.Also, Reuse: reuse}
	if err := conn.Send(m, proto.HandshakeTimeout); err != nil {
		return proto.Message{}, err
	}
	// The server opens the device, registers memory and creates QPs before
	// it accepts: seconds for a large plan, so the run's own deadline.
	setup := max(proto.HandshakeTimeout, cfg.Plan.Timeout)
	acc, err := conn.Recv(setup)
	if err == nil && acc.Type == proto.KindQueued {
		if w := cfg.Device.Warnings; w != nil {
			fmt.Fprintf(w, "rdmabench: server %s is running another client's plan; waiting up to %v for our turn\n", cfg.Addr, acc.Wait)
		}
		acc, err = conn.Recv(min(acc.Wait, rbplan.MaxDuration) + setup)
	}
	if err == nil && acc.Type != proto.KindAccept {
		err = fmt.Errorf("protocol error: expected %q, got %q", "accept", acc.Type)
	}
	if ctx.Err() != nil {
		return proto.Message{}, fmt.Errorf("%w while waiting for the server to accept the plan", ErrInterrupted)
	}
	if err != nil {
		return proto.Message{}, fmt.Errorf("server %s refused the plan: %w", cfg.Addr, err)
	}
	return acc, nil
}

// clientHandshake greets the server and, when it requires one, proves the
// token; each failure is one line that says what to do.
func clientHandshake(conn *proto.Conn, token []byte) error {
	deadline := time.Now().Add(proto.HandshakeTimeout)
	if err := conn.SendGreeting(false, proto.HandshakeTimeout); err != nil {
		return err
	}
	required, err := conn.ReadGreeting(time.Until(deadline))
	if err != nil {
		return err
	}
	switch {
	case required && token == nil:
		return errors.New("the server requires a token: --token-file or RDMABENCH_TOKEN")
	case !required && token != nil:
		// We cannot tell it from anything else listening on the port.
		return errors.New("the server requires no token but this client has one: give serve the same --token-file (or unset RDMABENCH_TOKEN here)")
	case !required:
		return nil
	}
	conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	err = auth.Respond(conn.ReadWriter(), token)
	var ne net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, auth.ErrDenied):
		return errors.New("the server does not hold our token (a stale server, or another token?)")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return errors.New("the server refused our token: --token-file or RDMABENCH_TOKEN differs from the server's")
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("no token exchange within %v", proto.HandshakeTimeout)
	}
	return err
}

// onCancel runs f on its own goroutine when ctx ends, as context.AfterFunc
// does; but the function it returns also waits for an f already started,
// so that what f touches (a stop flag in C memory) may be freed right after
// it returns. It may be called more than once.
func onCancel(ctx context.Context, f func()) (stop func()) {
	ran := make(chan struct{})
	stopAfter := context.AfterFunc(ctx, func() {
		defer close(ran)
		f()
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			if !stopAfter() {
				<-ran
			}
		})
	}
}

// dialError says what a failed connect means. A timeout is the one a
// server process cannot cause: the kernel completes the TCP handshake for
// a listening socket whatever the server is doing (a busy server accepts
// and says "busy"; a stopped one leaves connections queued), so no answer
// in time means the host, its kernel or the network in between does not
// answer. The run's own deadline or Ctrl-C (ctx ended) is not that.
func dialError(ctx context.Context, addr string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil {
		return fmt.Errorf("connect to server %s: %w (no TCP answer within %v: the host, its kernel or the network does not answer; a running server, even a busy one, accepts at once)", addr, err, proto.HandshakeTimeout)
	}
	return fmt.Errorf("connect to server %s: %w", addr, err)
}
