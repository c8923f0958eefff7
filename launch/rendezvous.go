package launch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/auth"
)

// Bounds on what a peer can make us hold: one message, and the handshakes
// in flight before they are rejected outright.
const (
	maxMsgBytes   = 1 << 20
	maxHelloBytes = 64 << 10
	maxHandshakes = 4096
	// helloTimeout bounds one connection's greeting, token exchange and
	// hello: an idle connection (a port scanner) is dropped after it.
	helloTimeout = 10 * time.Second
	protoVersion = "ncclbench-rendezvous/2"
)

// Hello is what each process tells rank 0 about itself. Size and Key must
// match rank 0's: a process started for another job or with other
// arguments is refused.
type Hello struct {
	Rank int    `json:"rank"`
	Size int    `json:"size"`
	Key  string `json:"key,omitempty"` // the arguments that must match
	Host string `json:"host"`
	Pid  int    `json:"pid"`
}

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

// Group is the set of processes of one run, as seen from one of them.
type Group struct {
	Rank, Size int
	ID         []byte  // the NCCL unique id from rank 0
	Hellos     []Hello // rank 0 only: every process's hello, by rank
	// LocalIndex is this process's place among the processes on its host
	// (by rank), LocalCount their number: a local rank for launchers that
	// do not give one.
	LocalIndex, LocalCount int
	// Joined is how long Join took.
	Joined time.Duration

	timeout  time.Duration
	peers    []*conn // rank 0: one per other process; others: [0] is rank 0
	lost     chan struct{}
	lostErr  error
	lostOnce sync.Once
	// notices tracks rank 0's abort messages about a lost process, sent in
	// the background; Flush waits for them.
	notices sync.WaitGroup
	closing bool
	mu      sync.Mutex
	seq     int
	// keepGoing and dead: rank 0 of a KeepGoing group records why each
	// lost process went away, instead of losing the group.
	keepGoing bool
	dead      map[int]string
	addrs     []string // rank 0: the address each process connected from
	// status answers a census; cen is rank 0's record of the answers.
	status func() []byte
	cen    *census
	fail   failures
}

// Config for Join.
type Config struct {
	Addr    string        // rank 0's host:port
	Rank    int           // process rank
	Size    int           // number of processes
	Timeout time.Duration // bound on every wait
	Hello   Hello
	// Token, when set, must be held by every process (auth package).
	Token []byte
	// PortHint says where the port came from, for the error when rank 0
	// cannot listen on it.
	PortHint string
	// MakeID is called on rank 0 only, to create the NCCL unique id; nil
	// for programs that need none.
	MakeID func() ([]byte, error)
	// Proto names the program's rendezvous in the greeting (default
	// ncclbench's), so that processes of another program on the same port
	// are refused instead of joined.
	Proto string
	// TokenHint says how a process is given the token, for the error when
	// rank 0 requires one (default ncclbench's flag and variable).
	TokenHint string
	// KeepGoing: on rank 0, a process that goes away is reported by Recv
	// and Dead for that rank alone, and the run goes on without it (the
	// mesh); without it the whole group is lost (a collective cannot
	// finish without every rank).
	KeepGoing bool
	// Status, when set, is what this process answers when rank 0 takes a
	// census (Census): called on a reader goroutine, it must not block.
	Status func() []byte
	// Waiting, when set, is told once, NoticeAfter into the join (default
	// DefaultNoticeAfter), what this process still waits for: one line
	// (no newline), so that a process started without rank 0 (or rank 0
	// without the others) is not silent for the whole Timeout. The join
	// goes on waiting.
	Waiting     func(line string)
	NoticeAfter time.Duration
}

// DefaultNoticeAfter is when a join still waiting says so (Config.Waiting).
const DefaultNoticeAfter = 5 * time.Second

func (cfg *Config) defaults() {
	if cfg.Proto == "" {
		cfg.Proto = protoVersion
	}
	if cfg.TokenHint == "" {
		cfg.TokenHint = "--token-file or NCCL_BENCH_TOKEN"
	}
	if cfg.MakeID == nil {
		cfg.MakeID = func() ([]byte, error) { return nil, nil }
	}
	if cfg.NoticeAfter <= 0 {
		cfg.NoticeAfter = DefaultNoticeAfter
	}
}

