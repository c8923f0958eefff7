package mesh

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// Link is how rank 0 and the others exchange messages: launch.Group of a
// KeepGoing rendezvous (every message at most 1 MiB, whatever a peer
// sends), or a fake in tests.
type Link interface {
	Send(rank int, payload []byte, deadline time.Time) error
	Recv(rank int, deadline time.Time) ([]byte, error)
	Dead(rank int) (string, bool)
	Drop(rank int, reason string)
}

// kind is a message's type.
type kind string

const (
	kindInfo    kind = "info"    // a rank → rank 0: its port and server
	kindStart   kind = "start"   // rank 0 → a rank: the mesh's bound, or why it will not run
	kindTask    kind = "task"    // rank 0 → a rank: measure one direction
	kindOutcome kind = "outcome" // a rank → rank 0: the task's figures
	kindDone    kind = "done"    // rank 0 → a rank: the mesh is over
)

type message struct {
	Kind    kind     `json:"kind"`
	Info    *Info    `json:"info,omitempty"`
	BoundS  float64  `json:"bound_s,omitempty"`
	Error   string   `json:"error,omitempty"`
	Task    *Task    `json:"task,omitempty"`
	Outcome *Outcome `json:"outcome,omitempty"`
}

// Info is what a rank tells rank 0 before the mesh: its port's facts and
// its engine server's TCP port, or why it cannot take part.
type Info struct {
	Rank       results.MeshRank `json:"rank"`
	ServerPort int              `json:"server_port"`
	Error      string           `json:"error,omitempty"`
}

func send(l Link, rank int, m message, deadline time.Time) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return l.Send(rank, b, deadline)
}

func recv(l Link, rank int, want kind, deadline time.Time) (message, error) {
	b, err := l.Recv(rank, deadline)
	if err != nil {
		return message{}, err
	}
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return message{}, fmt.Errorf("rank %d sent a bad message: %w", rank, err)
	}
	if m.Kind != want && m.Kind != kindDone {
		return message{}, fmt.Errorf("rank %d sent %q, expected %q", rank, m.Kind, want)
	}
	return m, nil
}

// recvCtx is recv that also ends, within recvSlice, when ctx does: with
// ctx's error (wrapped), so that Ctrl-C does not wait for the deadline.
func recvCtx(ctx context.Context, l Link, rank int, want kind, deadline time.Time) (message, error) {
	for {
		if ctx.Err() != nil {
			return message{}, fmt.Errorf("interrupted: %w", context.Cause(ctx))
		}
		slice := time.Now().Add(recvSlice)
		if slice.After(deadline) {
			slice = deadline
		}
		m, err := recv(l, rank, want, slice)
		if err != nil {
			_, gone := l.Dead(rank)
			if now := time.Now(); gone || now.Before(slice) || !now.Before(deadline) {
				return message{}, err
			}
			continue
		}
		return m, nil
	}
}

// GatherInfo is rank 0 collecting every other rank's Info, each within
// deadline. A rank that does not send it, or sends nonsense, gets an Info
// with Error: it takes no part. ctx ending ends the wait within recvSlice
// (the ranks not heard from then get its error).
func GatherInfo(ctx context.Context, l Link, size int, deadline time.Time) []Info {
	out := make([]Info, size)
	for r := 1; r < size; r++ {
		m, err := recvCtx(ctx, l, r, kindInfo, deadline)
		switch {
		case err != nil:
			out[r].Error = err.Error()
		case m.Info == nil || m.Kind != kindInfo:
			out[r].Error = "sent no port information"
		case m.Info.Error == "" && (m.Info.ServerPort < 1 || m.Info.ServerPort > 65535):
			out[r].Error = fmt.Sprintf("sent server port %d", m.Info.ServerPort)
		default:
			out[r] = *m.Info
		}
		out[r].Rank.Rank = r
		if out[r].Error != "" {
			l.Drop(r, out[r].Error)
		}
	}
	return out
}

// MaxBound caps the bound Start announces (the ranks refuse more from a
// confused rank 0): a mesh that could last longer is bounded by it anyway.
const MaxBound = 30 * 24 * time.Hour

// Start tells every rank still there how long the mesh may take at most
// (capped at MaxBound), or, with why set, that it will not run.
func Start(l Link, size int, bound time.Duration, why string) {
	bound = min(bound, MaxBound)
	deadline := time.Now().Add(5 * time.Second)
	for r := 1; r < size; r++ {
		if _, gone := l.Dead(r); !gone {
			send(l, r, message{Kind: kindStart, BoundS: bound.Seconds(), Error: why}, deadline)
		}
	}
}

// Finish tells every rank still there that the mesh is over.
func Finish(l Link, size int) {
	deadline := time.Now().Add(5 * time.Second)
	for r := 1; r < size; r++ {
		if _, gone := l.Dead(r); !gone {
			send(l, r, message{Kind: kindDone}, deadline)
		}
	}
}

