package engine

import (
	"context"
	"strings"
	"testing"

	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/verbs"
)

// A client and a server that keep their devices (a mesh rank's two roles)
// open each once, register one buffer per kind of access (a write test's
// lets the peer write it, a send test's does not), and reuse them for the
// plans of two sessions, as for a second partner. Between plans only the
// device, its PD and the buffers stay open; Close frees them.
func TestKeptAcrossSessions(t *testing.T) {
	needRDMA(t)
	srvKept, cliKept := NewKept(), NewKept()
	defer cliKept.Close()
	ln := listenLocal(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- Serve(ctx, ln, ServerConfig{Device: DeviceConfig{GIDIndex: -1, Kept: srvKept}})
	}()
	plans := sessionPlans() // write, send, write
	for range 2 {
		ss := dialSession(t, ln.Addr().String())
		for _, plan := range plans {
			run, err := ss.Run(ctx, ClientConfig{Plan: plan, Device: DeviceConfig{GIDIndex: -1, Kept: cliKept}})
			if err != nil || len(run.Results) != 1 {
				t.Fatalf("%s: %v", plan.Test, err)
			}
		}
		ss.Close()
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	want := KeptStats{Opens: 1, Registrations: 2, Reuses: 2*len(plans) - 2}
	for who, k := range map[string]*Kept{"client": cliKept, "server": srvKept} {
		if got := k.Stats(); got != want {
			t.Errorf("%s kept %+v, want %+v", who, got, want)
		}
	}
	// Both Kepts hold a device, a PD and two buffers each; no QP or CQ of
	// the twelve sides is left.
	if r := verbs.LeakReport(); strings.Contains(r, "qp=") || strings.Contains(r, "cq=") || !strings.Contains(r, "mr=4") {
		t.Errorf("between plans: %s", r)
	}
	srvKept.Close()
	cliKept.Close()
	waitNoLeaks(t)
}

// Sides open at once on one Kept (a loopback write: its client and server
// sides, as a rank measures while it serves) take a buffer each, and
// each takes one back the next time; --verify plans bypass the Kept.
func TestKeptSidesAtOnce(t *testing.T) {
	needRDMA(t)
	k := NewKept()
	defer waitNoLeaks(t)
	defer k.Close()
	dc := DeviceConfig{GIDIndex: -1, Kept: k}
	bw := rbplan.DefaultPlan(WriteBW)
	bw.Sizes, bw.Iterations, bw.Warmup = []int{4096}, 100, 10
	for i := range 2 {
		if _, err := RunLoopback(context.Background(), ClientConfig{Device: dc, Plan: bw, Mode: "loopback"}, dc); err != nil {
			t.Fatal(err)
		}
		if got, want := k.Stats(), (KeptStats{Opens: 1, Registrations: 2, Reuses: 2 * i}); got != want {
			t.Fatalf("loopback %d: %+v, want %+v", i+1, got, want)
		}
	}
	bw.Verify = true
	if _, err := RunLoopback(context.Background(), ClientConfig{Device: dc, Plan: bw, Mode: "loopback"}, dc); err != nil {
		t.Fatal(err)
	}
	if got := k.Stats(); got.Registrations != 2 || got.Reuses != 2 {
		t.Errorf("a --verify plan used the kept buffers: %+v", got)
	}
}

// BenchmarkSideSetUp is what opening and closing one side of a mesh's
// write-bw plan costs with its own device and buffer, and with a Kept's:
// the set-up a mesh task no longer pays (make the figures on rxe or an
// HCA: ci/rxe-run -- engine.test -test.bench SideSetUp).
func BenchmarkSideSetUp(b *testing.B) {
	needRDMA(b)
	plan := rbplan.DefaultPlan(WriteBW)
	plan.Sizes = []int{1 << 20}
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "own", true: "kept"}[kept], func(b *testing.B) {
			dc := DeviceConfig{GIDIndex: -1}
			if kept {
				dc.Kept = NewKept()
				defer dc.Kept.Close()
			}
			for b.Loop() {
				s, err := openSide(dc, plan, nil, plan.Memory)
				if err != nil {
					b.Fatal(err)
				}
				s.Close()
			}
		})
	}
}