// Join is JoinContext without a context: it ends only when everyone is
// there, or at Timeout.
func Join(cfg Config) (*Group, error) { return JoinContext(context.Background(), cfg) }

// Interrupted is the error of a join that ctx ended (Ctrl-C, SIGTERM):
// errors.Is(err, context.Canceled) (or ctx's cause) holds, and What says
// what the process was waiting for.
type Interrupted struct {
	What  string
	Cause error
}

func (e *Interrupted) Error() string { return "rendezvous: interrupted " + e.What }
func (e *Interrupted) Unwrap() error { return e.Cause }

// JoinContext connects the processes: rank 0 listens on Addr's port and
// waits for the others, which retry until Timeout. It returns once
// everyone is there. Every wait of the join (the accept, the dial and its
// retries, the greeting, the token, the welcome) ends at once when ctx
// does, with an *Interrupted error: the listener or the connection is
// closed, so that no read outlives ctx.
func JoinContext(ctx context.Context, cfg Config) (*Group, error) {
	start := time.Now()
	cfg.defaults()
	g := &Group{Rank: cfg.Rank, Size: cfg.Size, timeout: cfg.Timeout, lost: make(chan struct{}), LocalCount: 1,
		keepGoing: cfg.KeepGoing && cfg.Rank == 0, dead: map[int]string{}, status: cfg.Status,
		fail: failures{ack: make(chan struct{}, 1)}}
	if cfg.Rank == 0 {
		g.initCensus()
	}
	if g.timeout <= 0 {
		g.timeout = 2 * time.Minute
	}
	deadline := start.Add(g.timeout)
	cfg.Hello.Rank, cfg.Hello.Size = cfg.Rank, cfg.Size
	var err error
	switch {
	case cfg.Size == 1:
		g.ID, err = cfg.MakeID()
		g.Hellos = []Hello{cfg.Hello}
	case ctx.Err() != nil:
		err = &Interrupted{What: "before the rendezvous", Cause: context.Cause(ctx)}
	case cfg.Rank == 0:
		err = g.serve(ctx, cfg, deadline)
	default:
		err = g.dial(ctx, cfg, deadline)
	}
	g.Joined = time.Since(start)
	if err != nil {
		return nil, err
	}
	return g, nil
}

type joinReq struct {
	c     net.Conn
	br    *bufio.Reader
	hello Hello
}

// handshake runs one incoming connection up to its hello, within
// helloTimeout. Anything else (an idle or garbage connection, a wrong
// token) is closed without holding up the others.
func handshake(c net.Conn, proto string, token []byte, deadline time.Time) (*joinReq, error) {
	if d := time.Now().Add(helloTimeout); d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	g, _ := json.Marshal(greeting{Proto: proto, Token: token != nil})
	if _, err := c.Write(append(g, '\n')); err != nil {
		return nil, err
	}
	if token != nil {
		if err := auth.Challenge(c, token); err != nil {
			return nil, err
		}
	}
	br := bufio.NewReaderSize(c, 4096)
	var m msg
	if err := readMsg(br, maxHelloBytes, &m); err != nil {
		return nil, err
	}
	if m.Type != kHello || m.Hello == nil {
		return nil, fmt.Errorf("expected a hello, got %q", m.Type)
	}
	c.SetDeadline(time.Time{})
	return &joinReq{c: c, br: br, hello: *m.Hello}, nil
}

func reject(c net.Conn, why error) {
	var mm *MismatchError
	b, _ := json.Marshal(msg{Type: kReject, Reason: why.Error(), Mismatch: errors.As(why, &mm)})
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	c.Write(append(b, '\n'))
	c.Close()
}

// missing is up to 16 ranks that have not joined rank 0 yet.
func (g *Group) missing() []int {
	var out []int
	for r := 1; r < len(g.peers) && len(out) < 16; r++ {
		if g.peers[r] == nil {
			out = append(out, r)
		}
	}
	return out
}

