package launch

// Rank 0's side of the rendezvous: accepting, checking and gathering the
// other processes, then welcoming them.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rdmabench/rdmabench/auth"
)

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
