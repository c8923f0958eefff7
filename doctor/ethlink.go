package doctor

import (
	"fmt"
	"slices"
	"strings"
)

// judgeLink (eth.link): a link that trained below the port's best speed
// caps every flow through it. A link down is a WARN, not a FAIL: when
// NCCL uses the port, port.state already fails it, and a health check
// must not drain a node twice, or for a spare port nobody cabled.
func judgeLink(p *ethPort) Finding {
	l := p.now.Link
	if l == nil {
		return skipped("ethtool IF output")
	}
	f := Finding{Source: l.Source}
	best := 0
	if len(l.SupportedMbps) > 0 {
		best = slices.Max(l.SupportedMbps)
	}
	switch {
	case l.Up != nil && !*l.Up:
		f.Status, f.Value = Warn, "link down"
		f.Remedy = "bring the link up (ip link set dev " + p.now.Name + " up), then check the cable, the transceiver and the switch port; port.state says whether NCCL uses it"
	case l.SpeedMbps <= 0:
		f.Status, f.Value = Skip, "speed unknown"
	case best > l.SpeedMbps:
		f.Status = Warn
		f.Value = fmt.Sprintf("%s, the port supports %s", mbps(l.SpeedMbps), mbps(best))
		f.Remedy = "the link trained below the port's best: check that the cable/transceiver and the switch port are rated for " + mbps(best) + " and agree on FEC, then re-train it (ethtool -s " + p.now.Name + " autoneg on)"
	case strings.EqualFold(l.Duplex, "Half"):
		f.Status, f.Value = Warn, mbps(l.SpeedMbps)+", half duplex"
		f.Remedy = "a half-duplex link is a failed negotiation: check the switch port's settings and re-train (ethtool -s " + p.now.Name + " autoneg on)"
	default:
		f.Status, f.Value = Pass, mbps(l.SpeedMbps)
		if best == 0 {
			f.Value += " (supported speeds not shown)"
		}
	}
	return f
}

// rsExpected reports whether a link speed runs lanes of 25 Gb/s or more,
// where IEEE 802.3 calls for RS-FEC (clause 91/134): every speed from 25G
// up but 40G, which is four 10G lanes.
func rsExpected(speedMbps int) bool {
	return speedMbps >= 25000 && speedMbps != 40000
}

// judgeFEC (eth.fec): without FEC a 25G-per-lane link passes its bit
// errors up as CRC drops (and a PAM4 link hardly trains); with it they
// are corrected.
func judgeFEC(p *ethPort) Finding {
	fec := p.now.FEC
	if fec == nil {
		return skipped("ethtool --show-fec output")
	}
	f := Finding{Source: fec.Source, Status: Info, Value: "active " + orDefault(fec.Active, "unknown")}
	if len(fec.Configured) > 0 {
		f.Value += ", configured " + strings.Join(fec.Configured, " ")
	}
	speed := 0
	if l := p.now.Link; l != nil && (l.Up == nil || *l.Up) {
		speed = l.SpeedMbps
	}
	off := strings.EqualFold(fec.Active, "Off") || strings.EqualFold(fec.Active, "None")
	switch {
	case off && rsExpected(speed):
		f.Status = Warn
		f.Value += " at " + mbps(speed)
		f.Remedy = "lanes of 25G and faster expect RS-FEC: ethtool --set-fec " + p.now.Name + " encoding rs (and RS on the switch port)"
	case strings.EqualFold(fec.Active, "RS") && speed > 0:
		f.Status = Pass
		f.Value += " at " + mbps(speed)
	}
	return f
}
