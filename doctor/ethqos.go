package doctor

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// rocePriority is the 802.1p priority NCCL's RoCE traffic travels in, as
// far as the NIC's trust mode and DSCP table tell it.
type rocePriority struct {
	tc, dscp int
	prio     int
	known    bool
	why      string // how it was told, or why it cannot be
}

// roceTrafficPriority derives the priority from NCCL_IB_TC (the IP traffic
// class NCCL sets on its QPs; 0 when unset): its upper six bits are the
// DSCP, and under trust dscp the NIC's table maps the DSCP to a priority.
func roceTrafficPriority(env map[string]string, dcb *ethside.DCB) rocePriority {
	r := rocePriority{}
	tcText := "NCCL_IB_TC unset (traffic class 0)"
	if v, ok := env["NCCL_IB_TC"]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 255 {
			r.why = "NCCL_IB_TC=" + v + " is not a traffic class (nccl.ib_tc)"
			return r
		}
		r.tc, tcText = n, "NCCL_IB_TC="+v
	}
	r.dscp = r.tc >> 2
	switch {
	case dcb == nil || dcb.Trust == "":
		r.why = tcText + "; the trust mode is not shown, so the priority is not known"
	case dcb.Trust == "dscp":
		if p, ok := dcb.DSCPPrio[r.dscp]; ok && p >= 0 && p <= 7 {
			r.prio, r.known = p, true
			r.why = fmt.Sprintf("%s → DSCP %d → priority %d by the NIC's DSCP table", tcText, r.dscp, p)
		} else {
			// Without a table entry the kernel's default: the DSCP's
			// class selector bits (dscp >> 3).
			r.prio, r.known = r.dscp>>3, true
			r.why = fmt.Sprintf("%s → DSCP %d → priority %d by the default mapping (DSCP>>3; no table entry shown)", tcText, r.dscp, r.prio)
		}
	case dcb.Trust == "pcp":
		// Under trust pcp the priority is the VLAN tag's PCP, set by the
		// VLAN's egress-qos-map (untagged traffic: priority 0), which the
		// Ethernet side does not show.
		r.why = tcText + "; trust pcp: the priority is the VLAN tag's PCP (the VLAN's egress-qos-map; untagged: 0), not shown here"
	default:
		r.why = tcText + "; trust " + dcb.Trust + " is neither pcp nor dscp"
	}
	return r
}

// onPriorities lists the priorities set in a per-priority table: "3,4".
func onPriorities(t *[8]bool) string {
	var on []string
	for i, v := range t {
		if v {
			on = append(on, strconv.Itoa(i))
		}
	}
	if len(on) == 0 {
		return "none"
	}
	return strings.Join(on, ",")
}

// pfcWith is mlnx_qos's --pfc vector with priority p turned on.
func pfcWith(t *[8]bool, p int) string {
	v := make([]string, 8)
	for i := range v {
		v[i] = "0"
		if t[i] || i == p {
			v[i] = "1"
		}
	}
	return strings.Join(v, ",")
}

// judgePFC (eth.pfc): RoCE v2 recovers from a dropped packet only by
// go-back-N retransmission, so the priority it uses must be lossless.
func judgePFC(p *ethPort) Finding {
	d := p.now.DCB
	if d == nil || d.PFCEnabled == nil {
		return skipped("PFC state (dcb pfc show / mlnx_qos)")
	}
	f := Finding{Source: d.Source, Value: "PFC on priorities " + onPriorities(d.PFCEnabled)}
	pr := p.prio
	if gp := globalPauseLossless(&p.now); gp != nil && onPriorities(d.PFCEnabled) == "none" {
		return pfcByGlobalPause(p, f, gp)
	}
	switch {
	case pr.known && d.PFCEnabled[pr.prio]:
		f.Status = Pass
		f.Value += "; " + pr.why
	case pr.known:
		f.Status = Fail
		f.Value = fmt.Sprintf("PFC off on priority %d, the RoCE traffic's (%s); on: %s", pr.prio, pr.why, onPriorities(d.PFCEnabled))
		f.Remedy = fmt.Sprintf("RoCE v2 drops packets under load without PFC on its priority: mlnx_qos -i %s --pfc %s (and the priority lossless on the switch ports), or set NCCL_IB_TC to the fabric's lossless class", p.now.Name, pfcWith(d.PFCEnabled, pr.prio))
	case onPriorities(d.PFCEnabled) == "none":
		// Whatever priority the traffic takes, it is lossy.
		f.Status = Fail
		f.Value += " (" + pr.why + ")"
		f.Remedy = "RoCE v2 drops packets under load without PFC: enable PFC on the fabric's RoCE priority (mlnx_qos -i " + p.now.Name + " --pfc 0,0,0,1,0,0,0,0 for priority 3) and on the switch ports"
	default:
		f.Status = Info
		f.Value += "; the RoCE priority is not known: " + pr.why
	}
	return f
}

