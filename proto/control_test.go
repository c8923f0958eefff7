package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

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
	return NewConn(s), c
}

func TestWireRoundTrip(t *testing.T) {
	srv, raw := pipeConns(t)
	cli := NewConn(raw)
	p := plan.DefaultPlan(results.ReadLat)
	ep := Endpoint{QPN: 17, PSN: 5, MTU: 1024, Addr: 1 << 40, RKey: 9, BufSize: 4096}
	go func() {
		cli.SendGreeting(false, time.Second)
		cli.Send(Message{Type: KindPlan, Plan: &p, Endpoints: []Endpoint{ep}}, time.Second)
	}()
	if _, err := srv.ReadGreeting(time.Second); err != nil {
		t.Fatal(err)
	}
	m, err := srv.Expect(KindPlan, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m.Plan.Test != results.ReadLat || len(m.Endpoints) != 1 || m.Endpoints[0].QPN != 17 || m.Endpoints[0].Validate() != nil {
		t.Errorf("got %+v", m)
	}
}

var greeting = fmt.Sprintf("RDMABENCH/%d\n", ProtocolVersion)

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
		{"newer version", []byte(fmt.Sprintf("RDMABENCH/%d\n", ProtocolVersion+1)), true, ErrVersion, fmt.Sprintf("protocol %d", ProtocolVersion+1)},
		{"older version", []byte(fmt.Sprintf("RDMABENCH/%d\n", ProtocolVersion-1)), true, ErrVersion, fmt.Sprintf("protocol %d", ProtocolVersion-1)},
		{"oversized", append([]byte(greeting), 0xff, 0xff, 0xff, 0xff), false, nil, "rejected"},
		{"garbage JSON", append([]byte(greeting), 0, 0, 0, 3, '{', 'x', '}'), false, nil, "malformed"},
		{"unknown field", append(append([]byte(greeting), 0, 0, 0, 15), `{"type":1,"z":}`...), false, nil, "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, raw := pipeConns(t)
			raw.Write(tt.send)
			_, err := srv.ReadGreeting(HandshakeTimeout)
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
		if ep.Validate() == nil {
			t.Errorf("%+v accepted", ep)
		}
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

// A plan with the most QPs a plan may have, every field at its widest, fits
// one control message.
func TestLargestPlanFitsOneMessage(t *testing.T) {
	p := plan.DefaultPlan(results.SendBW)
	p.QPs = []int{plan.MaxQPs}
	p.Sizes = plan.AllSizes()
	eps := make([]Endpoint, plan.MaxQPs)
	for i := range eps {
		eps[i] = Endpoint{QPN: 1<<24 - 1, PSN: 1<<24 - 1, LID: 65535, MTU: 4096, Addr: ^uint64(0), RKey: ^uint32(0), BufSize: ^uint64(0)}
		for j := range eps[i].GID {
			eps[i].GID[j] = 255
		}
	}
	srv, raw := pipeConns(t)
	done := make(chan error, 1)
	go func() { done <- NewConn(raw).Send(Message{Type: KindPlan, Plan: &p, Endpoints: eps}, time.Second) }()
	m, err := srv.Recv(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(m.Endpoints) != plan.MaxQPs {
		t.Errorf("%d endpoints arrived", len(m.Endpoints))
	}
}