func (g *Group) serve(ctx context.Context, cfg Config, deadline time.Time) error {
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("rendezvous address %q: %w", cfg.Addr, err)
	}
	// Listen on every interface: the address the others use may be a name
	// or an interface other than the one we would pick.
	ln, err := net.Listen("tcp", net.JoinHostPort("", port))
	if err != nil {
		hint := "pick a free port with --rendezvous host:port"
		if cfg.PortHint != "" {
			hint = cfg.PortHint
		}
		return fmt.Errorf("rendezvous: cannot listen on port %s: %w (%s)", port, err, hint)
	}
	if g.ID, err = cfg.MakeID(); err != nil {
		ln.Close()
		return err
	}
	joins, endAccept := acceptJoins(ln, cfg, deadline)
	defer endAccept()
	g.Hellos = make([]Hello, cfg.Size)
	g.Hellos[0] = cfg.Hello
	g.peers = make([]*conn, cfg.Size)
	g.addrs = make([]string, cfg.Size)
	if err := g.gather(ctx, cfg, deadline, port, joins); err != nil {
		return err
	}
	if err := g.welcome(cfg); err != nil {
		return err
	}
	for r := 1; r < cfg.Size; r++ {
		go g.reader(g.peers[r])
	}
	return nil
}

// acceptJoins accepts on ln, each handshake on its own goroutine (at most
// maxHandshakes at once), and hands the processes that greeted properly
// to joins. end closes ln, joins the accept loop and closes connections
// still in their handshake (an idle port scanner): not waited for.
func acceptJoins(ln net.Listener, cfg Config, deadline time.Time) (joins <-chan *joinReq, end func()) {
	ch := make(chan *joinReq)
	stop := make(chan struct{})
	var pmu sync.Mutex
	pending := map[net.Conn]bool{} // handshakes in flight
	acceptDone := make(chan struct{})
	go func() { // accept loop: every handshake on its own goroutine
		defer close(acceptDone)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			pmu.Lock()
			flooded := len(pending) >= maxHandshakes
			if !flooded {
				pending[c] = true
			}
			pmu.Unlock()
			if flooded {
				c.Close()
				continue
			}
			go func() {
				j, err := handshake(c, cfg.Proto, cfg.Token, deadline)
				pmu.Lock()
				delete(pending, c)
				pmu.Unlock()
				if err != nil {
					c.Close()
					return
				}
				select {
				case ch <- j:
				case <-stop:
					reject(c, errors.New("the rendezvous is over"))
				}
			}()
		}
	}()
	return ch, func() {
		ln.Close()
		<-acceptDone
		close(stop)
		pmu.Lock()
		for c := range pending {
			c.Close()
		}
		pmu.Unlock()
	}
}

// gather waits for every process rank to join, until deadline or ctx
// ends, admitting each (admit) or refusing it; a process that does not
// belong to this run ends the rendezvous for all, after a grace for
// those about to join to learn why.
func (g *Group) gather(ctx context.Context, cfg Config, deadline time.Time, port string, joins <-chan *joinReq) error {
	var odd error // the first process that does not belong to this run
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	notice := time.NewTimer(cfg.NoticeAfter)
	defer notice.Stop()
	grace := false
	for joined := 1; joined < cfg.Size; {
		if odd != nil && !grace {
			// The run cannot go ahead: tell whoever joins in the next moments
			// why, then everyone.
			grace = true
			timer.Reset(min(2*time.Second, time.Until(deadline)))
		}
		var j *joinReq
		select {
		case j = <-joins:
		case <-notice.C:
			if cfg.Waiting != nil {
				cfg.Waiting(fmt.Sprintf("waiting for process ranks %v to join on port %s (%.0f s of the rendezvous timeout, %.0f s)", g.missing(), port, time.Since(deadline.Add(-g.timeout)).Seconds(), g.timeout.Seconds()))
			}
			continue
		case <-ctx.Done():
			err := &Interrupted{What: fmt.Sprintf("while waiting for process ranks %v to join on port %s", g.missing(), port), Cause: context.Cause(ctx)}
			g.rejectAll(errors.New("rank 0 was interrupted during the rendezvous"))
			return err
		case <-timer.C:
			var err error = fmt.Errorf("rendezvous: timed out after %v waiting for process ranks %v to connect to port %s", g.timeout, g.missing(), port)
			if odd != nil {
				err = odd
			}
			g.rejectAll(err)
			return err
		}
		h := j.hello
		switch {
		case h.Size != cfg.Size:
			e := &MismatchError{fmt.Sprintf("process rank %d (%s pid %d) says there are %d processes, rank 0 says %d: start every process of one job with the same WORLD_SIZE", h.Rank, h.Host, h.Pid, h.Size, cfg.Size)}
			if odd == nil {
				odd = e
			}
			reject(j.c, e)
			continue
		case h.Rank <= 0 || h.Rank >= cfg.Size:
			reject(j.c, fmt.Errorf("rank %d is not in 1..%d", h.Rank, cfg.Size-1))
			continue
		case g.peers[h.Rank] != nil:
			o := g.Hellos[h.Rank]
			reject(j.c, fmt.Errorf("process rank %d already joined from %s pid %d (a process of an earlier job? use a job token)", h.Rank, o.Host, o.Pid))
			continue
		case h.Key != cfg.Hello.Key && odd == nil:
			odd = &MismatchError{fmt.Sprintf("process rank %d (%s pid %d) runs %q but rank 0 runs %q: start every process with the same arguments", h.Rank, h.Host, h.Pid, h.Key, cfg.Hello.Key)}
		}
		g.peers[h.Rank] = newConn(h.Rank, j.c, j.br)
		g.Hellos[h.Rank] = h
		if ta, ok := j.c.RemoteAddr().(*net.TCPAddr); ok {
			g.addrs[h.Rank] = ta.IP.String()
		}
		joined++
	}
	if odd != nil {
		g.rejectAll(odd)
		return odd
	}
	return nil
}

