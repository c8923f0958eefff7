// Package proto is rdmabench's control protocol between a client and its
// server: the greeting, length-prefixed frames of one JSON message each,
// the typed message kinds and the connection with a deadline on every
// step. Plain Go without cgo, so that its decoders build and fuzz anywhere
// (CGO_ENABLED=0 go test ./proto); engine/ speaks it.
package proto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

// ProtocolVersion is the version of the control protocol. Both sides send
// a greeting line "RDMABENCH/<version>[ token]\n" before any message; the
// server's says " token" when a token exchange (package auth) follows.
// 3: the token flag, and the "queued" message. 4: sessions: after a
// plan's last "run" the client may send its next "plan" instead of "bye",
// and the server serves it on the same connection (an older server would
// refuse that mid-session, so the greeting refuses it up front). 5: a
// session's plans may share QPs: the plan's "also" and "reuse", the
// accept's "reused" (an older peer refuses unknown fields).
const ProtocolVersion = 5

const (
	greetingPrefix = "RDMABENCH/"
	tokenFlag      = "token"
	// maxGreeting bounds the greeting line: a peer that sends more without a
	// newline is not rdmabench, and we read no further.
	maxGreeting = 32
)

// MaxMessage bounds a control message; anything larger is rejected unread.
// A plan with MaxQPs endpoints fits (a test checks).
const MaxMessage = 1 << 20

// HandshakeTimeout bounds the greeting and connection exchange.
var HandshakeTimeout = 5 * time.Second

// ErrNotRdmabench says the peer spoke something else (a perftest server, say).
var ErrNotRdmabench = errors.New("peer is not an rdmabench endpoint")

// ErrVersion says the peer speaks another protocol version.
var ErrVersion = errors.New("protocol version mismatch")

// Kind is a message's type: it says which fields matter.
type Kind string

// The kinds, in the order a session sends them: the client's plan, the
// server's queued (another client holds the device) and accept; per size
// the client's run, the server's ready, the client's done and the server's
// result; bye ends the session, error reports why one side gives up.
const (
	KindPlan   Kind = "plan"
	KindQueued Kind = "queued"
	KindAccept Kind = "accept"
	KindRun    Kind = "run"
	KindReady  Kind = "ready"
	KindDone   Kind = "done"
	KindResult Kind = "result"
	KindBye    Kind = "bye"
	KindError  Kind = "error"
)

// Message is one control message. Type says which fields matter.
type Message struct {
	Type      Kind       `json:"type"`
	Plan      *plan.Plan `json:"plan,omitempty"`
	Endpoints []Endpoint `json:"endpoints,omitempty"`
	// LoadEndpoints are each load's QPs (plan, accept), as Endpoints.
	LoadEndpoints [][]Endpoint  `json:"load_endpoints,omitempty"`
	Size          int           `json:"size,omitempty"`
	QPs           int           `json:"qps,omitempty"`    // run: the QPs in use, the first QPs of the connection
	Iters         uint64        `json:"iters,omitempty"`  // run: per QP, warm-up included; 0 = until done
	Counts        []uint64      `json:"counts,omitempty"` // done: messages per QP; result: the server's
	Side          *SideFigures  `json:"side,omitempty"`
	Info          *SideInfo     `json:"info,omitempty"` // accept: how the server set itself up
	Wait          time.Duration `json:"wait,omitempty"` // queued: how long the server keeps us waiting at most
	Error         string        `json:"error,omitempty"`
	// Also (plan) is the plans the session runs next: each end opens its
	// side to serve them too, so that they may keep its QPs.
	Also []plan.Plan `json:"also,omitempty"`
	// Reuse (plan) asks to run the plan on the previous plan's QPs, both
	// ends' endpoints unchanged. Reused (accept) says the server did;
	// an accept of a reuse without it, and without endpoints, says the
	// server closed its side instead: send the plan again, with fresh QPs.
	Reuse  bool `json:"reuse,omitempty"`
	Reused bool `json:"reused,omitempty"`
}

// SideInfo is how a server set itself up for a plan, for the client's header.
type SideInfo struct {
	CPUs   []int    `json:"cpus,omitempty"`  // loop threads pinned to these, in turn
	Inline int      `json:"inline"`          // inline size used
	Notes  []string `json:"notes,omitempty"` // depths lowered, and why
	// Memory is where the server's buffers live (absent from servers
	// before --use-cuda).
	Memory *results.Memory `json:"memory,omitempty"`
}

