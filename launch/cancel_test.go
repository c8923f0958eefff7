package launch

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
)

// Ctrl-C or SIGTERM during the rendezvous (issue 48 item 1): wherever a
// process waits, ctx ending ends the join at once with an *Interrupted,
// not at the rendezvous timeout. Join took no context: each of these
// waited the full two minutes.
func TestJoinContextCancel(t *testing.T) {
	cases := []struct {
		name string
		join func(ctx context.Context, addr string) error
		want string
	}{
		{"rank 1 dialling a rank 0 that never comes", func(ctx context.Context, addr string) error {
			_, err := JoinContext(ctx, cfgs(addr, 2, 1, 2*time.Minute)[1])
			return err
		}, "waiting for rank 0 at"},
		{"rank 0 waiting for rank 1", func(ctx context.Context, addr string) error {
			_, err := JoinContext(ctx, cfgs(addr, 2, 1, 2*time.Minute)[0])
			return err
		}, "waiting for process ranks [1]"},
		{"rank 1 joined, rank 2 missing", func(ctx context.Context, addr string) error {
			cs := cfgs(addr, 3, 1, 2*time.Minute)
			go JoinContext(ctx, cs[0]) // rank 0 waits for rank 2 too
			_, err := JoinContext(ctx, cs[1])
			return err
		}, "after joining rank 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			addr := testport.Addr(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(500*time.Millisecond, cancel)
			start := time.Now()
			err := tc.join(ctx, addr)
			var ie *Interrupted
			if !errors.As(err, &ie) || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want an *Interrupted %q", err, tc.want)
			}
			if d := time.Since(start); d > 1500*time.Millisecond {
				t.Errorf("the join ended %v after the start, 0.5 s after the cancel at most expected", d)
			}
		})
	}
}

// A process that waits says so once, after NoticeAfter, and keeps
// waiting (it was silent for the whole rendezvous timeout).
func TestJoinWaitingNotice(t *testing.T) {
	addr := testport.Addr(t)
	var mu sync.Mutex
	var lines []string
	cs := cfgs(addr, 2, 1, 10*time.Second)
	for r := range cs {
		cs[r].NoticeAfter = 200 * time.Millisecond
		cs[r].Waiting = func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if _, err := JoinContext(ctx, cs[1]); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("rank 1 alone: %v", err)
	}
	mu.Lock()
	if len(lines) != 1 || !strings.Contains(lines[0], "waiting for rank 0 at "+addr) || !strings.Contains(lines[0], "of the rendezvous timeout, 10 s") {
		t.Errorf("rank 1's notices: %q", lines)
	}
	lines = nil
	mu.Unlock()
	// Rank 0 alone says which ranks it waits for; then rank 1 comes and
	// the join completes.
	done := make(chan error, 1)
	go func() {
		g, err := JoinContext(context.Background(), cs[0])
		if err == nil {
			defer g.Close()
		}
		done <- err
	}()
	time.Sleep(400 * time.Millisecond)
	g1, err := JoinContext(context.Background(), cs[1])
	if err != nil {
		t.Fatal(err)
	}
	go g1.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 1 || !strings.Contains(lines[0], "waiting for process ranks [1] to join") {
		t.Errorf("rank 0's notices: %q", lines)
	}
}
