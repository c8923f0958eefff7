package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/syncbuf"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/proto"
)

// These tests run Serve's accept loop, handshakes, token exchange and queue
// on the host: a fake session stands in for the device part (it accepts
// and waits for "bye"), so no RDMA device is needed.

// syncBuffer is a log that connections may write from their goroutines.
type syncBuffer = syncbuf.Buffer

// fakeSession accepts the plan with made-up endpoints and holds the device
// until the client says bye (or goes).

// greeting is what a client sends first.
var greeting = fmt.Sprintf("RDMABENCH/%d\n", proto.ProtocolVersion)

func fakeSession(ctx context.Context, conn *proto.Conn, h *hello) error {
	if err := conn.Send(proto.Message{Type: proto.KindAccept, Endpoints: h.remote}, time.Second); err != nil {
		return err
	}
	_, err := conn.Expect(proto.KindBye, time.Minute)
	return err
}

type testServer struct {
	addr   string
	log    *syncBuffer
	cancel context.CancelFunc
	ended  chan struct{} // closed when Serve returned err
	err    error
}

// waitEnd waits for Serve to return, at most within.
func (ts *testServer) waitEnd(t *testing.T, within time.Duration, why string) {
	t.Helper()
	select {
	case <-ts.ended:
		if ts.err != nil {
			t.Error(ts.err)
		}
	case <-time.After(within):
		t.Errorf("Serve did not return within %v %s", within, why)
	}
}

// stop ends Serve as Ctrl-C does.
func (ts *testServer) stop(t *testing.T) {
	t.Helper()
	ts.cancel()
	ts.waitEnd(t, 10*time.Second, "after its context ended")
}