// SideFigures is what a server measured itself: its direction of a
// bidirectional test, its CPU use, bytes that failed verification.
type SideFigures struct {
	Messages uint64            `json:"messages"`
	Seconds  float64           `json:"seconds"`
	BurstBps float64           `json:"burst_bps"`
	CPU      results.CPUFigure `json:"cpu"`
	BadBytes uint64            `json:"bad_bytes"`
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

// Validate checks an endpoint a peer sent.
func (e Endpoint) Validate() error {
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

// NewConn wraps an established control connection.
func NewConn(c net.Conn) *Conn { return &Conn{c: c, rd: bufio.NewReader(c)} }

// SetDeadline and SetReadDeadline set the socket's deadlines, for the
// exchanges that run outside Send and Recv (auth, a watch on the peer).
func (c *Conn) SetDeadline(t time.Time) error     { return c.c.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// Peek waits for the peer's next byte without consuming it: a watch on a
// peer that must stay quiet.
func (c *Conn) Peek(n int) ([]byte, error) { return c.rd.Peek(n) }

// Close closes the connection.
func (c *Conn) Close() error { return c.c.Close() }

// RemoteAddr is the peer's address.
func (c *Conn) RemoteAddr() string { return c.c.RemoteAddr().String() }

// ReadWriter is the connection as the auth exchange reads and writes it:
// reads go through the buffer, which may already hold bytes past the
// greeting.
func (c *Conn) ReadWriter() io.ReadWriter {
	return struct {
		io.Reader
		io.Writer
	}{c.rd, c.c}
}

// greetingLine is what a side sends first; token says that it requires the
// token exchange (only a server does).
func greetingLine(token bool) string {
	if token {
		return fmt.Sprintf("%s%d %s\n", greetingPrefix, ProtocolVersion, tokenFlag)
	}
	return fmt.Sprintf("%s%d\n", greetingPrefix, ProtocolVersion)
}

// SendGreeting sends this side's greeting line.
func (c *Conn) SendGreeting(token bool, timeout time.Duration) error {
	c.c.SetWriteDeadline(time.Now().Add(timeout))
	_, err := io.WriteString(c.c, greetingLine(token))
	return err
}

// ReadGreeting reads the peer's greeting line within timeout, checks its
// version, and says whether the peer requires the token exchange.
func (c *Conn) ReadGreeting(timeout time.Duration) (token bool, err error) {
	c.c.SetReadDeadline(time.Now().Add(timeout))
	line, err := readGreetingLine(c.rd)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false, fmt.Errorf("%w: no rdmabench greeting within %v (a perftest server or another program on that port?)", ErrNotRdmabench, timeout.Round(time.Millisecond))
		}
		if line == "" {
			return false, fmt.Errorf("%w: it closed the connection without a greeting (%v; a perftest server or another program on that port?)", ErrNotRdmabench, err)
		}
		return false, fmt.Errorf("%w: greeting cut short: %v", ErrNotRdmabench, err)
	}
	return parseGreeting(line)
}

// readGreetingLine reads up to a newline, or maxGreeting bytes at most, one
// byte at a time so nothing past the line is consumed but what the buffer
// holds. The newline is not part of the line.
func readGreetingLine(r io.ByteReader) (string, error) {
	line := make([]byte, 0, maxGreeting)
	for len(line) < maxGreeting {
		b, err := r.ReadByte()
		if err != nil {
			return string(line), err
		}
		if b == '\n' {
			break
		}
		line = append(line, b)
	}
	return string(line), nil
}

// parseGreeting checks a greeting line: the prefix, our version, and at
// most the token flag after it.
func parseGreeting(s string) (token bool, err error) {
	if !strings.HasPrefix(s, greetingPrefix) {
		return false, fmt.Errorf("%w: it sent %q (a perftest server or another program on that port?)", ErrNotRdmabench, truncate(s, 24))
	}
	ver, flags, hasFlags := strings.Cut(s[len(greetingPrefix):], " ")
	// Only the form we send: Atoi alone takes "+3" and "03" too.
	v, err := strconv.Atoi(ver)
	if err != nil || v < 0 || strconv.Itoa(v) != ver {
		return false, fmt.Errorf("%w: bad greeting %q", ErrNotRdmabench, truncate(s, maxGreeting))
	}
	if v != ProtocolVersion {
		return false, fmt.Errorf("%w: peer speaks protocol %d, this rdmabench speaks %d (use the same release on both sides)", ErrVersion, v, ProtocolVersion)
	}
	switch {
	case !hasFlags:
		return false, nil
	case flags == tokenFlag:
		return true, nil
	}
	return false, fmt.Errorf("%w: bad greeting %q", ErrNotRdmabench, truncate(s, maxGreeting))
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
	body, err := readFrame(c.rd)
	if err != nil {
		if errors.Is(err, errFrameSize) {
			return Message{}, err
		}
		return Message{}, c.recvErr(err, timeout)
	}
	m, err := decodeMessage(body)
	if err != nil {
		return Message{}, err
	}
	if m.Type == KindError {
		return m, &PeerError{Text: m.Error}
	}
	return m, nil
}

// errFrameSize marks a length header out of bounds: what the peer sent is
// wrong, the connection itself is fine.
var errFrameSize = errors.New("rejected")

// readFrame reads one length-prefixed body. The length is checked before
// anything is allocated, so a peer can make us hold MaxMessage bytes at most.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > MaxMessage {
		return nil, fmt.Errorf("control message of %d bytes %w (limit %d)", n, errFrameSize, MaxMessage)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, err
	}
	return body, nil
}

// decodeMessage reads one message body: exactly one JSON object with known
// fields only.
func decodeMessage(body []byte) (Message, error) {
	var m Message
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Message{}, fmt.Errorf("malformed control message: %v", err)
	}
	return m, nil
}

func (c *Conn) recvErr(err error, timeout time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &silenceError{peer: c.RemoteAddr(), timeout: timeout}
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

// ErrSilent says the peer sent nothing within the time allowed.
var ErrSilent = errors.New("peer silent")

// silenceError is ErrSilent for one connection and wait.
type silenceError struct {
	peer    string
	timeout time.Duration
}

func (e *silenceError) Error() string {
	return fmt.Sprintf("peer %s sent nothing for %v", e.peer, e.timeout)
}

func (e *silenceError) Is(target error) bool { return target == ErrSilent }

// PeerError is an error the peer reported.
type PeerError struct{ Text string }

func (e *PeerError) Error() string { return "peer: " + e.Text }

// Expect receives a message and checks its kind.
func (c *Conn) Expect(typ Kind, timeout time.Duration) (Message, error) {
	m, err := c.Recv(timeout)
	if err != nil {
		return m, err
	}
	if m.Type != typ {
		return m, fmt.Errorf("protocol error: expected %q, got %q", typ, m.Type)
	}
	return m, nil
}
