package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
)

// ServerConfig is the server side: which device it offers, where it logs.
type ServerConfig struct {
	Device DeviceConfig
	Log    io.Writer // one line per client and per failure; nil discards
	// MaxClients ends Serve after that many clients; 0 serves forever.
	MaxClients int
}

// Serve accepts clients one after another and runs the plan each sends. A
// client that fails, dies or speaks garbage is logged and the next served.
func Serve(ctx context.Context, ln net.Listener, cfg ServerConfig) error {
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	for served := 0; cfg.MaxClients == 0 || served < cfg.MaxClients; served++ {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		conn := newConn(nc)
		peer := conn.RemoteAddr()
		if err := serveClient(ctx, conn, cfg); err != nil {
			fmt.Fprintf(logw, "client %s: %v\n", peer, err)
		} else {
			fmt.Fprintf(logw, "client %s: done\n", peer)
		}
		conn.Close()
	}
	return nil
}

func serveClient(ctx context.Context, conn *Conn, cfg ServerConfig) error {
	if err := conn.readGreeting(); err != nil {
		if errors.Is(err, ErrVersion) {
			_ = conn.sendGreeting() // let the client see our version too
		}
		return err
	}
	if err := conn.sendGreeting(); err != nil {
		return err
	}
	m, err := conn.expect("plan", HandshakeTimeout)
	if err != nil {
		return err
	}
	if m.Plan == nil || m.Endpoint == nil {
		return refuse(conn, errors.New("plan message without a plan or endpoint"))
	}
	plan := *m.Plan
	if err := plan.Validate(); err != nil {
		return refuse(conn, fmt.Errorf("invalid plan: %w", err))
	}
	if err := m.Endpoint.validate(); err != nil {
		return refuse(conn, fmt.Errorf("invalid endpoint: %w", err))
	}
	s, err := openSide(cfg.Device, plan)
	if err != nil {
		return refuse(conn, err)
	}
	defer s.Close()
	if err := s.connect(*m.Endpoint, plan); err != nil {
		return refuse(conn, err)
	}
	local, err := s.endpoint()
	if err != nil {
		return refuse(conn, err)
	}
	if err := conn.Send(Message{Type: "accept", Endpoint: &local}, HandshakeTimeout); err != nil {
		return err
	}
	stop := csrc.NewStopFlag()
	defer stop.Free()
	ready := csrc.NewStopFlag()
	defer ready.Free()
	sr := &serverRun{plan: plan, s: s, conn: conn, remote: *m.Endpoint, stop: stop, ready: ready}
	for {
		// Between sizes the client only thinks; a long silence means it died.
		m, err := conn.Recv(plan.Timeout + plan.Duration + HandshakeTimeout)
		if err != nil {
			return err
		}
		switch m.Type {
		case "bye":
			return nil
		case "run":
			if err := sr.step(ctx, m); err != nil {
				return err
			}
		default:
			return refuse(conn, fmt.Errorf("unexpected %q message", m.Type))
		}
	}
}

// refuse tells the client why, then returns the error for the log.
func refuse(conn *Conn, err error) error {
	_ = conn.Send(Message{Type: "error", Error: err.Error()}, HandshakeTimeout)
	return err
}

type serverRun struct {
	plan   Plan
	s      *side
	conn   *Conn
	remote Endpoint
	stop   *csrc.StopFlag
	ready  *csrc.StopFlag
}

// step serves one message size: start the responder loop if the test has
// one, say ready, wait for the client's "done", report.
func (sr *serverRun) step(ctx context.Context, m Message) error {
	if m.Size < 1 || m.Size > sr.s.region || m.Iters > MaxIterations+sr.plan.Warmup {
		return refuse(sr.conn, fmt.Errorf("run request out of range: size %d, %d iterations", m.Size, m.Iters))
	}
	kind, active := responderKind(sr.plan.Test)
	sr.stop.Clear()
	sr.ready.Clear()
	loopDone := make(chan csrc.Result, 1)
	if active {
		p := sr.s.loopParams(sr.plan, m.Size, sr.remote, sr.stop)
		p.Iterations, p.Deadline, p.Prepost, p.Ready = m.Iters, stepDeadline(sr.plan), true, sr.ready
		go func() { loopDone <- csrc.Run(kind, p) }()
		if err := sr.waitReady(loopDone); err != nil {
			return refuse(sr.conn, err)
		}
	}
	stopOnCancel := context.AfterFunc(ctx, sr.stop.Set)
	defer stopOnCancel()
	if err := sr.conn.Send(Message{Type: "ready"}, HandshakeTimeout); err != nil {
		sr.stop.Set()
		return err
	}
	if _, err := sr.conn.expect("done", sr.plan.Timeout+sr.plan.Duration+HandshakeTimeout); err != nil {
		sr.stop.Set() // the client died or misbehaved: end our loop now
		if active {
			<-loopDone
		}
		return fmt.Errorf("size %d: %w", m.Size, err)
	}
	verdict := Message{Type: "result"}
	if active {
		r := sr.finishLoop(loopDone, m.Iters)
		verdict.Count = r.Completed
		if r.Status != csrc.OK {
			verdict.Error = r.Err("server " + string(sr.plan.Test)).Error()
		}
	}
	return sr.conn.Send(verdict, HandshakeTimeout)
}

// waitReady waits until the loop has posted its receives, so the client's
// first message finds one.
func (sr *serverRun) waitReady(loopDone chan csrc.Result) error {
	deadline := time.Now().Add(HandshakeTimeout)
	for !sr.ready.IsSet() {
		select {
		case r := <-loopDone:
			return r.Err("server loop")
		default:
		}
		if time.Now().After(deadline) {
			sr.stop.Set()
			<-loopDone
			return errors.New("server loop did not start")
		}
		time.Sleep(50 * time.Microsecond)
	}
	return nil
}

// finishLoop collects the responder's result after the client said done. In
// iteration mode the loop ends by itself once it has seen every message;
// give it a moment, then stop it (duration mode, or messages lost).
func (sr *serverRun) finishLoop(loopDone chan csrc.Result, iters uint64) csrc.Result {
	if iters > 0 {
		select {
		case r := <-loopDone:
			return r
		case <-time.After(time.Second):
		}
	}
	sr.stop.Set()
	r := <-loopDone
	if r.Status == csrc.Stopped && iters == 0 {
		r.Status = csrc.OK
	}
	return r
}