// welcome gives each process what it needs: the id and its place on its
// host.
func (g *Group) welcome(cfg Config) error {
	byHost := map[string]int{}
	index := make([]int, cfg.Size)
	for r, h := range g.Hellos {
		index[r] = byHost[h.Host]
		byHost[h.Host]++
	}
	g.LocalIndex, g.LocalCount = index[0], byHost[g.Hellos[0].Host]
	wdl := time.Now().Add(g.timeout)
	for r := 1; r < cfg.Size; r++ {
		if err := g.peers[r].send(msg{Type: kWelcome, ID: g.ID, LocalIndex: index[r], LocalCount: byHost[g.Hellos[r].Host]}, wdl); err != nil {
			g.rejectAll(fmt.Errorf("process rank %d went away during the rendezvous", r))
			return fmt.Errorf("rendezvous: process rank %d: %w", r, err)
		}
	}
	return nil
}

func (g *Group) rejectAll(why error) {
	for _, p := range g.peers {
		if p != nil {
			reject(p.c, why)
		}
	}
}

func (g *Group) dial(ctx context.Context, cfg Config, deadline time.Time) error {
	start := deadline.Add(-g.timeout)
	setConnected, stopNotice := g.noticeWhileDialing(cfg, start)
	defer stopNotice()
	interrupted := func(what string) error {
		return &Interrupted{What: what + " rank 0 at " + cfg.Addr, Cause: context.Cause(ctx)}
	}
	c, err := g.reach(ctx, cfg, deadline)
	if err != nil {
		if ctx.Err() != nil {
			return interrupted("while waiting for")
		}
		return err
	}
	setConnected()
	// ctx ending closes the connection: the reads below return at once.
	stopWatch := context.AfterFunc(ctx, func() { c.Close() })
	defer stopWatch()
	fail := func(format string, a ...any) error {
		c.Close()
		if ctx.Err() != nil {
			return interrupted("after joining")
		}
		return fmt.Errorf("rendezvous: rank 0 at %s: "+format, append([]any{cfg.Addr}, a...)...)
	}
	c.SetDeadline(deadline)
	br := bufio.NewReaderSize(c, 4096)
	if err := greet(c, br, cfg); err != nil {
		return fail("%v", err)
	}
	pc := newConn(0, c, br)
	if err := pc.send(msg{Type: kHello, Hello: &cfg.Hello}, deadline); err != nil {
		return fail("send hello: %v", err)
	}
	var m msg
	if err := readMsg(br, maxMsgBytes, &m); err != nil {
		return fail("waiting for the other processes (all %d must start within %v): %v", cfg.Size, g.timeout, err)
	}
	if !stopWatch() {
		return interrupted("after joining")
	}
	if m.Type == kReject {
		c.Close()
		if m.Mismatch {
			return &MismatchError{m.Reason}
		}
		return errors.New(m.Reason)
	}
	if m.Type != kWelcome {
		return fail("unexpected %q", m.Type)
	}
	c.SetDeadline(time.Time{})
	g.ID, g.LocalIndex, g.LocalCount = m.ID, m.LocalIndex, m.LocalCount
	g.peers = []*conn{pc}
	go g.reader(pc)
	return nil
}