// LinkRunner is the Runner of rank 0 over a Link: its own directions run
// here (Local), the others' are sent as tasks and waited for at most
// Bound each; a rank that does not answer by then is dropped. ctx ending
// (Ctrl-C, or a rank of the direction leaving) ends the wait within
// recvSlice.
type LinkRunner struct {
	Link  Link
	Local func(ctx context.Context, t Task) Outcome
	Bound time.Duration

	seq atomic.Int64
}

// recvSlice is how long one wait for an outcome lasts before ctx is
// looked at again.
const recvSlice = 200 * time.Millisecond

func (lr *LinkRunner) Measure(ctx context.Context, client int, t Task) (Outcome, error) {
	if client == 0 {
		return lr.Local(ctx, t), nil
	}
	t.Seq = lr.seq.Add(1)
	deadline := time.Now().Add(lr.Bound)
	if err := send(lr.Link, client, message{Kind: kindTask, Task: &t}, deadline); err != nil {
		return Outcome{}, err
	}
	m, err := lr.await(ctx, client, t.Seq, deadline)
	if ctx.Err() != nil && err == nil && m.Outcome == nil {
		// Not the client's fault: it is left to finish (its outcome is
		// discarded by its Seq) or to lose its server.
		return Outcome{Error: "stopped waiting: " + context.Cause(ctx).Error(), Interrupted: errors.Is(context.Cause(ctx), context.Canceled)}, nil
	}
	if err == nil && m.Outcome == nil {
		err = errors.New("sent no outcome")
	}
	if err != nil {
		why := err.Error()
		if w, gone := lr.Link.Dead(client); gone {
			why = w
		} else {
			why = fmt.Sprintf("no result from its measurement towards rank %d within %v (%v)", t.Server, lr.Bound, err)
			lr.Link.Drop(client, why)
		}
		return Outcome{}, errors.New(why)
	}
	return *m.Outcome, nil
}

// await receives the outcome of task seq from client by deadline, in
// slices so that ctx ending is seen; outcomes of earlier tasks (that rank
// 0 stopped waiting for) are skipped. ctx ending returns no message and no
// error.
func (lr *LinkRunner) await(ctx context.Context, client int, seq int64, deadline time.Time) (message, error) {
	for {
		if ctx.Err() != nil {
			return message{}, nil
		}
		slice := time.Now().Add(recvSlice)
		if slice.After(deadline) {
			slice = deadline
		}
		m, err := recv(lr.Link, client, kindOutcome, slice)
		if err != nil {
			_, gone := lr.Link.Dead(client)
			if now := time.Now(); gone || now.Before(slice) || !now.Before(deadline) {
				// Gone, failed before its slice ended (not a timeout), or
				// out of time.
				return message{}, err
			}
			continue
		}
		if m.Outcome != nil && m.Outcome.Seq != 0 && m.Outcome.Seq != seq {
			continue // a task rank 0 stopped waiting for
		}
		return m, nil
	}
}

func (lr *LinkRunner) Dead(rank int) (string, bool) {
	if rank == 0 {
		return "", false
	}
	return lr.Link.Dead(rank)
}

// Work is a rank other than 0: it sends its Info, then measures the tasks
// rank 0 gives until rank 0 says the mesh is over, within the bound rank 0
// announced (or startWait for that announcement).
func Work(ctx context.Context, l Link, info Info, startWait time.Duration, local func(ctx context.Context, t Task) Outcome) error {
	if err := send(l, 0, message{Kind: kindInfo, Info: &info}, time.Now().Add(startWait)); err != nil {
		return fmt.Errorf("tell rank 0 about this rank: %w", err)
	}
	if info.Error != "" {
		return errors.New(info.Error)
	}
	m, err := recvCtx(ctx, l, 0, kindStart, time.Now().Add(startWait))
	if err != nil {
		return fmt.Errorf("waiting for rank 0 to start the mesh: %w", err)
	}
	if m.Kind == kindDone {
		return nil
	}
	if m.Error != "" {
		return fmt.Errorf("rank 0: %s", m.Error)
	}
	if m.BoundS <= 0 || m.BoundS > MaxBound.Seconds() {
		return fmt.Errorf("rank 0 announced a bound of %g s", m.BoundS)
	}
	deadline := time.Now().Add(time.Duration(m.BoundS * float64(time.Second)))
	for {
		m, err := recvCtx(ctx, l, 0, kindTask, deadline)
		if err != nil {
			return fmt.Errorf("waiting for rank 0: %w", err)
		}
		if m.Kind == kindDone {
			return nil
		}
		if m.Task == nil {
			return errors.New("rank 0 sent a task message without a task")
		}
		// Losing rank 0 (it dropped this rank, or died) ends the run: a
		// run nobody waits for must not hold its server.
		lctx, stop := WatchLoss(ctx, func() (string, bool) {
			why, gone := l.Dead(0)
			return "lost rank 0: " + why, gone
		})
		o := local(lctx, *m.Task)
		stop()
		if why, gone := l.Dead(0); gone {
			return fmt.Errorf("lost rank 0 during a measurement: %s", why)
		}
		o.Seq = m.Task.Seq
		if err := send(l, 0, message{Kind: kindOutcome, Outcome: &o}, deadline); err != nil {
			return fmt.Errorf("send the result to rank 0: %w", err)
		}
	}
}
