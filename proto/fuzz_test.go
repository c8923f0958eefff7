package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

// Fuzz targets for what a peer hands the control protocol: the greeting,
// frames and messages. The seeds in testdata/fuzz run as ordinary tests;
// `make fuzz` explores further (CGO_ENABLED=0 too).

// frame is one length-prefixed control message.
func frame(body string) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return append(b, body...)
}

func FuzzGreeting(f *testing.F) {
	for _, s := range []string{"RDMABENCH/5", "RDMABENCH/5 token", "RDMABENCH/4", "RDMABENCH/3", "RDMABENCH/2", "RDMABENCH/-1", "RDMABENCH/3 token extra", "RDMABENCH/", "0000:000011:a3b4c5", "RDMABENCH/99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		token, err := parseGreeting(s)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of more than one line: %q", err)
			}
			return
		}
		// What parses is what we send, and it parses back the same.
		line := greetingLine(token)
		if strings.TrimSuffix(line, "\n") != s {
			t.Fatalf("%q accepted, but we would send %q", s, line)
		}
		if len(line) > maxGreeting {
			t.Fatalf("our greeting %q exceeds the %d bytes a peer reads", line, maxGreeting)
		}
	})
}

// FuzzControlStream feeds bytes to the server's side of the protocol: a
// greeting line then messages. Nothing may panic, no read takes more than
// the bounds.
func FuzzControlStream(f *testing.F) {
	p := plan.DefaultPlan(results.WriteBW)
	pj, _ := json.Marshal(Message{Type: KindPlan, Plan: &p, Endpoints: []Endpoint{{QPN: 1, MTU: 1024}}})
	f.Add(append([]byte(greetingLine(false)), frame(string(pj))...))
	f.Add(append([]byte(greetingLine(true)), frame(`{"type":"run","size":65536,"qps":1,"iters":100}`)...))
	// A session: a plan, its run and done, then the next plan.
	session := append([]byte(greetingLine(false)), frame(string(pj))...)
	session = append(session, frame(`{"type":"run","size":65536,"qps":1,"iters":100}`)...)
	session = append(session, frame(`{"type":"done","counts":[100]}`)...)
	f.Add(append(session, frame(string(pj))...))
	f.Add(append([]byte(greetingLine(false)), frame(`{"type":"error","error":"no"}`)...))
	f.Add(append([]byte(greetingLine(false)), 0xff, 0xff, 0xff, 0xff))
	f.Add(append([]byte(greetingLine(false)), frame(`{"type":"plan","plan":{"test":"send_bw","qps":[1024]},"z":1}`)...))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte("RDMABENCH/5\n\x00\x00\x00\x02{}" + "\x00\x00\x00\x01x"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		line, err := readGreetingLine(r)
		if len(line) > maxGreeting {
			t.Fatalf("greeting of %d bytes read", len(line))
		}
		if err != nil {
			return
		}
		if _, err := parseGreeting(line); err != nil {
			return
		}
		for i := 0; i < 16; i++ {
			body, err := readFrame(r)
			if err != nil {
				return
			}
			if len(body) == 0 || len(body) > MaxMessage {
				t.Fatalf("frame of %d bytes accepted", len(body))
			}
			m, err := decodeMessage(body)
			if err != nil {
				continue
			}
			for _, ep := range m.Endpoints {
				_ = ep.Validate()
			}
			if m.Plan != nil {
				_ = m.Plan.Validate() // plan's FuzzPlanValidate and engine's FuzzPlanResources check what passes
			}
		}
	})
}
