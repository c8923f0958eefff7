package launch

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"time"
)

// Hello is what each process tells rank 0 about itself.
type Hello struct {
	Rank    int             `json:"rank"`
	Host    string          `json:"host"`
	Pid     int             `json:"pid"`
	Payload json.RawMessage `json:"payload,omitempty"` // e.g. the devices it drives
}

type msg struct {
	Type    string          `json:"type"` // hello welcome reduce reduced bye abort
	Hello   *Hello          `json:"hello,omitempty"`
	Hellos  []Hello         `json:"hellos,omitempty"`
	ID      []byte          `json:"id,omitempty"`
	Seq     int             `json:"seq,omitempty"`
	Op      string          `json:"op,omitempty"`
	Vals    []float64       `json:"vals,omitempty"`
	Reason  string          `json:"reason,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// PeerLost is the error a Group reports when another process goes away.
type PeerLost struct {
	Rank   int // -1 when unknown
	Reason string
}

func (e *PeerLost) Error() string {
	if e.Rank >= 0 {
		return fmt.Sprintf("process rank %d %s", e.Rank, e.Reason)
	}
	return e.Reason
}

type conn struct {
	rank int
	c    net.Conn
	enc  *json.Encoder
	wmu  sync.Mutex
	in   chan msg
}

func (c *conn) send(m msg, deadline time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.c.SetWriteDeadline(deadline)
	return c.enc.Encode(m)
}

// Group is the set of processes of one run, as seen from one of them.
type Group struct {
	Rank, Size int
	ID         []byte  // the NCCL unique id from rank 0
	Hellos     []Hello // every process's hello, by rank

	timeout  time.Duration
	peers    []*conn // rank 0: one per other process; others: [0] is rank 0
	lost     chan struct{}
	lostErr  error
	lostOnce sync.Once
	closing  bool
	mu       sync.Mutex
	seq      int
	ln       net.Listener
}

// Config for Join.
type Config struct {
	Addr    string        // rank 0's host:port
	Rank    int           // process rank
	Size    int           // number of processes
	Timeout time.Duration // bound on every wait
	Hello   Hello
	// MakeID is called on rank 0 only, to create the NCCL unique id.
	MakeID func() ([]byte, error)
}

// Join connects the processes: rank 0 listens on Addr's port and waits for
// the others, which retry until Timeout. It returns once everyone is there.
func Join(cfg Config) (*Group, error) {
	g := &Group{Rank: cfg.Rank, Size: cfg.Size, timeout: cfg.Timeout, lost: make(chan struct{})}
	if g.timeout <= 0 {
		g.timeout = 2 * time.Minute
	}
	deadline := time.Now().Add(g.timeout)
	cfg.Hello.Rank = cfg.Rank
	if cfg.Size == 1 {
		id, err := cfg.MakeID()
		if err != nil {
			return nil, err
		}
		g.ID, g.Hellos = id, []Hello{cfg.Hello}
		return g, nil
	}
	if cfg.Rank == 0 {
		return g, g.serve(cfg, deadline)
	}
	return g, g.dial(cfg, deadline)
}

func (g *Group) serve(cfg Config, deadline time.Time) error {
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("rendezvous address %q: %w", cfg.Addr, err)
	}
	// Listen on every interface: the address the others use may be a name
	// or an interface other than the one we would pick.
	ln, err := net.Listen("tcp", net.JoinHostPort("", port))
	if err != nil {
		return fmt.Errorf("rendezvous: listen on port %s: %w (pick a free port with --rendezvous host:port)", port, err)
	}
	g.ln = ln
	id, err := cfg.MakeID()
	if err != nil {
		ln.Close()
		return err
	}
	g.ID = id
	g.Hellos = make([]Hello, cfg.Size)
	g.Hellos[0] = cfg.Hello
	g.peers = make([]*conn, cfg.Size)
	for joined := 1; joined < cfg.Size; {
		ln.(*net.TCPListener).SetDeadline(deadline)
		c, err := ln.Accept()
		if err != nil {
			ln.Close()
			var missing []int
			for r := 1; r < cfg.Size; r++ {
				if g.peers[r] == nil {
					missing = append(missing, r)
				}
			}
			return fmt.Errorf("rendezvous: timed out after %v waiting for process ranks %v to connect to port %s", g.timeout, missing, port)
		}
		c.SetReadDeadline(deadline)
		var m msg
		if err := json.NewDecoder(bufio.NewReader(io1(c))).Decode(&m); err != nil || m.Type != "hello" || m.Hello == nil {
			c.Close()
			continue
		}
		r := m.Hello.Rank
		if r <= 0 || r >= cfg.Size || g.peers[r] != nil {
			c.Close()
			continue
		}
		c.SetReadDeadline(time.Time{})
		g.peers[r] = &conn{rank: r, c: c, enc: json.NewEncoder(c), in: make(chan msg, 16)}
		g.Hellos[r] = *m.Hello
		joined++
	}
	ln.Close()
	for r := 1; r < cfg.Size; r++ {
		if err := g.peers[r].send(msg{Type: "welcome", ID: g.ID, Hellos: g.Hellos}, deadline); err != nil {
			return fmt.Errorf("rendezvous: process rank %d: %w", r, err)
		}
		go g.reader(g.peers[r])
	}
	return nil
}

// io1 returns c unbuffered-safe: the hello is read with a decoder that must
// not swallow later bytes, so read byte by byte until the first newline.
func io1(c net.Conn) *lineReader { return &lineReader{c: c} }

type lineReader struct {
	c    net.Conn
	done bool
}

func (l *lineReader) Read(p []byte) (int, error) {
	if l.done {
		return 0, errors.New("eof")
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := l.c.Read(p[:1])
	if n == 1 && p[0] == '\n' {
		l.done = true
	}
	return n, err
}

func (g *Group) dial(cfg Config, deadline time.Time) error {
	var c net.Conn
	var err error
	for {
		c, err = net.DialTimeout("tcp", cfg.Addr, time.Until(deadline))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("rendezvous: cannot reach rank 0 at %s within %v: %w", cfg.Addr, g.timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pc := &conn{rank: 0, c: c, enc: json.NewEncoder(c), in: make(chan msg, 16)}
	if err := pc.send(msg{Type: "hello", Hello: &cfg.Hello}, deadline); err != nil {
		c.Close()
		return fmt.Errorf("rendezvous: send hello to %s: %w", cfg.Addr, err)
	}
	c.SetReadDeadline(deadline)
	dec := json.NewDecoder(c)
	var m msg
	if err := dec.Decode(&m); err != nil || m.Type != "welcome" {
		c.Close()
		if err == nil {
			err = fmt.Errorf("unexpected %q", m.Type)
		}
		return fmt.Errorf("rendezvous: waiting for rank 0 at %s (all %d processes must start within %v): %w", cfg.Addr, cfg.Size, g.timeout, err)
	}
	c.SetReadDeadline(time.Time{})
	g.ID, g.Hellos = m.ID, m.Hellos
	g.peers = []*conn{pc}
	go g.readerDec(pc, dec)
	return nil
}

func (g *Group) reader(c *conn) { g.readerDec(c, json.NewDecoder(c.c)) }

// readerDec forwards messages and turns an unexpected end of the connection
// (or an abort message) into the group's lost signal.
func (g *Group) readerDec(c *conn, dec *json.Decoder) {
	for {
		var m msg
		if err := dec.Decode(&m); err != nil {
			g.mu.Lock()
			closing := g.closing
			g.mu.Unlock()
			if !closing {
				reason := "exited or was killed (its rendezvous connection closed)"
				if g.Rank != 0 {
					reason = "exited or was killed (lost the rendezvous connection to it)"
				}
				g.markLost(&PeerLost{Rank: c.rank, Reason: reason})
			}
			close(c.in)
			return
		}
		switch m.Type {
		case "abort":
			g.markLost(&PeerLost{Rank: -1, Reason: m.Reason})
		case "bye":
			g.mu.Lock()
			if g.Rank != 0 {
				g.closing = true
			}
			g.mu.Unlock()
			c.in <- m
		default:
			c.in <- m
		}
	}
}

func (g *Group) markLost(err error) {
	g.lostOnce.Do(func() {
		g.lostErr = err
		close(g.lost)
		// Rank 0 tells everyone else so nobody waits for a dead peer.
		if g.Rank == 0 {
			for _, p := range g.peers {
				if p != nil {
					go p.send(msg{Type: "abort", Reason: err.Error()}, time.Now().Add(2*time.Second))
				}
			}
		}
	})
}

// Lost is closed when another process goes away; Err then says which.
func (g *Group) Lost() <-chan struct{} { return g.lost }

// Err is the reason Lost was closed.
func (g *Group) Err() error {
	select {
	case <-g.lost:
		return g.lostErr
	default:
		return nil
	}
}

// Abort tells the other processes this one is giving up.
func (g *Group) Abort(reason string) {
	if g.Size == 1 {
		return
	}
	for _, p := range g.peers {
		if p != nil {
			p.send(msg{Type: "abort", Reason: fmt.Sprintf("process rank %d: %s", g.Rank, reason)}, time.Now().Add(2*time.Second))
		}
	}
}

func (g *Group) recv(c *conn, want string, deadline time.Time) (msg, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case m, ok := <-c.in:
		if !ok {
			if err := g.Err(); err != nil {
				return msg{}, err
			}
			return msg{}, &PeerLost{Rank: c.rank, Reason: "closed its connection"}
		}
		if m.Type != want {
			return msg{}, fmt.Errorf("rendezvous: process rank %d sent %q, expected %q", c.rank, m.Type, want)
		}
		return m, nil
	case <-g.lost:
		return msg{}, g.lostErr
	case <-t.C:
		return msg{}, &PeerLost{Rank: c.rank, Reason: fmt.Sprintf("did not answer within %v (stuck?)", g.timeout)}
	}
}

// SetTimeout changes the bound on each later wait (joining used the
// Config's).
func (g *Group) SetTimeout(d time.Duration) {
	if d > 0 {
		g.timeout = d
	}
}

// Reduce combines vals element-wise over all processes with "sum", "min"
// or "max"; every process gets the result. It doubles as a barrier.
func (g *Group) Reduce(vals []float64, op string) ([]float64, error) {
	if g.Size == 1 {
		return append([]float64{}, vals...), nil
	}
	g.seq++
	deadline := time.Now().Add(g.timeout)
	if g.Rank != 0 {
		if err := g.peers[0].send(msg{Type: "reduce", Seq: g.seq, Op: op, Vals: vals}, deadline); err != nil {
			return nil, g.lostOr(err)
		}
		m, err := g.recv(g.peers[0], "reduced", deadline)
		if err != nil {
			return nil, err
		}
		return m.Vals, nil
	}
	acc := append([]float64{}, vals...)
	for r := 1; r < g.Size; r++ {
		m, err := g.recv(g.peers[r], "reduce", deadline)
		if err != nil {
			return nil, err
		}
		if len(m.Vals) != len(acc) || m.Seq != g.seq || m.Op != op {
			return nil, fmt.Errorf("rendezvous: process rank %d is out of step (seq %d/%d)", r, m.Seq, g.seq)
		}
		for i, v := range m.Vals {
			switch op {
			case "min":
				acc[i] = math.Min(acc[i], v)
			case "max":
				acc[i] = math.Max(acc[i], v)
			default:
				acc[i] += v
			}
		}
	}
	for r := 1; r < g.Size; r++ {
		if err := g.peers[r].send(msg{Type: "reduced", Seq: g.seq, Vals: acc}, deadline); err != nil {
			return nil, g.lostOr(err)
		}
	}
	return acc, nil
}

func (g *Group) lostOr(err error) error {
	if e := g.Err(); e != nil {
		return e
	}
	return err
}

// Close ends the run in order: after it, a closed connection is no longer
// an error. Every process must call it.
func (g *Group) Close() error {
	if g.Size == 1 {
		return nil
	}
	deadline := time.Now().Add(g.timeout)
	var err error
	if g.Rank == 0 {
		for r := 1; r < g.Size; r++ {
			if _, e := g.recv(g.peers[r], "bye", deadline); e != nil && err == nil {
				err = e
			}
		}
		g.mu.Lock()
		g.closing = true
		g.mu.Unlock()
		for r := 1; r < g.Size; r++ {
			g.peers[r].send(msg{Type: "bye"}, deadline)
			g.peers[r].c.Close()
		}
		return err
	}
	if e := g.peers[0].send(msg{Type: "bye"}, deadline); e != nil {
		return g.lostOr(e)
	}
	_, err = g.recv(g.peers[0], "bye", deadline)
	g.peers[0].c.Close()
	return err
}
