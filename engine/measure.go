package engine

import (
	"time"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/verbs"
)

// opcodeFor is the verb an initiator posts for a test.
func opcodeFor(t Test) verbs.SendOpcode {
	switch t.Op() {
	case "write":
		return verbs.OpWrite
	case "read":
		return verbs.OpRead
	}
	return verbs.OpSend
}

// loopParams fills what every loop of a side shares for one message size.
func (s *side) loopParams(plan Plan, size int, remote Endpoint, stop *csrc.StopFlag) csrc.Params {
	return csrc.Params{
		QP: s.qp, CQ: s.cq, Opcode: opcodeFor(plan.Test),
		LocalAddr: s.sendAddr(), LKey: s.mr.LKey(), Size: uint32(size),
		RemoteAddr: remote.Addr, RKey: remote.RKey,
		RecvAddr: s.recvAddr(), RecvLKey: s.mr.LKey(), RecvLen: uint32(s.region),
		TxDepth: uint32(plan.TxDepth), RxDepth: uint32(plan.RxDepth), CQMod: uint32(plan.CQMod),
		UseInline: size <= s.inline && plan.Test != ReadBW && plan.Test != ReadLat,
		Stop:      stop,
	}
}

// initiatorKind and responderKind say which C loop each side runs; a
// responder of -1 means the server side is passive (one-sided verbs).
func initiatorKind(t Test) csrc.Kind {
	switch t {
	case SendLat:
		return csrc.LatSend
	case WriteLat:
		return csrc.LatWrite
	case ReadLat:
		return csrc.LatRead
	}
	return csrc.BWPost
}

func responderKind(t Test) (csrc.Kind, bool) {
	switch t {
	case SendBW:
		return csrc.BWRecv, true
	case SendLat:
		return csrc.LatSend, true
	case WriteLat:
		return csrc.LatWrite, true
	}
	return 0, false
}

// margins are the warm-up and cool-down cut from a duration-mode run.
func margins(d time.Duration) time.Duration {
	return min(2*time.Second, d/10)
}

// stepDeadline bounds one measurement step.
func stepDeadline(plan Plan) time.Time {
	return time.Now().Add(plan.Timeout + plan.Duration)
}

// latencyChunk is how many ping-pongs one C call runs in duration mode, so
// the sample buffer stays small however long the run.
const latencyChunk = 1024
