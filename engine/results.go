package engine

import (
	"github.com/rdmabench/rdmabench/proto"
	"github.com/rdmabench/rdmabench/results"
)

// bandwidthResult turns what the loops measured into a row. The aggregate is
// all bytes over the whole interval (the first QP's start to the last QP's
// end); each QP's figure is its bytes over its own interval, so a QP that
// lagged shows as the minimum and lowers Jain's index.
func bandwidthResult(size, nqp int, bw bwOutcome) results.Result {
	res := BandwidthResult(size, bw.messages, bw.seconds, bw.burstBps)
	res.QPs = nqp
	if bw.seconds > 0 && nqp > 1 {
		for i, m := range bw.perQP {
			var g float64
			if s := bw.perQPSeconds[i]; s > 0 {
				g = float64(m) * float64(size) * 8 / s / 1e9
			}
			res.PerQPGbps = append(res.PerQPGbps, g)
		}
		sp := Spread(res.PerQPGbps)
		res.Spread = &sp
	}
	return res
}

// addBidirectional adds the peer's direction to a result. The burst of a
// bidirectional row is the sum of each direction's burst.
func addBidirectional(res *results.Result, size int, peer proto.SideFigures) {
	var recvGbps float64
	if peer.Seconds > 0 {
		recvGbps = float64(peer.Messages) * float64(size) * 8 / peer.Seconds / 1e9
	}
	res.Bidir = &results.Bidir{SentGbps: res.BWAvgGbps, ReceivedGbps: recvGbps}
	res.BWAvgGbps += recvGbps
	res.BWBurstGbps += max(peer.BurstBps*8/1e9, recvGbps)
	if peer.Seconds > 0 {
		res.MsgRateMpps += float64(peer.Messages) / peer.Seconds / 1e6
	}
	res.Iterations += peer.Messages
}

// BandwidthResult computes a bandwidth row from a measured interval.
func BandwidthResult(size int, messages uint64, seconds, burstBytesPerSec float64) results.Result {
	res := results.Result{Size: size, Iterations: messages}
	if seconds > 0 {
		res.BWAvgGbps = float64(messages) * float64(size) * 8 / seconds / 1e9
		res.MsgRateMpps = float64(messages) / seconds / 1e6
	}
	res.BWBurstGbps = max(burstBytesPerSec*8/1e9, res.BWAvgGbps)
	return res
}