// pfcByGlobalPause is eth.pfc's verdict on a port with PFC on no priority
// but global pause on both ways: lossless, so no FAIL, but every priority
// stops at once (the TCP bootstrap behind the RoCE traffic, storage...),
// and one congested flow pauses them all.
func pfcByGlobalPause(p *ethPort, f Finding, gp *pauseState) Finding {
	f.Status = Warn
	f.Value += "; " + gp.text + ": lossless by global pause, which stops every priority at once"
	prio, vec := "the RoCE priority", "0,0,0,1,0,0,0,0 for priority 3"
	if p.prio.known {
		prio, vec = fmt.Sprintf("priority %d (%s)", p.prio.prio, p.prio.why), pfcWith(p.now.DCB.PFCEnabled, p.prio.prio)
	}
	f.Remedy = fmt.Sprintf("RoCE fabrics pause %s alone: mlnx_qos -i %s --pfc %s, then ethtool -A %s rx off tx off, the switch ports likewise", prio, p.now.Name, vec, p.now.Name)
	return f
}

// judgeTrust (eth.trust): NCCL_IB_TC marks the DSCP; under trust pcp the
// NIC and switch ignore it and classify by the VLAN PCP instead.
func judgeTrust(p *ethPort) Finding {
	d := p.now.DCB
	if d == nil || d.Trust == "" {
		return skipped("trust mode (mlnx_qos / dcb app show)")
	}
	f := Finding{Source: d.Source, Value: "trust " + d.Trust}
	switch {
	case d.Trust == "dscp":
		f.Status = Pass
	case d.Trust == "pcp" && p.prio.tc != 0:
		f.Status = Warn
		f.Value += fmt.Sprintf(", but NCCL_IB_TC=%d marks DSCP %d", p.prio.tc, p.prio.dscp)
		f.Remedy = "the DSCP NCCL marks is ignored under trust pcp: mlnx_qos -i " + p.now.Name + " --trust dscp (as the switch ports trust it)"
	default:
		f.Status = Info
		f.Value += "; NCCL_IB_TC unset, so no DSCP class is asked for"
	}
	return f
}

// judgeECN (eth.ecn): without ECN on its priority, congestion is met by
// PFC pauses alone, which spread back through the fabric.
func judgeECN(p *ethPort) Finding {
	d := p.now.DCB
	if d == nil || d.ECN == nil {
		return skipped("ECN per priority (sysfs ecn/roce_np)")
	}
	f := Finding{Source: d.Source, Value: "ECN on priorities " + onPriorities(d.ECN)}
	switch pr := p.prio; {
	case !pr.known:
		f.Status = Info
		f.Value += "; the RoCE priority is not known: " + pr.why
	case d.ECN[pr.prio]:
		f.Status = Pass
		f.Value += fmt.Sprintf("; the RoCE priority is %d", pr.prio)
	default:
		f.Status = Warn
		f.Value = fmt.Sprintf("ECN off on priority %d, the RoCE traffic's; on: %s", pr.prio, onPriorities(d.ECN))
		f.Remedy = fmt.Sprintf("enable ECN (DCQCN) for priority %d: echo 1 > /sys/class/net/%s/ecn/roce_np/enable/%d and .../roce_rp/enable/%d, with ECN marking on the switch's RoCE queue", pr.prio, p.now.Name, pr.prio, pr.prio)
	}
	return f
}
