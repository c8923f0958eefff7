// Package wire is what agents send each other: the probe and its reply, a
// fixed-size binary message carried in one UD datagram, and the address
// record (GID, QPN, Q_Key, LID, clock) served over HTTP beside /metrics so
// that peers can address their probes. Both are read strictly: a message
// of another length, magic or version is refused whole, and an address
// record is read up to a fixed size, so nothing a peer sends makes us
// allocate more than that.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Clock is where a timestamp or a hold time was read.
type Clock uint8

const (
	ClockCQE Clock = iota + 1 // the completion's hardware timestamp (ibv_wc_read_completion_ts)
	ClockCPU                  // the CPU's monotonic clock, read around the verbs calls
)

func (c Clock) String() string {
	switch c {
	case ClockCQE:
		return "cqe"
	case ClockCPU:
		return "cpu"
	}
	return fmt.Sprintf("Clock(%d)", uint8(c))
}

func (c Clock) valid() bool { return c == ClockCQE || c == ClockCPU }

// MarshalText writes the clock as its label, for the address record.
func (c Clock) MarshalText() ([]byte, error) {
	if !c.valid() {
		return nil, fmt.Errorf("clock %d unknown", uint8(c))
	}
	return []byte(c.String()), nil
}

// UnmarshalText reads "cqe" or "cpu".
func (c *Clock) UnmarshalText(b []byte) error {
	switch string(b) {
	case "cqe":
		*c = ClockCQE
	case "cpu":
		*c = ClockCPU
	default:
		return fmt.Errorf("clock %q: want cqe or cpu", b)
	}
	return nil
}

// Kind is a message's kind.
type Kind uint8

const (
	KindProbe Kind = iota + 1
	KindReply
)

func (k Kind) String() string {
	switch k {
	case KindProbe:
		return "probe"
	case KindReply:
		return "reply"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// The message's layout, big-endian:
//
//	0  4  magic "RBAP"
//	4  1  version (1)
//	5  1  kind
//	6  1  clock: the sender's send timestamp's in a probe, the hold time's in a reply
//	7  1  reserved, 0
//	8  8  session: the prober's, chosen at its start, echoed in the reply
//	16 8  sequence number, echoed
//	24 8  the prober's send timestamp in ns, echoed
//	32 8  the responder's hold time in ns (receive to reply), 0 in a probe
const (
	Magic   uint32 = 0x52424150 // "RBAP": rdmabench agent probe
	Version uint8  = 1
	Size           = 40
)

// MaxHold is the longest hold time a reply may report: a responder that
// held a probe a minute answered a probe long given up.
const MaxHold = time.Minute

// Message is a probe or its reply.
type Message struct {
	Kind    Kind
	Clock   Clock
	Session uint64
	Seq     uint64
	SentNS  uint64        // the prober's clock, meaningful to the prober only
	Hold    time.Duration // reply only
}

// The errors Unmarshal returns, for a caller that counts bad datagrams by
// cause.
var (
	ErrLength  = errors.New("wrong length")
	ErrMagic   = errors.New("not an rdmabench agent message")
	ErrVersion = errors.New("unknown version")
	ErrField   = errors.New("bad field")
)

// Reply is the reply to probe m, held for hold as read on clock.
func (m Message) Reply(hold time.Duration, clock Clock) Message {
	return Message{Kind: KindReply, Clock: clock, Session: m.Session, Seq: m.Seq, SentNS: m.SentNS, Hold: hold}
}

func (m Message) check() error {
	switch {
	case m.Kind != KindProbe && m.Kind != KindReply:
		return fmt.Errorf("%w: kind %d", ErrField, uint8(m.Kind))
	case !m.Clock.valid():
		return fmt.Errorf("%w: clock %d", ErrField, uint8(m.Clock))
	case m.Kind == KindProbe && m.Hold != 0:
		return fmt.Errorf("%w: a probe with a hold time", ErrField)
	case m.Hold < 0 || m.Hold > MaxHold:
		return fmt.Errorf("%w: hold time %v outside 0..%v", ErrField, m.Hold, MaxHold)
	}
	return nil
}

// Marshal writes m into b, which must be Size bytes or more (a registered
// send buffer: no allocation per probe); it returns the Size bytes used.
func (m Message) Marshal(b []byte) ([]byte, error) {
	if len(b) < Size {
		return nil, fmt.Errorf("%w: buffer of %d bytes, need %d", ErrLength, len(b), Size)
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	b = b[:Size]
	binary.BigEndian.PutUint32(b[0:], Magic)
	b[4], b[5], b[6], b[7] = Version, byte(m.Kind), byte(m.Clock), 0
	binary.BigEndian.PutUint64(b[8:], m.Session)
	binary.BigEndian.PutUint64(b[16:], m.Seq)
	binary.BigEndian.PutUint64(b[24:], m.SentNS)
	binary.BigEndian.PutUint64(b[32:], uint64(m.Hold))
	return b, nil
}

// Unmarshal reads a message of exactly Size bytes (a UD payload without its
// GRH).
func Unmarshal(b []byte) (Message, error) {
	if len(b) != Size {
		return Message{}, fmt.Errorf("%w: %d bytes, want %d", ErrLength, len(b), Size)
	}
	if binary.BigEndian.Uint32(b[0:]) != Magic {
		return Message{}, ErrMagic
	}
	if b[4] != Version {
		return Message{}, fmt.Errorf("%w %d (this agent speaks %d)", ErrVersion, b[4], Version)
	}
	if b[7] != 0 {
		return Message{}, fmt.Errorf("%w: reserved byte %d", ErrField, b[7])
	}
	hold := binary.BigEndian.Uint64(b[32:])
	if hold > uint64(MaxHold) {
		return Message{}, fmt.Errorf("%w: hold time %d ns over %v", ErrField, hold, MaxHold)
	}
	m := Message{
		Kind:    Kind(b[5]),
		Clock:   Clock(b[6]),
		Session: binary.BigEndian.Uint64(b[8:]),
		Seq:     binary.BigEndian.Uint64(b[16:]),
		SentNS:  binary.BigEndian.Uint64(b[24:]),
		Hold:    time.Duration(hold),
	}
	if err := m.check(); err != nil {
		return Message{}, err
	}
	return m, nil
}
