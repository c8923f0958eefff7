package engine

import (
	"context"
	"github.com/rdmabench/rdmabench/proto"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/internal/hwtest"
	rbplan "github.com/rdmabench/rdmabench/plan"
)

func TestMain(m *testing.M) { hwtest.Main(m) }

func needRDMA(t testing.TB) { hwtest.NeedRDMA(t) }

// A server that accepts the plan, connects its QPs, then vanishes when the
// client asks for the first measurement: the client's own receive loops (-b
// send) are running by then. RunClient must stop and join them before it
// returns and frees the side, on this path as on every other.
func TestClientJoinsLoopsWhenTheServerVanishes(t *testing.T) {
	needRDMA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan error, 1)
	go func() { served <- vanishingServer(ln) }()
	plan := rbplan.DefaultPlan(SendBW)
	plan.Bidirectional, plan.Iterations, plan.Warmup, plan.Timeout = true, 1000, 0, 20*time.Second
	start := time.Now()
	_, err = RunClient(context.Background(), ClientConfig{Addr: ln.Addr().String(), Plan: plan, Device: DeviceConfig{GIDIndex: -1}})
	if n := csrc.Running(); n != 0 {
		t.Fatalf("%d loops still running after RunClient returned (its side is freed)", n)
	}
	if err == nil || !strings.Contains(err.Error(), "closed the control connection") {
		t.Errorf("err = %v", err)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("took %v", el)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

func vanishingServer(ln net.Listener) error {
	nc, err := ln.Accept()
	if err != nil {
		return err
	}
	conn := proto.NewConn(nc)
	defer conn.Close()
	if _, err := conn.ReadGreeting(proto.HandshakeTimeout); err != nil {
		return err
	}
	if err := conn.SendGreeting(false, proto.HandshakeTimeout); err != nil {
		return err
	}
	m, err := conn.Expect(proto.KindPlan, proto.HandshakeTimeout)
	if err != nil {
		return err
	}
	s, err := openSide(DeviceConfig{GIDIndex: -1}, *m.Plan, nil, m.Plan.PeerMemory)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.connect(m.Endpoints, *m.Plan); err != nil {
		return err
	}
	local, err := s.endpoints()
	if err != nil {
		return err
	}
	if err := conn.Send(proto.Message{Type: proto.KindAccept, Endpoints: local}, proto.HandshakeTimeout); err != nil {
		return err
	}
	_, err = conn.Expect(proto.KindRun, proto.HandshakeTimeout)
	return err // and close without "ready"
}

// A client that asks for a -b measurement and vanishes once the server says
// ready: the server stops and joins its loops (receive and send) before it
// frees anything, and serves the next client.
func TestServerJoinsLoopsWhenTheClientVanishes(t *testing.T) {
	needRDMA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var log strings.Builder
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, ServerConfig{Device: DeviceConfig{GIDIndex: -1}, Log: &log, MaxClients: 1})
	}()
	plan := rbplan.DefaultPlan(SendBW)
	plan.Bidirectional, plan.Iterations, plan.Warmup = true, 100000, 0
	c, s := dialPlan(t, ln.Addr().String(), plan)
	defer s.Close()
	if err := c.Send(proto.Message{Type: proto.KindRun, Size: plan.Sizes[0], QPs: 1, Iters: plan.Iterations}, proto.HandshakeTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Expect(proto.KindReady, proto.HandshakeTimeout); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server's loops run
	c.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not end after its client vanished")
	}
	if n := csrc.Running(); n != 0 {
		t.Errorf("%d loops still running after Serve returned", n)
	}
	if !strings.Contains(log.String(), "closed the control connection") {
		t.Errorf("server log: %s", log.String())
	}
}

// dialPlan connects to a server as a client and gets the plan accepted.
func dialPlan(t *testing.T, addr string, plan Plan) (*proto.Conn, *side) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := proto.NewConn(nc)
	if err := c.SendGreeting(false, proto.HandshakeTimeout); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadGreeting(proto.HandshakeTimeout); err != nil {
		t.Fatal(err)
	}
	s, err := openSide(DeviceConfig{GIDIndex: -1}, plan, nil, plan.Memory)
	if err != nil {
		t.Fatal(err)
	}
	local, err := s.endpoints()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Send(proto.Message{Type: proto.KindPlan, Plan: &plan, Endpoints: local}, proto.HandshakeTimeout); err != nil {
		t.Fatal(err)
	}
	acc, err := c.Expect(proto.KindAccept, proto.HandshakeTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.connect(acc.Endpoints, plan); err != nil {
		t.Fatal(err)
	}
	return c, s
}

// A real run gets through while another connection sits idle in its
// handshake, and once the run is the last (MaxClients) the idle one is
// dropped at once rather than at its handshake timeout.
func TestServeRunsWhileAConnectionIdles(t *testing.T) {
	needRDMA(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	served := make(chan error, 1)
	const hsTimeout = 60 * time.Second
	go func() {
		served <- Serve(context.Background(), ln, ServerConfig{Device: DeviceConfig{GIDIndex: -1}, Log: &log, MaxClients: 1, HandshakeTimeout: hsTimeout})
	}()
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	start := time.Now()
	plan := rbplan.DefaultPlan(WriteBW)
	plan.Iterations, plan.Warmup, plan.Sizes = 200, 0, []int{1024}
	run, err := RunClient(context.Background(), ClientConfig{Addr: ln.Addr().String(), Plan: plan, Device: DeviceConfig{GIDIndex: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Results) != 1 {
		t.Errorf("%d results", len(run.Results))
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hsTimeout / 2):
		t.Fatalf("Serve still waits on the idle connection; log:\n%s", log.String())
	}
	if took := time.Since(start); took > hsTimeout/2 {
		t.Errorf("run and shutdown took %v, the idle connection's timeout is %v", took, hsTimeout)
	}
	if !strings.Contains(log.String(), "dropped: the server is stopping") {
		t.Errorf("server log:\n%s", log.String())
	}
}