// startServe runs Serve on a loopback port with the fake session; cfg's
// zero fields get test values.
func startServe(t *testing.T, cfg ServerConfig) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{addr: ln.Addr().String(), log: &syncBuffer{}, ended: make(chan struct{})}
	cfg.Log, cfg.session = ts.log, fakeSession
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = time.Second
	}
	if cfg.Budget.MaxMem == 0 {
		cfg.Budget.MaxMem = 1 << 30
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts.cancel = cancel
	go func() {
		ts.err = Serve(ctx, ln, cfg)
		close(ts.ended)
	}()
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

// waitLog waits for the server to log want (it logs from the connection's
// goroutine, after the client may have returned).
func (ts *testServer) waitLog(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(ts.log.String(), want) {
		if time.Now().After(deadline) {
			t.Errorf("server log lacks %q:\n%s", want, ts.log.String())
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// client is a legitimate client up to the accept, with the engine's own
// handshake and plan request; it returns the connection, still holding
// the server's device until bye.
func client(addr string, token []byte) (*proto.Conn, error) {
	return clientWarned(addr, token, nil)
}

// clientWarned is client with the warnings writer of the client's device
// config (where it says that it waits its turn).
func clientWarned(addr string, token []byte, warnings io.Writer) (*proto.Conn, error) {
	nc, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	conn := proto.NewConn(nc)
	if err := clientHandshake(conn, token); err != nil {
		conn.Close()
		return nil, fmt.Errorf("handshake with %s: %w", addr, err)
	}
	plan := rbplan.DefaultPlan(WriteBW)
	if _, err := requestPlan(context.Background(), conn, ClientConfig{Addr: addr, Plan: plan, Device: DeviceConfig{Warnings: warnings}}, []proto.Endpoint{{QPN: 1, MTU: 1024}}, nil, false); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// serveOne runs a client through accept and bye.
func serveOne(addr string, token []byte) error { return serveQueued(addr, token, nil) }

// serveQueued is serveOne closing queued (when not nil) once the server has
// told the client to wait for its turn.
func serveQueued(addr string, token []byte, queued chan struct{}) error {
	var w io.Writer
	if queued != nil {
		w = &queuedSignal{queued: queued}
	}
	conn, err := clientWarned(addr, token, w)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Send(proto.Message{Type: proto.KindBye}, time.Second)
}

// queuedSignal closes queued at the client's "waiting ... for our turn".
type queuedSignal struct {
	once   sync.Once
	queued chan struct{}
}

func (q *queuedSignal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "for our turn") {
		q.once.Do(func() { close(q.queued) })
	}
	return len(p), nil
}

// awaitQueued waits until a client was told to wait (bounded).
func awaitQueued(t *testing.T, queued chan struct{}) {
	t.Helper()
	select {
	case <-queued:
	case <-time.After(5 * time.Second):
		t.Fatal("the second client was never told to wait for its turn")
	}
}

// dropped waits for the server to close c and says how long it took.
func dropped(t *testing.T, c net.Conn, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(within))
	buf := make([]byte, 256)
	for {
		_, err := c.Read(buf) // a greeting or an error message may come first
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("%s: still open after %v", c.LocalAddr(), within)
		}
		return time.Since(start)
	}
}

func dial(t *testing.T, addr string, send ...string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, s := range send {
		if _, err := io.WriteString(c, s); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// Idle, garbage and stalled connections are each dropped within the
// handshake timeout, and a client arriving while they are open is served
// at once: the server waits on none of them before the next accept.
func TestServeDropsStalledHandshakesAndServesOthers(t *testing.T) {
	const hsTimeout = 1500 * time.Millisecond
	ts := startServe(t, ServerConfig{HandshakeTimeout: hsTimeout})
	frame := string([]byte{0, 0, 0, 100}) + `{"type":"plan"` // 100 bytes announced, 14 sent
	bad := []struct {
		name string
		send []string
		// quick: the server can tell at once that it is not a client.
		quick bool
	}{
		{"connects and says nothing", nil, false},
		{"garbage without a newline", []string{"\x00\x01garbage"}, false},
		{"garbage line", []string{"GET / HTTP/1.0\r\n\r\n"}, true},
		{"greeting then silence", []string{greeting}, false},
		{"greeting then half a plan", []string{greeting, frame}, false},
		{"greeting then half a header", []string{greeting, "\x00\x00"}, false},
	}
	// Each connection's time from dial to the server's close.
	ends := make([]chan time.Duration, len(bad))
	for i, b := range bad {
		c := dial(t, ts.addr, b.send...)
		start := time.Now()
		ends[i] = make(chan time.Duration, 1)
		go func() {
			c.SetReadDeadline(start.Add(hsTimeout + 3*time.Second))
			io.Copy(io.Discard, c) // a greeting or an error message may come first
			ends[i] <- time.Since(start)
		}()
	}
	// The legitimate client arrives while all of them are open.
	t0 := time.Now()
	if err := serveOne(ts.addr, nil); err != nil {
		t.Fatalf("legitimate client: %v", err)
	}
	if took := time.Since(t0); took > hsTimeout/3 {
		t.Errorf("legitimate client served after %v, with a handshake timeout of %v", took, hsTimeout)
	}
	for i, b := range bad {
		took := <-ends[i]
		if b.quick && took > hsTimeout/2 {
			t.Errorf("%s: dropped after %v; it is not rdmabench from its first line", b.name, took)
		}
		if took > hsTimeout+time.Second {
			t.Errorf("%s: dropped %v after it connected, handshake timeout %v", b.name, took, hsTimeout)
		}
	}
	// And the server still serves.
	if err := serveOne(ts.addr, nil); err != nil {
		t.Fatalf("client after the drops: %v", err)
	}
	for _, want := range []string{"no rdmabench greeting within", `it sent "GET / HTTP/1.0`, "no plan within the server's handshake limit", "done"} {
		ts.waitLog(t, want)
	}
}

// Tokens: the right one passes; none, a wrong one, or one the server does
// not require each end in one line on both sides, and the server serves on.
func TestServeToken(t *testing.T) {
	tests := []struct {
		name           string
		server, client string
		clientErr      string // "" : served
		serverLog      string
	}{
		{"same token", "s3cret", "s3cret", "", "done"},
		{"client without a token", "s3cret", "", "the server requires a token: --token-file or RDMABENCH_TOKEN", "without answering the token challenge"},
		{"wrong token", "s3cret", "guess", "the server refused our token: --token-file or RDMABENCH_TOKEN differs from the server's", "wrong token"},
		{"token the server does not require", "", "s3cret", "the server requires no token but this client has one", "closed the control connection"},
		{"neither", "", "", "", "done"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var st, ct []byte
			if tt.server != "" {
				st = []byte(tt.server)
			}
			if tt.client != "" {
				ct = []byte(tt.client)
			}
			ts := startServe(t, ServerConfig{Token: st})
			err := serveOne(ts.addr, ct)
			switch {
			case tt.clientErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.clientErr != "" && (err == nil || !strings.Contains(err.Error(), tt.clientErr) || strings.Contains(err.Error(), "\n")):
				t.Fatalf("client error %v, want one line with %q", err, tt.clientErr)
			}
			if tt.server != "" { // the server serves on, to the right token
				if err := serveOne(ts.addr, st); err != nil {
					t.Fatalf("the next client: %v", err)
				}
			}
			ts.waitLog(t, tt.serverLog)
			ts.stop(t)
			log := ts.log.String()
			for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
				if !strings.HasPrefix(line, "client ") {
					t.Errorf("log line %q", line)
				}
			}
			if strings.Contains(log, tt.server) && tt.server != "" || tt.client != "" && strings.Contains(log, tt.client) {
				t.Errorf("a token appears in the log:\n%s", log)
			}
		})
	}
}

// Beyond --max-handshakes, new connections are closed at once and logged;
// once the slots free up, clients are served again.
func TestServeCapsHandshakes(t *testing.T) {
	const hsTimeout = 3 * time.Second
	ts := startServe(t, ServerConfig{MaxHandshakes: 2, HandshakeTimeout: hsTimeout})
	conns := []net.Conn{dial(t, ts.addr), dial(t, ts.addr), dial(t, ts.addr)}
	// Whichever of the three the server accepted last is beyond the cap:
	// closed at once, long before the handshake timeout frees the others.
	var open []net.Conn
	for i, closed := range closedWithin(conns, hsTimeout/2) {
		if !closed {
			open = append(open, conns[i])
		}
	}
	if len(open) != 2 {
		t.Fatalf("%d of 3 connections closed within %v, want the one beyond the cap", 3-len(open), hsTimeout/2)
	}
	// The idle two are dropped at the handshake timeout; then a client is
	// served (the slot frees a moment after the close: retry, bounded).
	for _, c := range open {
		dropped(t, c, hsTimeout+10*time.Second)
	}
	var err error
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err = serveOne(ts.addr, nil); err == nil || time.Now().After(end) {
			break
		}
	}
	if err != nil {
		t.Fatalf("after the idle connections were dropped: %v", err)
	}
	ts.waitLog(t, "refused: 2 connections already in their handshake or waiting (serve --max-handshakes)")
}

// closedWithin reads every connection at once until d has passed and says
// which the other side closed by then.
func closedWithin(conns []net.Conn, d time.Duration) []bool {
	closed := make([]bool, len(conns))
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(deadline)
			buf := make([]byte, 256)
			for {
				_, err := c.Read(buf)
				if err == nil {
					continue
				}
				var ne net.Error
				closed[i] = !(errors.As(err, &ne) && ne.Timeout())
				return
			}
		}()
	}
	wg.Wait()
	return closed
}

