package engine

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// listenLocal listens on a loopback port until the test ends.
func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// serveSessions runs Serve on a loopback port until the test ends.
func serveSessions(t *testing.T) (*countingListener, *strings.Builder) {
	t.Helper()
	cl := &countingListener{Listener: listenLocal(t)}
	ctx, cancel := context.WithCancel(context.Background())
	var log strings.Builder
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, cl, ServerConfig{Device: DeviceConfig{GIDIndex: -1}, Log: &log}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	})
	return cl, &log
}

// dialSession opens a session to addr, closed when the test ends.
func dialSession(t *testing.T, addr string) *Session {
	t.Helper()
	ss, err := Dial(context.Background(), addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	return ss
}

// sessionPlans are a mesh direction's two plans: write-bw, then send-lat.
func sessionPlans() []Plan {
	bw := rbplan.DefaultPlan(WriteBW)
	bw.Sizes, bw.Iterations, bw.Warmup = []int{4096}, 200, 10
	lat := rbplan.DefaultPlan(SendLat)
	lat.Sizes, lat.Iterations, lat.Warmup = []int{64}, 50, 5
	return []Plan{bw, lat, bw}
}

// Plans one after another over one session: one connection, each plan
// measured as a connection of its own measures it, nothing left open.
func TestSessionRunsPlansOverOneConnection(t *testing.T) {
	needRDMA(t)
	ln, log := serveSessions(t)
	ctx := context.Background()
	ss, err := Dial(ctx, ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var inSession []*results.Run
	for _, plan := range sessionPlans() {
		run, err := ss.Run(ctx, ClientConfig{Plan: plan, Device: DeviceConfig{GIDIndex: -1}})
		if err != nil {
			t.Fatalf("%s: %v", plan.Test, err)
		}
		inSession = append(inSession, run)
	}
	if err := ss.Close(); err != nil {
		t.Fatal(err)
	}
	// The session holds the server's device until its bye; then each plan
	// alone, a connection of its own.
	for i, plan := range sessionPlans() {
		alone, err := RunClient(ctx, ClientConfig{Addr: ln.Addr().String(), Plan: plan, Device: DeviceConfig{GIDIndex: -1}})
		if err != nil {
			t.Fatalf("%s alone: %v", plan.Test, err)
		}
		if len(inSession[i].Results) != 1 || len(alone.Results) != 1 {
			t.Fatalf("%s: %d results in the session, %d alone", plan.Test, len(inSession[i].Results), len(alone.Results))
		}
		// The fake device's figures are the host's timing; what each
		// measured (iterations, sizes, QPs, the kind of figure) is the same.
		r, a := inSession[i].Results[0], alone.Results[0]
		if r.Size != a.Size || r.QPs != a.QPs || r.Iterations != a.Iterations || (r.Lat == nil) != (a.Lat == nil) || (r.BWAvgGbps > 0) != (a.BWAvgGbps > 0) {
			t.Errorf("%s: in the session %+v, alone %+v", plan.Test, r, a)
		}
	}
	if n := ln.n.Load(); n != 1+int32(len(sessionPlans())) {
		t.Errorf("%d connections accepted, want one for the session and one a plan alone", n)
	}
	waitNoLeaks(t)
	if strings.Contains(log.String(), "unexpected") {
		t.Errorf("server log:\n%s", log.String())
	}
}

// waitNoLeaks waits for the server's side of a session to be closed.
func waitNoLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for verbs.LeakReport() != "" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := verbs.LeakReport(); r != "" {
		t.Errorf("left open: %s", r)
	}
	if n := csrc.Running(); n != 0 {
		t.Errorf("%d loops still running", n)
	}
}

// A server that serves a session's first plan, then vanishes: the next
// plan fails with one clear line, the session is broken after it (the
// next plan dials anew), and nothing is left open.
func TestSessionPeerVanishes(t *testing.T) {
	needRDMA(t)
	ln := listenLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plans := sessionPlans()
	served := make(chan error, 1)
	// One plan then gone: the session's server, cut after its first bye-less plan.
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			served <- err
			return
		}
		conn := proto.NewConn(nc)
		defer conn.Close()
		sv := newServer(ServerConfig{Device: DeviceConfig{GIDIndex: -1}})
		h, err := sv.handshake(conn)
		if err != nil {
			served <- err
			return
		}
		next, err := servePlan(ctx, conn, sv.cfg, h)
		if err == nil && next == nil {
			err = errors.New("no next plan")
		}
		served <- err
	}()
	ss, err := Dial(ctx, ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	if _, err := ss.Run(ctx, ClientConfig{Plan: plans[0], Device: DeviceConfig{GIDIndex: -1}}); err != nil {
		t.Fatal(err)
	}
	// The server reads our next plan and vanishes.
	_, err = ss.Run(ctx, ClientConfig{Plan: plans[1], Device: DeviceConfig{GIDIndex: -1}})
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "refused the plan") {
		t.Fatalf("the next plan after the server vanished: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	_, err = ss.Run(ctx, ClientConfig{Plan: plans[0], Device: DeviceConfig{GIDIndex: -1}})
	if !errors.Is(err, ErrSessionBroken) {
		t.Errorf("a plan after a failed one: %v, want %v", err, ErrSessionBroken)
	}
	waitNoLeaks(t)
}

// Ctrl-C (ctx) ends a session's plan at once and breaks the session; the
// server ends its side.
func TestSessionCancelled(t *testing.T) {
	needRDMA(t)
	ln, _ := serveSessions(t)
	ss := dialSession(t, ln.Addr().String())
	plan := sessionPlans()[0]
	plan.Iterations, plan.Duration = 0, 30*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := ss.Run(ctx, ClientConfig{Plan: plan, Device: DeviceConfig{GIDIndex: -1}})
	if !errors.Is(err, ErrInterrupted) {
		t.Errorf("err = %v, want %v", err, ErrInterrupted)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("took %v after Ctrl-C", el)
	}
	if _, err := ss.Run(context.Background(), ClientConfig{Plan: plan, Device: DeviceConfig{GIDIndex: -1}}); !errors.Is(err, ErrSessionBroken) {
		t.Errorf("after Ctrl-C: %v", err)
	}
	ss.Close()
	waitNoLeaks(t)
}

// A session that idles after a plan is ended by the server within its
// bound (a step and a handshake), its side closed.
func TestSessionIdleEnds(t *testing.T) {
	needRDMA(t)
	saved := proto.HandshakeTimeout
	proto.HandshakeTimeout = 300 * time.Millisecond
	defer func() { proto.HandshakeTimeout = saved }()
	ln, log := serveSessions(t)
	ss := dialSession(t, ln.Addr().String())
	plan := sessionPlans()[1]
	plan.Timeout = time.Second // the server's wait for the next message
	if _, err := ss.Run(context.Background(), ClientConfig{Plan: plan, Device: DeviceConfig{GIDIndex: -1}}); err != nil {
		t.Fatal(err)
	}
	bound := StepTime(plan) + proto.HandshakeTimeout
	time.Sleep(bound + time.Second)
	waitNoLeaks(t)
	if !strings.Contains(log.String(), "sent nothing for") {
		t.Errorf("server log:\n%s", log.String())
	}
	if _, err := ss.Run(context.Background(), ClientConfig{Plan: plan, Device: DeviceConfig{GIDIndex: -1}}); err == nil {
		t.Error("a plan over a session the server ended passed")
	}
}

// A plan whose side cannot be opened (no such device) fails with the
// device's error and leaves nothing open. openPlanSides' cleanup once
// closed a nil planSides here: a SIGSEGV in the rxe guest's
// TestE2ELoopbackSplitsCPUs, where the CPUs were refused.
func TestSessionSideFailsCleanly(t *testing.T) {
	needRDMA(t)
	ln, _ := serveSessions(t)
	ss := dialSession(t, ln.Addr().String())
	_, err := ss.Run(context.Background(), ClientConfig{Device: DeviceConfig{Device: "nosuch0", GIDIndex: -1}, Plan: sessionPlans()[0], Mode: "client"})
	if err == nil || !strings.Contains(err.Error(), "nosuch0") {
		t.Fatalf("no such device: err %v", err)
	}
}
