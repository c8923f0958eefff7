package launch

// The side of every other rank: reaching rank 0 and joining.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/auth"
)

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
