package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"sort"
	"strings"
	"testing"
	"time"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"8", 8, true}, {"64K", 65536, true}, {"1m", 1 << 20, true}, {"8M", 8 << 20, true},
		{"4KB", 4096, true}, {"0", 0, false}, {"-1", 0, false}, {"9M", 0, false}, {"x", 0, false}, {"1G", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestPlanValidate(t *testing.T) {
	good := DefaultPlan(WriteBW)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if s := AllSizes(); len(s) != 23 || s[0] != 2 || s[22] != 8<<20 {
		t.Errorf("AllSizes = %v", s)
	}
	mutations := map[string]func(*Plan){
		"test":     func(p *Plan) { p.Test = "nope" },
		"size":     func(p *Plan) { p.Sizes = []int{16 << 20} },
		"no sizes": func(p *Plan) { p.Sizes = nil },
		"iters":    func(p *Plan) { p.Iterations = 0 },
		"depth":    func(p *Plan) { p.TxDepth = 0 },
		"mtu":      func(p *Plan) { p.MTU = 1500 },
		"sl":       func(p *Plan) { p.SL = 16 },
		"timeout":  func(p *Plan) { p.Timeout = 0 },
		"duration": func(p *Plan) { p.Duration = -time.Second },
	}
	for name, mutate := range mutations {
		p := DefaultPlan(WriteBW)
		mutate(&p)
		if p.Validate() == nil {
			t.Errorf("%s: invalid plan accepted", name)
		}
	}
	d := DefaultPlan(SendLat)
	d.Iterations, d.Duration = 0, 5*time.Second
	if err := d.Validate(); err != nil {
		t.Errorf("duration mode without iterations: %v", err)
	}
}

// pipeConns connects two Conns over loopback TCP (deadlines need a real socket).
func pipeConns(t *testing.T) (*Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	t.Cleanup(func() { c.Close(); s.Close() })
	return newConn(s), c
}

func TestWireRoundTrip(t *testing.T) {
	srv, raw := pipeConns(t)
	cli := newConn(raw)
	plan := DefaultPlan(ReadLat)
	ep := Endpoint{QPN: 17, PSN: 5, MTU: 1024, Addr: 1 << 40, RKey: 9, BufSize: 4096}
	go func() {
		cli.sendGreeting()
		cli.Send(Message{Type: "plan", Plan: &plan, Endpoints: []Endpoint{ep}}, time.Second)
	}()
	if err := srv.readGreeting(); err != nil {
		t.Fatal(err)
	}
	m, err := srv.expect("plan", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Plan.Test != ReadLat || len(m.Endpoints) != 1 || m.Endpoints[0].QPN != 17 || m.Endpoints[0].validate() != nil {
		t.Errorf("got %+v", m)
	}
}

func TestWireRejects(t *testing.T) {
	old := HandshakeTimeout
	HandshakeTimeout = 300 * time.Millisecond
	defer func() { HandshakeTimeout = old }()
	tests := []struct {
		name  string
		send  []byte
		greet bool // the greeting alone is under test
		want  error
		text  string
	}{
		{"perftest-like text", []byte("0000:000011:a3b4c5:00001234:0000000000001000\n"), true, ErrNotRdmabench, "sent"},
		{"silence", nil, true, ErrNotRdmabench, "no rdmabench greeting"},
		{"newer version", []byte("RDMABENCH/2\n"), true, ErrVersion, "protocol 2"},
		{"oversized", append([]byte("RDMABENCH/1\n"), 0xff, 0xff, 0xff, 0xff), false, nil, "rejected"},
		{"garbage JSON", append([]byte("RDMABENCH/1\n"), 0, 0, 0, 3, '{', 'x', '}'), false, nil, "malformed"},
		{"unknown field", append(append([]byte("RDMABENCH/1\n"), 0, 0, 0, 15), `{"type":1,"z":}`...), false, nil, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := pipeConns(t)
			raw.Write(tt.send)
			err := srv.readGreeting()
			if !tt.greet {
				if err != nil {
					t.Fatal(err)
				}
				_, err = srv.Recv(time.Second)
			}
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %v; want %v containing %q", err, tt.want, tt.text)
			}
		})
	}
}

func TestEndpointValidate(t *testing.T) {
	for _, ep := range []Endpoint{{QPN: 0, MTU: 1024}, {QPN: 1 << 24, MTU: 1024}, {QPN: 3, PSN: 1 << 24, MTU: 1024}, {QPN: 3, MTU: 1500}} {
		if ep.validate() == nil {
			t.Errorf("%+v accepted", ep)
		}
	}
}

func TestLatencyRecorderExactAndMerged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var all []int64
	a, b := NewLatencyRecorder(), NewLatencyRecorder()
	for i := 0; i < 20000; i++ {
		v := int64(1000 + rng.ExpFloat64()*3000)
		all = append(all, v)
		if i%2 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
	}
	a.Merge(b) // one recorder per thread, merged after the run
	st := a.Stats()
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var sum, sq float64
	for _, v := range all {
		sum += float64(v)
	}
	mean := sum / float64(len(all))
	for _, v := range all {
		sq += (float64(v) - mean) * (float64(v) - mean)
	}
	sd := math.Sqrt(sq / float64(len(all)-1))
	if st.Min != float64(all[0])/1e3 || st.Max != float64(all[len(all)-1])/1e3 {
		t.Errorf("min/max %v/%v, want exact %v/%v", st.Min, st.Max, all[0], all[len(all)-1])
	}
	if math.Abs(st.Mean-mean/1e3) > 1e-9 || math.Abs(st.Stdev-sd/1e3) > 1e-6 {
		t.Errorf("mean/stdev %v/%v, want %v/%v", st.Mean, st.Stdev, mean/1e3, sd/1e3)
	}
	p99 := float64(all[int(math.Ceil(0.99*float64(len(all))))-1]) / 1e3
	if math.Abs(st.P99-p99) > p99*0.001+0.001 {
		t.Errorf("p99 %v, exact %v", st.P99, p99)
	}
	var buf bytes.Buffer
	if err := WriteHgrm(&buf, a.Hist); err != nil || !strings.Contains(buf.String(), "Percentile") {
		t.Errorf("hgrm: %v\n%s", err, buf.String())
	}
}

func TestBandwidthResult(t *testing.T) {
	r := BandwidthResult(65536, 1000, 0.5, 0)
	want := 65536.0 * 1000 * 8 / 0.5 / 1e9
	if math.Abs(r.BWAvgGbps-want) > 1e-9 || r.BWPeakGbps != r.BWAvgGbps || math.Abs(r.MsgRateMpps-0.002) > 1e-12 {
		t.Errorf("%+v, want avg %v", r, want)
	}
	if got := gbpsToMiBps(8 * 1.048576); math.Abs(got-1000) > 1e-9 {
		t.Errorf("gbpsToMiBps = %v", got)
	}
}

func TestMessageHeaderLimit(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], MaxMessage+1)
	srv, raw := pipeConns(t)
	raw.Write(hdr[:])
	if _, err := srv.Recv(time.Second); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Errorf("err = %v", err)
	}
}
