package launch

import "sync"

// inflight counts the notices a process must send before it exits
// (Group.Flush waits for none to be left). Unlike a sync.WaitGroup it may
// gain one while a Flush waits: a process's failure report can reach rank
// 0 after the loss of that process, and WaitGroup panics at an Add from 0
// while a Wait is returning ("WaitGroup is reused before previous Wait
// has returned", seen in ncclbench's TestKilledRank).
type inflight struct {
	mu   sync.Mutex
	n    int
	idle *sync.Cond // made by the first wait
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	if f.n == 0 && f.idle != nil {
		f.idle.Broadcast()
	}
	f.mu.Unlock()
}

// wait returns once nothing is in flight.
func (f *inflight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idle == nil {
		f.idle = sync.NewCond(&f.mu)
	}
	for f.n > 0 {
		f.idle.Wait()
	}
}
