package engine

// bandwidthResult turns what the loops measured into a row, with per-QP
// figures over the same interval so that they add up to the aggregate.
func bandwidthResult(size, nqp int, bw bwOutcome) Result {
	res := BandwidthResult(size, bw.messages, bw.seconds, bw.peakBps)
	res.QPs = nqp
	if bw.seconds > 0 && nqp > 1 {
		for _, m := range bw.perQP {
			res.PerQPGbps = append(res.PerQPGbps, float64(m)*float64(size)*8/bw.seconds/1e9)
		}
		sp := Spread(res.PerQPGbps)
		res.Spread = &sp
	}
	return res
}

// addBidirectional adds the peer's direction to a result.
func (res *Result) addBidirectional(size int, peer SideFigures) {
	var recvGbps float64
	if peer.Seconds > 0 {
		recvGbps = float64(peer.Messages) * float64(size) * 8 / peer.Seconds / 1e9
	}
	res.Bidir = &Bidir{SentGbps: res.BWAvgGbps, ReceivedGbps: recvGbps}
	res.BWAvgGbps += recvGbps
	res.BWPeakGbps += max(peer.PeakBps*8/1e9, recvGbps)
	if peer.Seconds > 0 {
		res.MsgRateMpps += float64(peer.Messages) / peer.Seconds / 1e6
	}
	res.Iterations += peer.Messages
}
