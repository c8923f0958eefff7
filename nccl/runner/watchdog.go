package runner

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rdmabench/rdmabench/launch"
)

// Only the main thread calls NCCL, abort included (NCCL frees the
// communicator in ncclCommAbort). The watchdog asks it to stop through
// watchState.stop; the main thread checks before every call and while it
// waits (checkpoint), and gets the cause back as a *StopError.

// watchState is what the main thread and the watchdog goroutine share.
type watchState struct {
	deadline atomic.Int64 // unix nanos by which the current call or wait must end; 0: none
	phase    atomic.Value // string: what we are waiting for
	span     atomic.Int64 // the length of the current deadline, for messages
	stop     atomic.Pointer[StopError]
	// final says the stop reason is the run's verdict (every process
	// reports it alone).
	final atomic.Bool
}

// StopError is why the run was stopped from outside NCCL: a missed -T
// deadline, a lost peer, rank 0's verdict. checkpoint returns it, so that
// callers learn the cause from the error (errors.As) rather than from the
// watchdog's atomics. Its text is the reason alone, as printed.
type StopError struct {
	Reason string
}

func (e *StopError) Error() string { return e.Reason }

// requestStop is how the watchdog stops the run: the main thread aborts
// the communicators at its next check. The first reason wins.
func (r *runner) requestStop(reason string) { r.stop.CompareAndSwap(nil, &StopError{Reason: reason}) }

func (r *runner) timeoutReason() string {
	what, _ := r.phase.Load().(string)
	return fmt.Sprintf("timeout: %s did not finish within %v (-T %v per collective)", what, time.Duration(r.span.Load()), r.o.Timeout)
}

// arm sets the deadline of work that covers nops collectives (-T each).
func (r *runner) arm(what string, nops int) {
	r.phase.Store(what)
	if r.perOp > 0 {
		d := r.perOp * time.Duration(max(nops, 1))
		r.span.Store(int64(d))
		r.deadline.Store(time.Now().Add(d).UnixNano())
	}
}

func (r *runner) disarm() { r.deadline.Store(0) }

// checkpoint runs on the main thread before NCCL calls and while waiting:
// a stop request, a missed deadline or a lost peer aborts the
// communicators here, and the run ends with that reason (a *StopError).
func (r *runner) checkpoint() error {
	stop := r.stop.Load()
	if stop == nil {
		if dl := r.deadline.Load(); r.env.Size == 1 && dl != 0 && time.Now().UnixNano() > dl {
			// Alone, there is no one to ask; with others, the watchdog
			// takes a census first (hung.go).
			reason := r.timeoutReason()
			r.requestStop(reason)
			stop = &StopError{Reason: reason}
			// Tell the others before the abort closes NCCL's connections,
			// so they report this timeout rather than a lost connection.
			r.grp.Abort(reason)
		} else if err := r.grp.Err(); err != nil {
			stop = &StopError{Reason: err.Error()}
		}
	}
	if stop == nil || stop.Reason == "" {
		return nil
	}
	r.abortComms(stop.Reason)
	return stop
}

// watchdog turns a lost peer or a missed deadline into a stop request, and
// exits the process if the main thread does not come back from NCCL (a
// blocking communicator can hold it inside a call). With others, a missed
// deadline first finds out who holds the run up (hung.go), and meanwhile
// each process tells rank 0 where it is every second.
func (r *runner) watchdog(stderr io.Writer) {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for ticks := 1; ; ticks++ {
		var reason string
		tell := false // the others do not know yet
		select {
		case <-r.finished:
			return
		case <-r.grp.Lost():
			// Rank 0's word or a lost peer: every process hears it.
			reason = r.grp.Err().Error()
		case <-r.grp.Stalled():
			reason = r.conclude()
		case <-tick.C:
			if ticks%5 == 0 {
				r.publish()
			}
			dl := r.deadline.Load()
			if dl == 0 || time.Now().UnixNano() < dl {
				continue
			}
			reason, tell = r.hung()
		}
		r.requestStop(reason)
		if tell {
			r.grp.Abort(reason)
		}
		select {
		case <-r.finished:
		case <-time.After(10 * time.Second):
			fmt.Fprintf(stderr, "%s%s (NCCL did not return control; exiting)\n", r.prefix(), reason)
			r.cleanup()
			os.Exit(ExitFail)
		}
		return
	}
}

// explain puts the root cause (a lost peer, a deadline) before the NCCL
// error it caused.
func (r *runner) explain(err error) error {
	reason := r.abortReason
	if e := r.stop.Load(); e != nil {
		reason = e.Reason
	}
	// The run's verdict (a census after -T) is the whole story: what NCCL
	// said after the abort it caused would only pile up behind it.
	if r.grp != nil {
		var pl *launch.PeerLost
		if lost := r.grp.Err(); errors.As(lost, &pl) && pl.Final {
			return lost
		}
		if errors.As(r.grp.Err(), &pl) && pl.Reported && pl.Origin == r.env.Rank {
			return err // this process's own error came first
		}
	}
	if r.final.Load() && reason != "" {
		return errors.New(reason)
	}
	if reason != "" && !strings.Contains(err.Error(), reason) {
		return fmt.Errorf("%s (then: %v)", reason, err)
	}
	if r.grp != nil {
		if lost := r.grp.Err(); lost != nil && !strings.Contains(err.Error(), lost.Error()) {
			return fmt.Errorf("%v (then: %v)", lost, err)
		}
	}
	return err
}

// reportFailure tells rank 0 this process's error, before anything here is
// torn down (launch.Group.Fail).
func (r *runner) reportFailure(err error) {
	if r.grp != nil {
		r.grp.Fail(err.Error(), time.Now().Add(2*time.Second))
	}
}
