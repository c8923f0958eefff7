package launch

import (
	"context"
	"sync"
	"time"
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
	notices inflight
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