// noticeWhileDialing says, after cfg.NoticeAfter, what this process
// waits for: rank 0, or once connected (setConnected) the others.
func (g *Group) noticeWhileDialing(cfg Config, start time.Time) (setConnected func(), stop func() bool) {
	var nmu sync.Mutex
	connected := false
	notice := time.AfterFunc(cfg.NoticeAfter, func() {
		if cfg.Waiting == nil {
			return
		}
		nmu.Lock()
		up := connected
		nmu.Unlock()
		of := fmt.Sprintf("%.0f s of the rendezvous timeout, %.0f s", time.Since(start).Seconds(), g.timeout.Seconds())
		if up {
			cfg.Waiting(fmt.Sprintf("joined rank 0 at %s; waiting for the other processes of %d (%s)", cfg.Addr, cfg.Size, of))
		} else {
			cfg.Waiting(fmt.Sprintf("waiting for rank 0 at %s (%s)", cfg.Addr, of))
		}
	})
	return func() {
		nmu.Lock()
		connected = true
		nmu.Unlock()
	}, notice.Stop
}

// reach dials rank 0 until it answers, deadline passes or ctx ends (then
// the caller reports the interruption); the error is the last refusal,
// rather than the deadline's timeout.
func (g *Group) reach(ctx context.Context, cfg Config, deadline time.Time) (net.Conn, error) {
	dctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	var why error // the last refusal, rather than the deadline's timeout
	for {
		c, err := d.DialContext(dctx, "tcp", cfg.Addr)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if why == nil || dctx.Err() == nil {
			why = err
		}
		if time.Now().After(deadline) || dctx.Err() != nil {
			return nil, fmt.Errorf("rendezvous: cannot reach rank 0 at %s within %v: %w", cfg.Addr, g.timeout, why)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// greet reads rank 0's greeting and, when it asks for one, proves the
// job token.
func greet(c net.Conn, br *bufio.Reader, cfg Config) error {
	var gr greeting
	if err := readMsg(br, maxHelloBytes, &gr); err != nil || gr.Proto != cfg.Proto {
		if err == nil {
			err = fmt.Errorf("protocol %q, want %q (another program on this port, or another version?)", gr.Proto, cfg.Proto)
		}
		return err
	}
	switch {
	case gr.Token && cfg.Token == nil:
		return fmt.Errorf("it requires a job token: give this process the token (%s) as every process", cfg.TokenHint)
	case !gr.Token && cfg.Token != nil:
		return errors.New("it has no job token but this process has one: give every process the same token")
	case gr.Token:
		// The challenge is read through br, which may hold nothing past the
		// greeting: the server writes nothing more before our answer.
		if err := auth.Respond(struct {
			io.Reader
			io.Writer
		}{br, c}, cfg.Token); err != nil {
			return err
		}
	}
	return nil
}

// reader forwards messages and turns an unexpected end of the connection
// (or an abort message) into the group's lost signal.
func (g *Group) reader(c *conn) {
	for {
		var m msg
		if err := readMsg(c.br, maxMsgBytes, &m); err != nil {
			g.mu.Lock()
			closing := g.closing
			g.mu.Unlock()
			if !closing {
				reason := "exited or was killed (its rendezvous connection closed)"
				if g.Rank != 0 {
					reason = "exited or was killed (lost the rendezvous connection to it)"
				}
				if g.keepGoing {
					g.setDead(c.rank, reason)
				} else {
					g.markLost(&PeerLost{Rank: c.rank, Reason: reason})
				}
			}
			close(c.in)
			return
		}
		if g.outOfBand(c, m) || g.failureMessage(c, m) {
			continue
		}
		switch m.Type {
		case kAbort, kReject:
			if g.keepGoing { // that process gives up; the others go on
				g.setDead(c.rank, m.Reason)
				c.c.Close()
				continue
			}
			g.markLost(&PeerLost{Rank: -1, Reason: m.Reason, Final: m.Final, Reported: m.Reported, Origin: m.Origin})
		case kBye:
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
		// Rank 0 tells everyone else so nobody waits for a dead peer. The
		// notices are counted before lost closes: a process that sees Lost
		// and calls Flush must find them counted, or it exits before they
		// are sent (and the others blame rank 0).
		defer close(g.lost)
		if g.Rank == 0 {
			for _, p := range g.peers {
				if p != nil {
					g.notices.Add(1)
					go func() {
						defer g.notices.Done()
						m := msg{Type: kAbort, Reason: err.Error()}
						if pl := (*PeerLost)(nil); errors.As(err, &pl) {
							m.Final, m.Reported, m.Origin = pl.Final, pl.Reported, pl.Origin
						}
						p.send(m, time.Now().Add(2*time.Second))
					}()
				}
			}
		}
	})
}

// Flush waits until rank 0's notices about a lost process are sent (each
// bounded by 2 s). A process about to exit calls it: exiting first would
// close rank 0's connections before the notice, and the others would
// blame rank 0 instead of the process that died.
func (g *Group) Flush() { g.notices.Wait() }

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
			p.send(msg{Type: kAbort, Reason: fmt.Sprintf("process rank %d: %s", g.Rank, reason)}, time.Now().Add(2*time.Second))
		}
	}
}

