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
	if m.Plan == nil {
		return refuse(conn, errors.New("plan message without a plan"))
	}
	plan := *m.Plan
	if err := plan.Validate(); err != nil {
		return refuse(conn, fmt.Errorf("invalid plan: %w", err))
	}
	if len(m.Endpoints) != plan.MaxQPs() {
		return refuse(conn, fmt.Errorf("plan needs %d QPs, the client offers %d", plan.MaxQPs(), len(m.Endpoints)))
	}
	s, err := openSide(cfg.Device, plan)
	if err != nil {
		return refuse(conn, err)
	}
	defer s.Close()
	if err := s.connect(m.Endpoints, plan); err != nil {
		return refuse(conn, err)
	}
	local, err := s.endpoints()
	if err != nil {
		return refuse(conn, err)
	}
	if err := conn.Send(Message{Type: "accept", Endpoints: local}, HandshakeTimeout); err != nil {
		return err
	}
	stop := csrc.NewFlag()
	defer stop.Free()
	sr := &serverRun{plan: plan, s: s, conn: conn, remote: m.Endpoints, stop: stop}
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
	remote []Endpoint
	stop   *csrc.Flag
}

// step serves one measurement: start the loops the test needs on this side
// (receives, ping-pong responders, and for -b the sending direction), say
// ready, wait for the client's "done", report this side's figures.
func (sr *serverRun) step(ctx context.Context, m Message) error {
	plan := sr.plan
	if m.Size < 1 || m.Size > plan.MaxSize() || m.QPs < 1 || m.QPs > len(sr.s.qps) || m.Iters > MaxIterations+plan.Warmup {
		return refuse(sr.conn, fmt.Errorf("run request out of range: size %d, %d QPs, %d iterations", m.Size, m.QPs, m.Iters))
	}
	st := &step{plan: plan, s: sr.s, remote: sr.remote, size: m.Size, nqp: m.QPs, stop: sr.stop}
	sr.stop.Clear()
	var rl, rs *passiveLoops
	var err error
	switch {
	case plan.Test.IsLatency():
		if _, _, pingPong := latencyKinds(plan.Test); pingPong {
			st.clearTags()
			rs, err = st.startResponders(m.Iters)
		}
	case receives(plan):
		rl, err = st.startRecv(m.Iters)
	case plan.Verify && plan.Test.Op() == "read":
		st.fillReadTargets()
	}
	if err != nil {
		return refuse(sr.conn, err)
	}
	stopOnCancel := context.AfterFunc(ctx, sr.stop.Set)
	defer stopOnCancel()
	if err := sr.conn.Send(Message{Type: "ready"}, HandshakeTimeout); err != nil {
		sr.stop.Set()
		return err
	}
	cpu0 := readCPUClock()
	fig := &SideFigures{}
	var sent chan bwOutcome
	if plan.Bidirectional {
		sent = make(chan bwOutcome, 1)
		go func() { sent <- st.postBW(nil) }()
	}
	done, err := sr.conn.expect("done", plan.Timeout+plan.Duration+HandshakeTimeout)
	if err != nil {
		sr.stop.Set() // the client died or misbehaved: end our loops now
		if rl != nil {
			rl.finish(0)
		}
		if rs != nil {
			rs.finish(0)
		}
		if sent != nil {
			<-sent
		}
		return fmt.Errorf("size %d: %w", m.Size, err)
	}
	verdict := Message{Type: "result", Side: fig}
	var errs []error
	if sent != nil {
		out := <-sent
		fig.Messages, fig.Seconds, fig.PeakBps = out.messages, out.seconds, out.peakBps
		errs = append(errs, out.err)
		verdict.Counts = out.last // the client checks what our writes left
		if plan.Verify && plan.Test.Op() == "read" {
			fig.BadBytes += st.checkReads(out.last)
		}
	}
	if rl != nil {
		out, err := rl.finish(time.Second)
		fig.BadBytes += out.badBytes
		if !plan.Bidirectional {
			fig.Messages = out.received
		}
		errs = append(errs, err)
	}
	if rs != nil {
		_, err := rs.finish(time.Second)
		errs = append(errs, err)
	}
	if plan.Verify && plan.Test.Op() == "write" {
		fig.BadBytes += st.checkWrites(done.Counts)
	}
	fig.CPU = cpu0.since()
	if err := errors.Join(errs...); err != nil {
		verdict.Error = "server: " + err.Error()
	}
	return sr.conn.Send(verdict, HandshakeTimeout)
}