// BenchmarkDirectionSetUp is a mesh direction as a rank runs it, less its
// measurements' length: a session to a server that keeps its device and
// buffers (engine.Kept, on both ends), write-bw then send-lat of a few
// messages each, its QPs each plan's own or, write-bw naming send-lat to
// follow (ClientConfig.Also), made once on each end. The difference is
// the set-up of the QPs and CQs a direction no longer makes:
// engine.test -test.bench DirectionSetUp -test.benchtime 200x.
func BenchmarkDirectionSetUp(b *testing.B) {
	needRDMA(b)
	bw, lat := sessionPlans()[0], sessionPlans()[1]
	bw.Iterations, bw.Warmup, lat.Iterations, lat.Warmup = 16, 0, 16, 0
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "own", true: "shared"}[shared], func(b *testing.B) {
			srvKept, cliKept := NewKept(), NewKept()
			defer srvKept.Close()
			defer cliKept.Close()
			ln := listenLocal(b)
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- Serve(ctx, ln, ServerConfig{Device: DeviceConfig{GIDIndex: -1, Kept: srvKept}}) }()
			defer func() { cancel(); <-served }()
			dc := DeviceConfig{GIDIndex: -1, Kept: cliKept}
			cfgs := []ClientConfig{{Plan: bw, Device: dc}, {Plan: lat, Device: dc}}
			if shared {
				cfgs[0].Also = []Plan{lat}
			}
			for b.Loop() {
				ss, err := Dial(ctx, ln.Addr().String(), nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, cfg := range cfgs {
					if _, err := ss.Run(ctx, cfg); err != nil {
						b.Fatal(err)
					}
				}
				ss.Close()
			}
		})
	}
}

// BenchmarkDirectionQPs is the verbs part of BenchmarkDirectionSetUp
// alone, without the sessions, loops and threads whose scheduling makes
// its noise: both ends' sides of write-bw and of send-lat, each opened on
// a Kept and connected, or write-bw's opened to serve send-lat too and
// readied for it (fits, retarget).
func BenchmarkDirectionQPs(b *testing.B) {
	needRDMA(b)
	bw, lat := sessionPlans()[0], sessionPlans()[1]
	for _, shared := range []bool{false, true} {
		b.Run(map[bool]string{false: "own", true: "shared"}[shared], func(b *testing.B) {
			cli := DeviceConfig{GIDIndex: -1, Kept: NewKept()}
			srv := DeviceConfig{GIDIndex: -1, Kept: NewKept(), fromEnd: true}
			defer cli.Kept.Close()
			defer srv.Kept.Close()
			for b.Loop() {
				if shared {
					c, s := connectedPair(b, cli, srv, bw, []Plan{lat})
					for _, end := range []struct {
						s  *side
						dc DeviceConfig
					}{{c, cli}, {s, srv}} {
						if err := end.s.fits(end.dc, lat, end.dc.fromEnd); err != nil {
							b.Fatal(err)
						}
						if err := end.s.retarget(end.dc, lat); err != nil {
							b.Fatal(err)
						}
					}
					c.Close()
					s.Close()
					continue
				}
				for _, p := range []Plan{bw, lat} {
					c, s := connectedPair(b, cli, srv, p, nil)
					c.Close()
					s.Close()
				}
			}
		})
	}
}

// connectedPair opens a client's and a server's side of plan (and also)
// and connects them to each other.
func connectedPair(b *testing.B, cli, srv DeviceConfig, plan Plan, also []Plan) (c, s *side) {
	c, err := openSide(cli, plan, also, plan.Memory)
	if err != nil {
		b.Fatal(err)
	}
	if s, err = openSide(srv, plan, also, plan.PeerMemory); err != nil {
		b.Fatal(err)
	}
	ce, err := c.endpoints()
	if err != nil {
		b.Fatal(err)
	}
	se, err := s.endpoints()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.connect(se, plan); err != nil {
		b.Fatal(err)
	}
	if err := s.connect(ce, plan); err != nil {
		b.Fatal(err)
	}
	return c, s
}
