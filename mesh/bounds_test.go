package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// deadRanks says which ranks left, and why, for the fakes below.
type deadRanks struct {
	mu   sync.Mutex
	dead map[int]string
}

func (d *deadRanks) Dead(rank int) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	why, ok := d.dead[rank]
	return why, ok
}

func (d *deadRanks) kill(rank int, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.dead == nil {
		d.dead = map[int]string{}
	}
	d.dead[rank] = why
}

// chanLink is a fake Link: what a rank sends to us comes from in[rank],
// what we send goes to sent (if set), and Dead says what kill recorded.
type chanLink struct {
	deadRanks
	in    map[int]chan []byte
	sent  func(rank int, m message)
	drops []int
}

func newChanLink(ranks ...int) *chanLink {
	l := &chanLink{in: map[int]chan []byte{}}
	for _, r := range ranks {
		l.in[r] = make(chan []byte, 16)
	}
	return l
}

func (l *chanLink) Send(rank int, b []byte, _ time.Time) error {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if l.sent != nil {
		l.sent(rank, m)
	}
	return nil
}

func (l *chanLink) Recv(rank int, deadline time.Time) ([]byte, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case b := <-l.in[rank]:
		return b, nil
	case <-t.C:
		return nil, errors.New("did not answer in time")
	}
}

func (l *chanLink) Drop(rank int, reason string) {
	l.drops = append(l.drops, rank) // Measure's goroutine only
	l.kill(rank, reason)
}

func (l *chanLink) push(rank int, m message) {
	b, _ := json.Marshal(m)
	l.in[rank] <- b
}

// Ctrl-C ends rank 0's wait for a remote direction within a second, and
// the client is not dropped for it.
func TestMeasureInterrupted(t *testing.T) {
	l := newChanLink(1)
	lr := &LinkRunner{Link: l, Bound: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	o, err := lr.Measure(ctx, 1, Task{Server: 2, Round: 1})
	if el := time.Since(start); el > time.Second {
		t.Errorf("Measure returned %v after Ctrl-C", el)
	}
	if err != nil || o.Error == "" || len(l.drops) > 0 {
		t.Errorf("outcome %+v, error %v, dropped %v: want a failed direction and the client kept", o, err, l.drops)
	}
}

// An outcome that comes after rank 0 stopped waiting for it is not taken
// for the next task's.
func TestLateOutcomeSkipped(t *testing.T) {
	l := newChanLink(1)
	lr := &LinkRunner{Link: l, Bound: time.Minute}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lr.Measure(ctx, 1, Task{Server: 2, Round: 1})
	l.push(1, message{Kind: kindOutcome, Outcome: &Outcome{BWGbps: 1, LatP50us: 1, Seq: 1}})
	l.push(1, message{Kind: kindOutcome, Outcome: &Outcome{BWGbps: 2, LatP50us: 2, Seq: 2}})
	o, err := lr.Measure(context.Background(), 1, Task{Server: 3, Round: 2})
	if err != nil || o.BWGbps != 2 {
		t.Errorf("second task: %+v %v, want the figures of its own outcome (2 Gb/s)", o, err)
	}
}

// A rank that loses rank 0 (dropped, or rank 0 died) stops its run: nobody
// waits for it and it holds its server.
func TestWorkLosesRankZero(t *testing.T) {
	l := newChanLink(0)
	l.push(0, message{Kind: kindStart, BoundS: 60})
	l.push(0, message{Kind: kindTask, Task: &Task{Server: 2, Round: 1, Seq: 1}})
	time.AfterFunc(200*time.Millisecond, func() { l.kill(0, "dropped") })
	ran := make(chan time.Duration, 1)
	start := time.Now()
	err := Work(context.Background(), l, Info{ServerPort: 1}, time.Minute, func(ctx context.Context, _ Task) Outcome {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
		ran <- time.Since(start)
		return Outcome{Error: "stopped"}
	})
	if d := <-ran; d > 1500*time.Millisecond {
		t.Errorf("the run went on %v after rank 0 was lost", d)
	}
	if err == nil || !strings.Contains(err.Error(), "lost rank 0") {
		t.Errorf("Work: %v", err)
	}
}

// blockingRunner measures until ctx ends (a stuck server), and says a rank
// died when told.
type blockingRunner struct{ deadRanks }

func (b *blockingRunner) Measure(ctx context.Context, client int, t Task) (Outcome, error) {
	select {
	case <-ctx.Done():
		return Outcome{Error: context.Cause(ctx).Error()}, nil
	case <-time.After(10 * time.Second):
		return Outcome{BWGbps: 1, LatP50us: 1}, nil
	}
}

// The loss of a rank cancels the directions running with it, at once.
func TestLossCancelsDirection(t *testing.T) {
	b := &blockingRunner{}
	time.AfterFunc(200*time.Millisecond, func() { b.kill(1, "exited") })
	m := newMesh(2)
	c := &Coordinator{Runner: b, Mesh: m, Rounds: Tournament(2), Addrs: make([]string, 2), Opts: Options{Rules: DefaultRules, MaxRetests: 10}}
	start := time.Now()
	c.Run(context.Background())
	if el := time.Since(start); el > 1500*time.Millisecond {
		t.Errorf("the mesh took %v: the run towards the rank that left went on", el)
	}
	if m.Ranks[1].Dead != "exited" || len(m.Culprits)+len(m.Links) > 0 {
		t.Errorf("rank 1 %+v; culprits %+v links %+v", m.Ranks[1], m.Culprits, m.Links)
	}
}

// The grace for a failure's server to be reported dead is not paid per
// failed direction: a node failing every pair of 10 costs about one grace
// (after the last round) and one more (after the retests), not 36.
func TestGraceBounded(t *testing.T) {
	const grace = 300 * time.Millisecond
	m := newMesh(10)
	c := &Coordinator{Runner: &fabric{failNode: map[int]bool{4: true}}, Mesh: m, Rounds: Tournament(10), Addrs: make([]string, 10),
		Opts: Options{Rules: DefaultRules, MaxRetests: 100, Grace: grace}}
	start := time.Now()
	c.Run(context.Background())
	if el := time.Since(start); el > 4*grace {
		t.Errorf("the mesh took %v with a grace of %v", el, grace)
	}
	if len(m.Culprits) != 1 || m.Culprits[0].Rank != 4 {
		t.Errorf("culprits %+v", m.Culprits)
	}
}