func (g *Group) recv(c *conn, want kind, deadline time.Time) (msg, error) {
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

// Gather sends payload to rank 0, which gets every process's by rank; the
// others get nil.
func (g *Group) Gather(payload []byte) ([][]byte, error) {
	if g.Size == 1 {
		return [][]byte{payload}, nil
	}
	deadline := time.Now().Add(g.timeout)
	if g.Rank != 0 {
		return nil, g.lostOr(g.peers[0].send(msg{Type: kGather, Payload: payload}, deadline))
	}
	out := make([][]byte, g.Size)
	out[0] = payload
	for r := 1; r < g.Size; r++ {
		m, err := g.recv(g.peers[r], kGather, deadline)
		if err != nil {
			return nil, err
		}
		out[r] = bytes.Clone(m.Payload)
	}
	return out, nil
}

// Op is how Reduce combines the processes' values.
type Op string

const (
	Sum Op = "sum"
	Min Op = "min"
	Max Op = "max"
)

// Reduce combines vals element-wise over all processes by op; every
// process gets the result. It doubles as a barrier.
func (g *Group) Reduce(vals []float64, op Op) ([]float64, error) {
	if g.Size == 1 {
		return append([]float64{}, vals...), nil
	}
	g.seq++
	deadline := time.Now().Add(g.timeout)
	if g.Rank != 0 {
		if err := g.peers[0].send(msg{Type: kReduce, Seq: g.seq, Op: op, Vals: vals}, deadline); err != nil {
			return nil, g.lostOr(err)
		}
		m, err := g.recv(g.peers[0], kReduced, deadline)
		if err != nil {
			return nil, err
		}
		return m.Vals, nil
	}
	acc := append([]float64{}, vals...)
	for r := 1; r < g.Size; r++ {
		m, err := g.recv(g.peers[r], kReduce, deadline)
		if err != nil {
			return nil, err
		}
		if len(m.Vals) != len(acc) || m.Seq != g.seq || m.Op != op {
			return nil, fmt.Errorf("rendezvous: process rank %d is out of step (seq %d/%d)", r, m.Seq, g.seq)
		}
		for i, v := range m.Vals {
			switch op {
			case Min:
				acc[i] = math.Min(acc[i], v)
			case Max:
				acc[i] = math.Max(acc[i], v)
			default:
				acc[i] += v
			}
		}
	}
	for r := 1; r < g.Size; r++ {
		if err := g.peers[r].send(msg{Type: kReduced, Seq: g.seq, Vals: acc}, deadline); err != nil {
			return nil, g.lostOr(err)
		}
	}
	return acc, nil
}

func (g *Group) lostOr(err error) error {
	if err == nil {
		return nil
	}
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
			if _, dead := g.Dead(r); dead {
				continue // reported already; the others end in order
			}
			if _, e := g.recv(g.peers[r], kBye, deadline); e != nil && err == nil {
				if _, dead := g.Dead(r); !dead {
					err = e
				}
			}
		}
		g.mu.Lock()
		g.closing = true
		g.mu.Unlock()
		for r := 1; r < g.Size; r++ {
			g.peers[r].send(msg{Type: kBye}, deadline)
			g.peers[r].c.Close()
		}
		return err
	}
	if e := g.peers[0].send(msg{Type: kBye}, deadline); e != nil {
		return g.lostOr(e)
	}
	_, err = g.recv(g.peers[0], kBye, deadline)
	g.peers[0].c.Close()
	return err
}

