package engine

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// ProtocolVersion is the version of the control protocol. Both sides send
// a greeting line "RDMABENCH/<version>\n" before any message.
const ProtocolVersion = 2

const greetingPrefix = "RDMABENCH/"

// MaxMessage bounds a control message; anything larger is rejected unread.
// A plan with MaxQPs endpoints fits (a test checks).
const MaxMessage = 1 << 20

// HandshakeTimeout bounds the greeting and connection exchange.
var HandshakeTimeout = 5 * time.Second

// ErrNotRdmabench says the peer spoke something else (a perftest server, say).
var ErrNotRdmabench = errors.New("peer is not an rdmabench endpoint")

// ErrVersion says the peer speaks another protocol version.
var ErrVersion = errors.New("protocol version mismatch")

// Message is one control message. Type says which fields matter.
type Message struct {
	Type      string       `json:"type"` // plan, accept, run, ready, done, result, bye, error
	Plan      *Plan        `json:"plan,omitempty"`
	Endpoints []Endpoint   `json:"endpoints,omitempty"`
	Size      int          `json:"size,omitempty"`
	QPs       int          `json:"qps,omitempty"`    // run: the QPs in use, the first QPs of the connection
	Iters     uint64       `json:"iters,omitempty"`  // run: per QP, warm-up included; 0 = until done
	Counts    []uint64     `json:"counts,omitempty"` // done: messages per QP; result: the server's
	Side      *SideFigures `json:"side,omitempty"`
	Info      *SideInfo    `json:"info,omitempty"` // accept: how the server set itself up
	Error     string       `json:"error,omitempty"`
}

// SideInfo is how a server set itself up for a plan, for the client's header.
type SideInfo struct {
	CPUs   []int    `json:"cpus,omitempty"`  // loop threads pinned to these, in turn
	Inline int      `json:"inline"`          // inline size used
	Notes  []string `json:"notes,omitempty"` // depths lowered, and why
}

// SideFigures is what a server measured itself: its direction of a
// bidirectional test, its CPU use, bytes that failed verification.
type SideFigures struct {
	Messages uint64    `json:"messages"`
	Seconds  float64   `json:"seconds"`
	BurstBps float64   `json:"burst_bps"`
	CPU      CPUFigure `json:"cpu"`
	BadBytes uint64    `json:"bad_bytes"`
	// Counters are the server port's counters that grew during the step.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// Endpoint is one side's connection data: its QP and the memory the peer may
// access.
type Endpoint struct {
	QPN     uint32   `json:"qpn"`
	PSN     uint32   `json:"psn"`
	LID     uint16   `json:"lid"`
	GID     [16]byte `json:"gid"`
	MTU     int      `json:"mtu"`
	Addr    uint64   `json:"addr"`
	RKey    uint32   `json:"rkey"`
	BufSize uint64   `json:"buf_size"`
}

func (e Endpoint) validate() error {
	if e.QPN == 0 || e.QPN >= 1<<24 {
		return fmt.Errorf("QP number %d out of range", e.QPN)
	}
	if e.PSN >= 1<<24 {
		return fmt.Errorf("PSN %d out of range", e.PSN)
	}
	switch e.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("MTU %d invalid", e.MTU)
	}
	return nil
}

// Conn is a control connection with deadlines on every step.
type Conn struct {
	c  net.Conn
	rd *bufio.Reader
}

func newConn(c net.Conn) *Conn { return &Conn{c: c, rd: bufio.NewReader(c)} }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() string { return c.c.RemoteAddr().String() }

func (c *Conn) sendGreeting() error {
	c.c.SetWriteDeadline(time.Now().Add(HandshakeTimeout))
	_, err := fmt.Fprintf(c.c, "%s%d\n", greetingPrefix, ProtocolVersion)
	return err
}

// readGreeting reads the peer's greeting line and checks its version.
func (c *Conn) readGreeting() error {
	c.c.SetReadDeadline(time.Now().Add(HandshakeTimeout))
	line := make([]byte, 0, 16)
	for len(line) < 16 {
		b, err := c.rd.ReadByte()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("%w: no rdmabench greeting within %v (a perftest server or another program on that port?)", ErrNotRdmabench, HandshakeTimeout)
			}
			if len(line) == 0 {
				return fmt.Errorf("%w: it closed the connection without a greeting (%v; a perftest server or another program on that port?)", ErrNotRdmabench, err)
			}
			return fmt.Errorf("%w: greeting cut short: %v", ErrNotRdmabench, err)
		}
		if b == '\n' {
			break
		}
		line = append(line, b)
	}
	s := string(line)
	if !strings.HasPrefix(s, greetingPrefix) {
		return fmt.Errorf("%w: it sent %q (a perftest server or another program on that port?)", ErrNotRdmabench, truncate(s, 24))
	}
	var v int
	if _, err := fmt.Sscanf(s[len(greetingPrefix):], "%d", &v); err != nil {
		return fmt.Errorf("%w: bad greeting %q", ErrNotRdmabench, s)
	}
	if v != ProtocolVersion {
		return fmt.Errorf("%w: peer speaks protocol %d, this rdmabench speaks %d (use the same release on both sides)", ErrVersion, v, ProtocolVersion)
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Send writes one message: a 4-byte big-endian length, then JSON.
func (c *Conn) Send(m Message, timeout time.Duration) error {
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(body) > MaxMessage {
		return fmt.Errorf("control message of %d bytes exceeds %d", len(body), MaxMessage)
	}
	buf := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(buf, uint32(len(body)))
	copy(buf[4:], body)
	c.c.SetWriteDeadline(time.Now().Add(timeout))
	if _, err := c.c.Write(buf); err != nil {
		return fmt.Errorf("send %s to %s: %w", m.Type, c.RemoteAddr(), err)
	}
	return nil
}

// Recv reads one message within timeout. A message of type "error" becomes
// an error carrying the peer's text.
func (c *Conn) Recv(timeout time.Duration) (Message, error) {
	c.c.SetReadDeadline(time.Now().Add(timeout))
	var hdr [4]byte
	if _, err := io.ReadFull(c.rd, hdr[:]); err != nil {
		return Message{}, c.recvErr(err, timeout)
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxMessage {
		return Message{}, fmt.Errorf("control message of %d bytes rejected (limit %d)", n, MaxMessage)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.rd, body); err != nil {
		return Message{}, c.recvErr(err, timeout)
	}
	var m Message
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Message{}, fmt.Errorf("malformed control message: %v", err)
	}
	if m.Type == "error" {
		return m, &PeerError{Text: m.Error}
	}
	return m, nil
}

func (c *Conn) recvErr(err error, timeout time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("peer %s sent nothing for %v", c.RemoteAddr(), timeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("peer %s closed the control connection: %w", c.RemoteAddr(), ErrPeerGone)
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		// A process killed with data unread resets instead of closing.
		return fmt.Errorf("peer %s closed the control connection (reset): %w", c.RemoteAddr(), ErrPeerGone)
	}
	return fmt.Errorf("control connection to %s: %w", c.RemoteAddr(), err)
}

// ErrPeerGone says the control connection closed: the peer exited or died.
var ErrPeerGone = errors.New("peer gone")

// PeerError is an error the peer reported.
type PeerError struct{ Text string }

func (e *PeerError) Error() string { return "peer: " + e.Text }

// expect receives a message and checks its type.
func (c *Conn) expect(typ string, timeout time.Duration) (Message, error) {
	m, err := c.Recv(timeout)
	if err != nil {
		return m, err
	}
	if m.Type != typ {
		return m, fmt.Errorf("protocol error: expected %q, got %q", typ, m.Type)
	}
	return m, nil
}