// One run at a time: a client whose plan passes while another runs is
// told to wait and gets its turn when the first ends; past the queue
// timeout a waiting client is refused as busy, in one line.
func TestServeQueuesClients(t *testing.T) {
	ts := startServe(t, ServerConfig{QueueTimeout: 700 * time.Millisecond})
	first, err := client(ts.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, waits := make(chan error, 1), make(chan struct{})
	go func() { second <- serveQueued(ts.addr, nil, waits) }()
	awaitQueued(t, waits)
	first.Send(proto.Message{Type: proto.KindBye}, time.Second)
	first.Close()
	if err := <-second; err != nil {
		t.Fatalf("the queued client: %v", err)
	}
	// Now hold the device past the queue timeout.
	holder, err := client(ts.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	start := time.Now()
	err = serveOne(ts.addr, nil)
	if err == nil || !strings.Contains(err.Error(), "server busy") || strings.Contains(err.Error(), "\n") {
		t.Errorf("client while the device is held: %v", err)
	}
	if took := time.Since(start); took < 600*time.Millisecond || took > 3*time.Second {
		t.Errorf("refused after %v, queue timeout 700ms", took)
	}
}

// MaxClients counts clients that had their turn on the device, not
// connections dropped in their handshake; Serve ends after the last.
func TestServeMaxClientsCountsServedClients(t *testing.T) {
	ts := startServe(t, ServerConfig{MaxClients: 2})
	dropped(t, dial(t, ts.addr, "garbage\n"), time.Second)
	dropped(t, dial(t, ts.addr, fmt.Sprintf("RDMABENCH/%d\n", proto.ProtocolVersion-1)), time.Second)
	for i := 0; i < 2; i++ {
		if err := serveOne(ts.addr, nil); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	ts.waitEnd(t, 3*time.Second, "after its 2 clients")
}

// Ctrl-C ends Serve at once, whatever its connections are doing (idle,
// mid-handshake, waiting their turn, running), and every goroutine it
// started has ended when it returns.
func TestServeStopJoinsEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	ts := startServe(t, ServerConfig{HandshakeTimeout: time.Minute, QueueTimeout: time.Minute})
	dial(t, ts.addr)
	dial(t, ts.addr, greeting)
	holder, err := client(ts.addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	queued, waits := make(chan error, 1), make(chan struct{})
	go func() { queued <- serveQueued(ts.addr, nil, waits) }()
	awaitQueued(t, waits)
	start := time.Now()
	ts.cancel()
	ts.waitEnd(t, 2*time.Second, "of its context ending")
	if took := time.Since(start); took > time.Second {
		t.Errorf("Serve took %v to stop", took)
	}
	if err := <-queued; err == nil {
		t.Error("the queued client was served after the server stopped")
	}
	// Serve's goroutines are gone; the runtime may take a moment to retire
	// the ones of its timers and our own client.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > base {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines after Serve returned, %d before:\n%s", n, base, buf[:runtime.Stack(buf, true)])
	}
}

// onCancel's stop returns only once an f already started has finished: f
// sets a stop flag in C memory that is freed right after stop returns (a
// Ctrl-C during a loopback run freed the flag under a pending Set).
func TestOnCancelWaitsForAStartedF(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	stop := onCancel(ctx, func() {
		close(started)
		<-release
		finished.Store(true)
	})
	cancel()
	<-started
	time.AfterFunc(50*time.Millisecond, func() { close(release) })
	stop()
	if !finished.Load() {
		t.Fatal("stop returned while f was running")
	}
	stop() // a second call returns too

	ctx2, cancel2 := context.WithCancel(context.Background())
	ran := false
	stop2 := onCancel(ctx2, func() { ran = true })
	stop2()
	cancel2()
	time.Sleep(20 * time.Millisecond)
	if ran {
		t.Error("f ran after stop")
	}
}

// A client that greeted and then sends no plan within the handshake limit is
// told why it is dropped: it used to see only the connection close ("refused
// the plan: peer closed the control connection: peer gone"), which names
// neither who closed it nor why.
func TestServeTellsAClientWithoutAPlanWhy(t *testing.T) {
	const hsTimeout = 300 * time.Millisecond
	ts := startServe(t, ServerConfig{HandshakeTimeout: hsTimeout})
	nc, err := net.DialTimeout("tcp", ts.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	conn := proto.NewConn(nc)
	defer conn.Close()
	if err := clientHandshake(conn, nil); err != nil {
		t.Fatal(err)
	}
	// No plan: the server's next frame is its reason, sent when the limit passes.
	_, err = conn.Recv(hsTimeout + 3*time.Second)
	var said *proto.PeerError
	if !errors.As(err, &said) || !strings.Contains(said.Text, "no plan within the server's handshake limit of 300ms") {
		t.Errorf("client got %v, want the server's reason", err)
	}
	ts.waitLog(t, "no plan within the server's handshake limit")
}

// The loopback server's reason for ending its client's session is what the
// client adds to "peer gone"; its "done" is none.
func TestServerLogFailure(t *testing.T) {
	for _, tt := range []struct{ log, want string }{
		{"", ""},
		{"client 127.0.0.1:5: done\n", ""},
		{"client 127.0.0.1:5: no plan within the server's handshake limit of 5s after the connection\n", "no plan within the server's handshake limit of 5s after the connection"},
		{"rdmabench: warning\nclient [::1]:7: size 64: peer [::1]:7 sent nothing for 1s\n", "size 64: peer [::1]:7 sent nothing for 1s"},
	} {
		var l serverLog
		l.Write([]byte(tt.log))
		if got := l.failure(); got != tt.want {
			t.Errorf("failure() of %q = %q, want %q", tt.log, got, tt.want)
		}
	}
}
