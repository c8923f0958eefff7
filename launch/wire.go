package launch

// The rendezvous's wire: its messages, their kinds and bounds, and one
// process's connection to another.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"
)

type greeting struct {
	Proto string `json:"proto"`
	Token bool   `json:"token"` // a challenge follows
}

// kind is a rendezvous message's type.
type kind string

// The kinds: the join (hello, welcome or reject), the collectives (gather,
// reduce and reduced, data between two processes), the end (bye) and a
// process giving up (abort); the census and the clocks (census, status,
// stall, ping, pong); a process's error report to rank 0 (failed, and
// failed-noted when rank 0 recorded it).
const (
	kHello       kind = "hello"
	kWelcome     kind = "welcome"
	kReject      kind = "reject"
	kGather      kind = "gather"
	kReduce      kind = "reduce"
	kReduced     kind = "reduced"
	kData        kind = "data"
	kBye         kind = "bye"
	kAbort       kind = "abort"
	kCensus      kind = "census"
	kStatus      kind = "status"
	kStall       kind = "stall"
	kPing        kind = "ping"
	kPong        kind = "pong"
	kFailed      kind = "failed"
	kFailedNoted kind = "failed-noted"
)

type msg struct {
	Type       kind            `json:"type"`
	Hello      *Hello          `json:"hello,omitempty"`
	ID         []byte          `json:"id,omitempty"`
	LocalIndex int             `json:"local_index,omitempty"`
	LocalCount int             `json:"local_count,omitempty"`
	Seq        int             `json:"seq,omitempty"`
	Op         Op              `json:"op,omitempty"`
	Vals       []float64       `json:"vals,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Mismatch   bool            `json:"mismatch,omitempty"`
	Final      bool            `json:"final,omitempty"` // abort: rank 0's conclusion (Conclude)
	Payload    json.RawMessage `json:"payload,omitempty"`
	Clock      int64           `json:"clock,omitempty"` // pong: the answering process's Clock
	// abort: the verdict is the first reported error (Fail), Origin's.
	Reported bool `json:"reported,omitempty"`
	Origin   int  `json:"origin,omitempty"`
}

// PeerLost is the error a Group reports when another process goes away.
type PeerLost struct {
	Rank   int // -1 when unknown
	Reason string
	// Final: rank 0's conclusion on why the run ended (Conclude), the one
	// reason every process reports.
	Final bool
	// Reported: rank 0's verdict on the first error a process reported
	// (Fail); Origin is that process.
	Reported bool
	Origin   int
}

func (e *PeerLost) Error() string {
	if e.Rank >= 0 {
		return fmt.Sprintf("process rank %d %s", e.Rank, e.Reason)
	}
	return e.Reason
}

// MismatchError is a process that does not belong to the run (another world
// size or other arguments); every process of the run gets it.
type MismatchError struct{ Reason string }

func (e *MismatchError) Error() string { return e.Reason }

// readMsg reads one newline-terminated JSON message of at most limit bytes.
func readMsg(br *bufio.Reader, limit int, v any) error {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > limit {
			return fmt.Errorf("message longer than %d bytes", limit)
		}
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return err
		}
	}
	return json.Unmarshal(line, v)
}

type conn struct {
	rank int
	c    net.Conn
	br   *bufio.Reader
	wmu  sync.Mutex
	in   chan msg
	pong chan msg // answers to MeasureClocks' pings
}

func newConn(rank int, c net.Conn, br *bufio.Reader) *conn {
	return &conn{rank: rank, c: c, br: br, in: make(chan msg, 16), pong: make(chan msg, 1)}
}

func (c *conn) send(m msg, deadline time.Time) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.c.SetWriteDeadline(deadline)
	_, err = c.c.Write(append(b, '\n'))
	return err
}
