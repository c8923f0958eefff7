package runner

import (
	"fmt"
	"runtime"
	"time"

	"github.com/rdmabench/rdmabench/nccl"
)

// openComms creates the communicators, then each GPU's stream and
// buffers, and -I 1's events. Non-blocking communicators (NCCL >= 2.14)
// never hold this thread inside NCCL, so it can always abort them itself.
func (r *runner) openComms(id nccl.UniqueID) error {
	r.arm("NCCL communicator initialization", 1)
	comms, err := r.lib.CommInitRanks(r.nranks, id, r.ranks, r.devs, true)
	r.comms = comms
	if err == nil {
		err = r.settle()
	}
	r.disarm()
	if err != nil {
		return err
	}
	if err := r.allocBuffers(); err != nil {
		return err
	}
	if r.o.PerIter == 1 {
		if err := r.newIterEvents(); err != nil {
			return err
		}
		if r.nranks > 1 {
			return r.newTimelineEvents()
		}
	}
	return nil
}

// allocBuffers makes a stream and the send and receive buffers on every
// local GPU, at least 64 bytes each.
func (r *runner) allocBuffers() error {
	bufBytes := max(r.o.MaxBytes, 64)
	for _, d := range r.devs {
		if err := r.lib.SetDevice(d); err != nil {
			return err
		}
		s, err := r.lib.StreamCreate()
		if err != nil {
			return err
		}
		sb, err := r.lib.Malloc(bufBytes)
		if err != nil {
			return fmt.Errorf("GPU %d: %d-byte send buffer: %w", d, bufBytes, err)
		}
		rb, err := r.lib.Malloc(bufBytes)
		if err != nil {
			return fmt.Errorf("GPU %d: %d-byte receive buffer: %w", d, bufBytes, err)
		}
		r.streams, r.send, r.recv = append(r.streams, s), append(r.send, sb), append(r.recv, rb)
	}
	return nil
}

// abortComms stops every communicator once. Main thread only: NCCL frees a
// communicator in ncclCommAbort, so nothing may use it concurrently or after.
func (r *runner) abortComms(reason string) {
	if r.aborted {
		return
	}
	r.aborted = true
	if reason != "" && r.abortReason == "" {
		r.abortReason = reason
	}
	for _, c := range r.comms {
		if c != 0 {
			r.lib.CommAbort(c)
		}
	}
}

// finishComms destroys the communicators, then frees what they used: NCCL
// may hold registered buffers until ncclCommDestroy returns.
func (r *runner) finishComms() error {
	if r.aborted {
		return nil
	}
	// Finalize first: a non-blocking communicator finishes it in the
	// background and says so through ncclCommGetAsyncError.
	for i, c := range r.comms {
		r.lib.SetDevice(r.devs[i])
		if err := r.issued(r.lib.CommFinalize(c)); err != nil {
			return err
		}
	}
	if err := r.settle(); err != nil {
		return err
	}
	var first error
	for i, c := range r.comms {
		r.lib.SetDevice(r.devs[i])
		if err := r.lib.CommDestroy(c); err != nil && !nccl.InProgress(err) && first == nil {
			first = err
		}
	}
	r.comms = nil
	r.freeIterEvents()
	r.freeTimelineEvents()
	for i := range r.streams {
		r.lib.SetDevice(r.devs[i])
		r.lib.Free(r.send[i])
		r.lib.Free(r.recv[i])
		r.lib.StreamDestroy(r.streams[i])
	}
	return first
}

// backoff spins briefly, then sleeps, so that many processes waiting on a
// few cores still leave the one that has work a CPU.
func backoff(spin int) {
	switch {
	case spin > 1024:
		time.Sleep(50 * time.Microsecond)
	case spin%16 == 15:
		runtime.Gosched()
	}
}

// settle waits while a non-blocking communicator says ncclInProgress
// (a full launch queue waits for one collective to end: -T once).
func (r *runner) settle() error {
	if r.deadline.Load() == 0 {
		what, _ := r.phase.Load().(string)
		r.arm(what, 1)
		defer r.disarm()
	}
	for _, c := range r.comms {
		for spin := 0; ; spin++ {
			err := r.lib.CommAsyncError(c)
			if err == nil {
				break
			}
			if !nccl.InProgress(err) {
				r.reportFailure(err) // before the abort, as in wait
				r.abortComms("")
				return err
			}
			if spin%64 == 63 {
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
			backoff(spin)
		}
	}
	return nil
}

// issued finishes an NCCL call that may have answered ncclInProgress.
func (r *runner) issued(err error) error {
	if nccl.InProgress(err) {
		return r.settle()
	}
	return err
}

// wait polls every stream until it is idle, watching for NCCL's
// asynchronous errors, a stop request, a lost peer and the deadline for
// nops collectives (nccl-tests' testStreamSynchronize).
func (r *runner) wait(what string, nops int) error {
	r.arm(what, nops)
	defer r.disarm()
	for i, s := range r.streams {
		for spin := 0; ; spin++ {
			done, err := r.lib.StreamDone(s)
			if err != nil {
				return err
			}
			if done {
				break
			}
			if spin%64 == 63 {
				if err := r.lib.CommAsyncError(r.comms[i]); err != nil && !nccl.InProgress(err) {
					// Reported before the abort: the errors the abort
					// causes on the peers must come second.
					r.reportFailure(err)
					r.abortComms("NCCL reported an asynchronous error")
					return err
				}
				if err := r.checkpoint(); err != nil {
					return err
				}
			}
			backoff(spin)
		}
	}
	r.prog.FinishAll()
	return nil
}
