package engine

// A session's plans on one set of QPs: a side opened for a plan and the
// plans said to follow it (ClientConfig.Also) is made to hold all of
// them, and the next plan runs on it when it fits, on both ends (a mesh
// direction's write-bw, then its send-lat: issue 47).

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/verbs"
)

// sideShape is what a side's QPs, CQs and buffer were made to hold: one
// plan's needs, or the union of a session's plans.
type sideShape struct {
	qps, lanes       int
	sharedCQ         bool
	oneCQ            bool // receive completions go to the send CQ: latency loops poll one
	sendCQE, recvCQE int
	sendWR, recvWR   int
	inline           int // asked for; the side keeps what was granted
	access           verbs.Access
	mem              memoryLayout
}

// shapeFor is what plan alone needs of a device whose CQs hold maxCQE.
func shapeFor(plan Plan, maxCQE int) sideShape {
	c := shapeCQs(plan, maxCQE)
	nqp := plan.MaxQPs()
	sh := sideShape{qps: nqp, lanes: min(plan.Threads, nqp), sharedCQ: plan.SharedCQ, oneCQ: c.latencyOneCQ,
		sendCQE: c.sendCQE(), recvCQE: c.recvCQE(), sendWR: c.txDepth + 8, recvWR: 1,
		inline: plan.Inline, access: accessFor(plan.Test), mem: layoutFor(plan, nqp)}
	if plan.Test.IsLatency() {
		sh.lanes = nqp // one ping-pong per QP, each on its own thread
	}
	if c.receivesPerQP > 0 {
		sh.recvWR = c.receivesPerQP + 8
	}
	return sh
}

// union is a shape that holds both a and b, which share their QPs' layout
// (shareable).
func (a sideShape) union(b sideShape) sideShape {
	a.oneCQ = a.oneCQ || b.oneCQ
	a.sendCQE, a.recvCQE = max(a.sendCQE, b.sendCQE), max(a.recvCQE, b.recvCQE)
	a.sendWR, a.recvWR, a.inline = max(a.sendWR, b.sendWR), max(a.recvWR, b.recvWR), max(a.inline, b.inline)
	a.access |= b.access
	a.mem.region, a.mem.pairs, a.mem.stride = max(a.mem.region, b.mem.region), max(a.mem.pairs, b.mem.pairs), max(a.mem.stride, b.mem.stride)
	return a
}

// holds says why a side of shape have cannot run a plan that needs need,
// nil when it can: the same QPs on the same lanes, queues and CQs as deep,
// the access and a buffer as large. A plan that receives cannot share a
// CQ with its sends: its receive loops poll the receive CQ.
func (have sideShape) holds(need sideShape, receives bool) error {
	switch {
	case need.qps != have.qps || need.lanes != have.lanes || need.sharedCQ != have.sharedCQ:
		return fmt.Errorf("%d QPs on %d lanes, the side has %d on %d", need.qps, need.lanes, have.qps, have.lanes)
	case need.oneCQ != have.oneCQ && (need.oneCQ || receives):
		return errors.New("the plan polls its CQs otherwise")
	case need.sendCQE > have.sendCQE || need.recvCQE > have.recvCQE:
		return fmt.Errorf("CQs of %d and %d entries, the side's hold %d and %d", need.sendCQE, need.recvCQE, have.sendCQE, have.recvCQE)
	case need.sendWR > have.sendWR || need.recvWR > have.recvWR:
		return fmt.Errorf("%d send and %d receive requests a QP, the side's hold %d and %d", need.sendWR, need.recvWR, have.sendWR, have.recvWR)
	case need.access&^have.access != 0:
		return errors.New("the plan needs access the side's QPs do not grant")
	case need.mem.region > have.mem.region || need.mem.pairs > have.mem.pairs || need.mem.slots > have.mem.slots:
		return fmt.Errorf("the plan needs %d regions of %d bytes, the side has %d of %d", need.mem.pairs, need.mem.region, have.mem.pairs, have.mem.region)
	}
	return nil
}

// pathKey is what a plan's QPs are connected with, and where: a plan on
// another path, transport or buffer placement gets QPs of its own.
type pathKey struct {
	device    string
	port, gid int
	kept      *Kept
	mtu, sl   int
	tc, tmo   int
	transport Transport
	memory    memKey
}

