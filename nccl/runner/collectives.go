package runner

import (
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
)

// collKind is a collective as start dispatches it: parsed once from the
// command name, so that a collective nobody dispatches is a test failure
// (TestCollKinds) rather than a silently skipped string case.
type collKind int

const (
	collUnknown collKind = iota
	collAllReduce
	collAllGather
	collReduceScatter
	collBroadcast
	collReduce
	collAlltoAll
	collSendRecv
)

var collKinds = map[string]collKind{
	"all_reduce":     collAllReduce,
	"all_gather":     collAllGather,
	"reduce_scatter": collReduceScatter,
	"broadcast":      collBroadcast,
	"reduce":         collReduce,
	"alltoall":       collAlltoAll,
	"sendrecv":       collSendRecv,
}

// kindOf is c's collKind; collUnknown issues nothing.
func kindOf(c bench.Collective) collKind { return collKinds[c.Name] }

// opCode is the ncclRedOp_t of a reduction (0, sum, when not one).
func opCode(name bench.OpName) int {
	op := 0
	for _, x := range bench.Ops {
		if x.Name == name {
			op = x.Code
		}
	}
	return op
}

// call is one GPU's share of a collective: its communicator, stream and
// buffers (in place: offsets into the receive buffer), its rank.
type call struct {
	c      nccl.Comm
	st     nccl.Stream
	sb, rb nccl.DevPtr
	rank   int
}

// start launches one iteration of the collective on every local GPU.
func (r *runner) start(k bench.Case, inPlace bool) error {
	if err := r.checkpoint(); err != nil {
		return err
	}
	r.prog.Enter(r.coll)
	l := r.lib
	multi := len(r.comms) > 1
	if multi {
		if err := l.GroupStart(); err != nil {
			return err
		}
	}
	kind, op := kindOf(k.Coll), opCode(k.Op)
	var err error
	for i := range r.comms {
		if err = r.dispatch(kind, k, op, r.callOf(i, k, inPlace)); err != nil {
			break
		}
	}
	if multi {
		if e := r.issued(l.GroupEnd()); err == nil {
			err = e
		}
	}
	if err == nil {
		err = r.markFinish()
	}
	// -z: 1, 2 and 3 wait for each collective; 1 also holds a barrier.
	if err == nil && r.o.Blocking != 0 {
		if err = r.wait(r.coll, 1); err == nil && r.o.Blocking == 1 {
			_, err = r.grp.Reduce(nil, launch.Sum)
		}
	}
	return err
}

// callOf is local GPU i's share of k.
func (r *runner) callOf(i int, k bench.Case, inPlace bool) call {
	rank, ts := r.ranks[i], k.Type.Size
	x := call{c: r.comms[i], st: r.streams[i], sb: r.send[i], rb: r.recv[i], rank: rank}
	if inPlace {
		x.sb = r.recv[i] + nccl.DevPtr(k.C.SendInplace*rank*ts)
		x.rb = r.recv[i] + nccl.DevPtr(k.C.RecvInplace*rank*ts)
	}
	return x
}

// dispatch issues one GPU's NCCL call(s) for kind.
func (r *runner) dispatch(kind collKind, k bench.Case, op int, x call) error {
	l := r.lib
	n, dt := k.C.Param, k.Type.Code
	switch kind {
	case collAllReduce:
		return r.issued(l.AllReduce(x.sb, x.rb, n, dt, op, x.c, x.st))
	case collAllGather:
		return r.issued(l.AllGather(x.sb, x.rb, n, dt, x.c, x.st))
	case collReduceScatter:
		return r.issued(l.ReduceScatter(x.sb, x.rb, n, dt, op, x.c, x.st))
	case collBroadcast:
		return r.issued(l.Broadcast(x.sb, x.rb, n, dt, k.Root, x.c, x.st))
	case collReduce:
		return r.issued(l.Reduce(x.sb, x.rb, n, dt, op, k.Root, x.c, x.st))
	case collAlltoAll:
		if l.HasAlltoAll {
			return r.issued(l.AlltoAll(x.sb, x.rb, n, dt, x.c, x.st))
		}
		return r.alltoallP2P(k, x)
	case collSendRecv:
		return r.sendRecv(k, x)
	}
	return nil
}

// alltoallP2P is alltoall before NCCL 2.28: a group of a send and a
// receive to every rank.
func (r *runner) alltoallP2P(k bench.Case, x call) error {
	l := r.lib
	n, dt := k.C.Param, k.Type.Code
	return r.inGroup(func() (err error) {
		for p := 0; p < r.nranks && err == nil; p++ {
			off := nccl.DevPtr(p * n * k.Type.Size)
			if err = l.Send(x.sb+off, n, dt, p, x.c, x.st); err == nil {
				err = l.Recv(x.rb+off, n, dt, p, x.c, x.st)
			}
		}
		return err
	})
}

// sendRecv sends to the next rank and receives from the previous one, in
// one group, as nccl-tests' sendrecv.
func (r *runner) sendRecv(k bench.Case, x call) error {
	l := r.lib
	n, dt := k.C.Param, k.Type.Code
	return r.inGroup(func() error {
		if err := l.Send(x.sb, n, dt, (x.rank+1)%r.nranks, x.c, x.st); err != nil {
			return err
		}
		return l.Recv(x.rb, n, dt, (x.rank-1+r.nranks)%r.nranks, x.c, x.st)
	})
}

// inGroup issues calls inside one NCCL group. The group is ended whatever
// failed (NCCL's group state belongs to the thread and must not be left
// open); the first error is returned.
func (r *runner) inGroup(calls func() error) error {
	if err := r.lib.GroupStart(); err != nil {
		return err
	}
	err := calls()
	if e := r.issued(r.lib.GroupEnd()); err == nil {
		err = e
	}
	return err
}