// setDead records why a process of a KeepGoing group went away; the first
// reason stays (Drop's, before the closed connection's).
func (g *Group) setDead(rank int, reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.dead[rank]; !ok {
		g.dead[rank] = reason
	}
}

// Dead says whether a process of a KeepGoing group went away, and why.
func (g *Group) Dead(rank int) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	why, ok := g.dead[rank]
	return why, ok
}

// Drop ends rank 0's connection to a process that no longer answers in
// time: the process then fails (it lost rank 0) and Dead reports reason.
func (g *Group) Drop(rank int, reason string) {
	if g.Rank != 0 || rank <= 0 || rank >= g.Size || g.peers[rank] == nil {
		return
	}
	g.setDead(rank, reason)
	g.peers[rank].c.Close()
}

// PeerAddr is the IP address a process connected from, as rank 0 saw it
// (rank 0 only; "" for rank 0 itself): the address other processes can
// reach it at.
func (g *Group) PeerAddr(rank int) string {
	if g.Rank != 0 || rank <= 0 || rank >= len(g.addrs) {
		return ""
	}
	return g.addrs[rank]
}

func (g *Group) link(rank int) (*conn, error) {
	switch {
	case g.Size == 1:
		return nil, errors.New("rendezvous: a process alone has no one to talk to")
	case g.Rank == 0 && rank > 0 && rank < g.Size:
		return g.peers[rank], nil
	case g.Rank != 0 && rank == 0:
		return g.peers[0], nil
	}
	return nil, fmt.Errorf("rendezvous: process rank %d cannot talk to rank %d (only to and from rank 0)", g.Rank, rank)
}

// Send gives payload to a process: rank 0 to any, the others to rank 0.
func (g *Group) Send(rank int, payload []byte, deadline time.Time) error {
	c, err := g.link(rank)
	if err != nil {
		return err
	}
	if why, dead := g.Dead(rank); dead {
		return &PeerLost{Rank: rank, Reason: why}
	}
	if err := c.send(msg{Type: kData, Payload: payload}, deadline); err != nil {
		if why, dead := g.Dead(rank); dead {
			return &PeerLost{Rank: rank, Reason: why}
		}
		return g.lostOr(&PeerLost{Rank: rank, Reason: fmt.Sprintf("could not be written to: %v", err)})
	}
	return nil
}

// Recv waits until deadline for the next payload a process sends with
// Send. A process that went away is a *PeerLost.
func (g *Group) Recv(rank int, deadline time.Time) ([]byte, error) {
	c, err := g.link(rank)
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var lost <-chan struct{}
	if !g.keepGoing {
		lost = g.lost
	}
	select {
	case m, ok := <-c.in:
		if !ok {
			if why, dead := g.Dead(rank); dead {
				return nil, &PeerLost{Rank: rank, Reason: why}
			}
			if err := g.Err(); err != nil {
				return nil, err
			}
			return nil, &PeerLost{Rank: rank, Reason: "closed its connection"}
		}
		if m.Type != kData {
			return nil, fmt.Errorf("rendezvous: process rank %d sent %q, expected data", rank, m.Type)
		}
		return m.Payload, nil
	case <-lost:
		return nil, g.lostErr
	case <-t.C:
		return nil, &PeerLost{Rank: rank, Reason: "did not answer in time"}
	}
}