func pathFor(dc DeviceConfig, plan Plan, mem MemorySpec) pathKey {
	return pathKey{device: dc.Device, port: max(dc.Port, 1), gid: dc.GIDIndex, kept: dc.Kept, mtu: plan.MTU, sl: plan.SL, tc: plan.TC,
		tmo: plan.QPTimeout, transport: plan.Transport, memory: keyFor(mem, 0)}
}

// shareable reports whether a plan's QPs may serve another plan of the
// session: RC (UD's address handles and UC's loss are each plan's own),
// without loads (QPs of their own) or --verify (which judges what lands
// in a buffer no earlier plan wrote).
func shareable(plan Plan) bool {
	return plan.Transport == RC && len(plan.Loads) == 0 && !plan.Verify
}

// planMemory is this end's buffer placement of plan: the client's
// Memory, the server's PeerMemory.
func planMemory(plan Plan, server bool) MemorySpec {
	if server {
		return plan.PeerMemory
	}
	return plan.Memory
}

// widen is the shape of a side for plan and those of also that can share
// its QPs (the others will open their own): the union of their shapes.
func widen(dc DeviceConfig, plan Plan, also []Plan, maxCQE int, server bool) sideShape {
	sh := shapeFor(plan, maxCQE)
	if !shareable(plan) {
		return sh
	}
	path := pathFor(dc, plan, planMemory(plan, server))
	for _, p := range also {
		o := shapeFor(p, maxCQE)
		if !shareable(p) || pathFor(dc, p, planMemory(p, server)) != path {
			continue
		}
		u := sh.union(o)
		if u.holds(sh, receives(plan)) == nil && u.holds(o, receives(p)) == nil {
			sh = u
		}
	}
	return sh
}

// fits says why the next plan cannot run on this side, nil when it can.
func (s *side) fits(dc DeviceConfig, plan Plan, server bool) error {
	if !shareable(plan) {
		return errors.New("the plan takes QPs of its own (UC, UD, --load, --verify)")
	}
	if pathFor(dc, plan, planMemory(plan, server)) != s.path {
		return errors.New("another device, port, GID, MTU, SL, TC, timeout or buffer placement")
	}
	if plan.Inline > s.inlineGranted {
		return fmt.Errorf("inline %d, the side's QPs were granted %d", plan.Inline, s.inlineGranted)
	}
	return s.shape.holds(shapeFor(plan, s.attr.MaxCQE), receives(plan))
}

// retarget readies a side that fits for its next plan: the plan's depths,
// inline size, CPUs and notes, its receive buffers' length. The QPs, CQs,
// buffer and the peer's addresses stay as they are; the loops found every
// QP quiet (a plan ends when all its requests completed) and count on the
// receives the last plan left posted (recvPosted).
func (s *side) retarget(dc DeviceConfig, plan Plan) error {
	cpus, err := s.loopCPUs(dc, s.ctx.Name(), plan)
	if err != nil {
		return err
	}
	s.cpus, s.notes = cpus, nil
	s.depthsFor(plan)
	s.notes = append(s.notes, s.memNotes...)
	s.inline = min(plan.Inline, s.inlineGranted)
	s.noInlineOnGPU(plan)
	s.stride, s.slots = layoutFor(plan, len(s.qps)).stride, 1
	return nil
}

// checkPeer checks that the peer's buffers, as it gave them when the
// QPs were connected, hold the plan's messages.
func checkPeer(remote []proto.Endpoint, plan Plan) error {
	for _, ep := range remote {
		if ep.BufSize < uint64(plan.MaxSize()) {
			return fmt.Errorf("peer buffer of %d bytes is smaller than the largest message %d", ep.BufSize, plan.MaxSize())
		}
	}
	return nil
}

// reusable reports whether a plan's side is kept for the next plan of its
// session: it said more follow (Also), and its QPs may serve them.
func reusable(plan Plan, also []Plan) bool { return len(also) > 0 && shareable(plan) }

// qpsCreated counts the QPs sides made, clients' and servers' ([btoi(server)]):
// the tests' measure of what a session's plans shared.
var qpsCreated [2]atomic.Int64

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
