package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl/hang"
	"github.com/rdmabench/rdmabench/results"
)

// censusWait is how long rank 0 waits for every process to say where it
// is when -T fires: a live process answers from its rendezvous reader at
// once, so this only bounds the wait for one that is stopped or gone.
func (r *runner) censusWait() time.Duration {
	return min(max(r.perOp, 2*time.Second), 10*time.Second)
}

// publish tells rank 0 where this process is, so that rank 0 can say
// where a process that stops answering was last (not rank 0; only when
// -T is on).
func (r *runner) publish() {
	if r.perOp > 0 && r.env.Size > 1 && r.env.Rank != 0 {
		r.grp.Publish(r.prog.JSON(), time.Now().Add(time.Second))
	}
}

// hung runs when this process missed a deadline. Alone it is a plain
// timeout. Rank 0 takes a census and concludes; any other process asks
// rank 0 for one and waits for the verdict, and says rank 0 itself is
// stopped when none comes. tell: the others do not know the reason yet.
func (r *runner) hung() (reason string, tell bool) {
	if r.env.Size == 1 {
		return r.timeoutReason(), false
	}
	if r.env.Rank == 0 {
		return r.conclude(), false
	}
	wait := r.censusWait() + 5*time.Second
	r.grp.RequestCensus(r.prog.JSON(), time.Now().Add(2*time.Second))
	select {
	case <-r.grp.Lost():
		err := r.grp.Err()
		var pl *launch.PeerLost
		if errors.As(err, &pl) && pl.Final {
			r.final.Store(true)
		}
		return err.Error(), false
	case <-time.After(wait):
	}
	r.final.Store(true)
	return fmt.Sprintf("%s: process rank 0 (at %s) did not answer for %v, stopped or hung", r.timeoutReason(), r.rdv.Addr, wait.Round(time.Second)), true
}

// conclude takes rank 0's census and sends every process its verdict.
func (r *runner) conclude() string {
	wait := r.censusWait()
	st := r.grp.Census(time.Now().Add(wait))
	seen := make([]hang.Seen, len(st))
	var devices []results.NCCLDevice
	if p := r.devices.Load(); p != nil {
		devices = *p
	}
	for p, s := range st {
		h := r.grp.Hellos[p]
		seen[p] = hang.Seen{Proc: hang.Proc{Rank: p, Host: h.Host, Pid: h.Pid}, Answered: s.Answered}
		for _, d := range devices {
			if d.Rank/r.o.Ngpus == p {
				seen[p].Proc.GPUs = append(seen[p].Proc.GPUs, d.Device)
			}
		}
		if s.Payload != nil {
			var pr hang.Progress
			if json.Unmarshal(s.Payload, &pr) == nil {
				seen[p].Progress = &pr
				seen[p].Ago = time.Since(s.Heard)
			}
		}
	}
	v := hang.Verdict(seen, wait, r.perOp)
	r.final.Store(true)
	r.grp.Conclude(v)
	return v
}
