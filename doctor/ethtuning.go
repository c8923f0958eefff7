package doctor

import "fmt"

// These tune the netdev's own queues: RDMA traffic bypasses them, TCP
// (NCCL's bootstrap, its socket fallback, storage) does not. They are
// advice, never a FAIL.

// ringTarget is the ring size worth having: 4096, or the maximum if less.
const ringTarget = 4096

// judgeRings (eth.rings): small rings drop bursts of TCP traffic.
func judgeRings(p *ethPort) Finding {
	r := p.now.Ring
	if r == nil {
		return skipped("ethtool -g output")
	}
	f := Finding{Source: r.Source, Value: fmt.Sprintf("rx %d (max %d), tx %d (max %d)", r.RX, r.RXMax, r.TX, r.TXMax)}
	short := func(cur, most int) bool { return most > 0 && cur < min(ringTarget, most) }
	switch {
	case (short(r.RX, r.RXMax) && r.RX < 1024) || (short(r.TX, r.TXMax) && r.TX < 1024):
		f.Status = Warn
		f.Remedy = fmt.Sprintf("rings under 1024 drop bursts of TCP traffic: ethtool -G %s rx %d tx %d", p.now.Name, min(ringTarget, r.RXMax), min(ringTarget, r.TXMax))
	case short(r.RX, r.RXMax) || short(r.TX, r.TXMax):
		f.Status = Info
		f.Value += fmt.Sprintf("; %d would absorb TCP bursts better (ethtool -G)", ringTarget)
	default:
		f.Status = Pass
	}
	return f
}

// judgeCoalesce (eth.coalesce): fixed interrupt moderation suits one load
// and not another; adaptive moderation follows it.
func judgeCoalesce(p *ethPort) Finding {
	c := p.now.Coalesce
	if c == nil || c.AdaptiveRX == nil {
		return skipped("ethtool -c output")
	}
	f := Finding{Source: c.Source, Value: fmt.Sprintf("adaptive-rx on, rx-usecs %d", c.RXUsecs)}
	f.Status = Pass
	if !*c.AdaptiveRX {
		f.Status = Info
		f.Value = fmt.Sprintf("adaptive-rx off, rx-usecs %d (ethtool -C %s adaptive-rx on follows the load)", c.RXUsecs, p.now.Name)
	}
	return f
}

// judgeChannels (eth.channels): about one queue per core of the NIC's
// NUMA node (or half the host's cores) spreads TCP receive work.
func judgeChannels(p *ethPort) Finding {
	c := p.now.Channels
	if c == nil {
		return skipped("ethtool -l output")
	}
	f := Finding{Source: c.Source, Value: fmt.Sprintf("combined %d (max %d)", c.Combined, c.CombinedMax)}
	target, basis := c.CoresOnNICNode, "cores on the NIC's NUMA node"
	if target == 0 {
		target, basis = c.Cores/2, "half the host's cores"
	}
	if c.CombinedMax > 0 {
		target = min(target, c.CombinedMax)
	}
	switch {
	case target <= 0:
		f.Status = Info
		f.Value += "; the core count is not shown"
	case c.Combined*2 < target || c.Combined > target*2:
		f.Status = Info
		f.Value += fmt.Sprintf("; about %d (%s) spreads the load: ethtool -L %s combined %d", target, basis, p.now.Name, target)
	default:
		f.Status = Pass
		f.Value += fmt.Sprintf(", near %d (%s)", target, basis)
	}
	return f
}
