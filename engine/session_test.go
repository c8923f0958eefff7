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
func listenLocal(t testing.TB) net.Listener {
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
		next, held, err := servePlan(ctx, conn, sv.cfg, h, nil)
		held.close()
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

// qpCounts is the QPs sides made so far: clients', servers'.
func qpCounts() [2]int64 { return [2]int64{qpsCreated[0].Load(), qpsCreated[1].Load()} }

// A session's plans that name the plans to follow (ClientConfig.Also) run
// on one set of QPs on both ends when the next plan fits them, and on QPs
// of their own when it does not: a mesh direction's write-bw, then its
// send-lat, make one QP on each end. Each plan measures what it measures
// alone, and nothing is left open after the session, however it ends.
func TestSessionReusesQPs(t *testing.T) {
	needRDMA(t)
	bw, lat := sessionPlans()[0], sessionPlans()[1]
	lat2 := lat // two QPs: not write-bw's one
	lat2.QPs = []int{2}
	node := 0
	latNode := lat // the server's buffer elsewhere: only the server's side misfits
	latNode.PeerMemory.Node = &node
	bwVerify := bw
	bwVerify.Verify = true
	steps := func(ps ...Plan) []ClientConfig {
		var cfgs []ClientConfig
		for i, p := range ps {
			cfgs = append(cfgs, ClientConfig{Plan: p, Device: DeviceConfig{GIDIndex: -1}, Also: ps[i+1:]})
		}
		return cfgs
	}
	for _, tt := range []struct {
		name string
		runs []ClientConfig
		qps  [2]int64 // made by the clients, by the servers
		drop bool     // the client vanishes after its plans, without a bye
	}{
		{"write-bw then send-lat", steps(bw, lat), [2]int64{1, 1}, false},
		{"and the connection dropped", steps(bw, lat), [2]int64{1, 1}, true},
		{"three plans", steps(bw, lat, bw), [2]int64{1, 1}, false},
		{"plans not named to follow", []ClientConfig{{Plan: bw, Device: DeviceConfig{GIDIndex: -1}}, {Plan: lat, Device: DeviceConfig{GIDIndex: -1}}}, [2]int64{2, 2}, false},
		{"a plan that does not fit", steps(bw, lat2), [2]int64{3, 3}, false},
		{"the server's side does not fit", steps(bw, latNode), [2]int64{2, 2}, false},
		{"--verify", steps(bw, bwVerify), [2]int64{2, 2}, false},
		{"kept for a plan that does not come", steps(bw, lat)[:1], [2]int64{1, 1}, false},
		{"kept for a plan that does not come, dropped", steps(bw, lat)[:1], [2]int64{1, 1}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ln, log := serveSessions(t)
			ss := dialSession(t, ln.Addr().String())
			before := qpCounts()
			for _, cfg := range tt.runs {
				run, err := ss.Run(context.Background(), cfg)
				if err != nil {
					t.Fatalf("%s: %v", cfg.Plan.Test, err)
				}
				checkAlone(t, cfg.Plan, run)
			}
			after := qpCounts()
			if got := [2]int64{after[0] - before[0], after[1] - before[1]}; got != tt.qps {
				t.Errorf("QPs made by the client, the server: %v, want %v", got, tt.qps)
			}
			if tt.drop {
				ss.conn.Close()
			}
			ss.Close()
			waitNoLeaks(t)
			if strings.Contains(log.String(), "unexpected") || strings.Contains(log.String(), "refused") {
				t.Errorf("server log:\n%s", log.String())
			}
		})
	}
}

// checkAlone checks that a plan's run in a session measured what the plan
// measures alone: one result of its size, QPs and iterations, of its kind.
func checkAlone(t *testing.T, plan Plan, run *results.Run) {
	t.Helper()
	if len(run.Results) != 1 {
		t.Fatalf("%s: %d results", plan.Test, len(run.Results))
	}
	r := run.Results[0]
	if r.Size != plan.Sizes[0] || r.QPs != plan.MaxQPs() || (r.Lat != nil) != plan.Test.IsLatency() || (r.BWAvgGbps > 0) == plan.Test.IsLatency() {
		t.Errorf("%s: %+v", plan.Test, r)
	}
	if want := plan.Iterations * uint64(plan.MaxQPs()); plan.Test.IsLatency() && r.Iterations != want {
		t.Errorf("%s: %d iterations, want %d", plan.Test, r.Iterations, want)
	}
	if run.TxDepth != plan.TxDepth || run.Inline != plan.Inline {
		t.Errorf("%s: tx depth %d, inline %d; the plan's %d, %d", plan.Test, run.TxDepth, run.Inline, plan.TxDepth, plan.Inline)
	}
}
