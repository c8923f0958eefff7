package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// ethCount is one counter across the readings.
type ethCount struct {
	name         string
	now, grownBy uint64 // grownBy: 0 unwatched, or when it fell (a reset)
}

// counts are the port's counters the filter keeps, by name; ok is false
// when there were no counters at all.
func (p *ethPort) counts(keep func(ethside.CounterClass) bool) (out []ethCount, ok bool) {
	if p.before == nil {
		return nil, false
	}
	for name, v := range p.before.Values {
		if !keep(ethside.ClassifyCounter(name)) {
			continue
		}
		c := ethCount{name: name, now: v}
		if p.after != nil {
			if a, ok := p.after.Values[name]; ok {
				c.now = a
				if a > v {
					c.grownBy = a - v
				}
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b ethCount) int { return strings.Compare(a.name, b.name) })
	return out, true
}

// listed prints the counters that are non-zero ("name=3") or, grown, those
// that grew ("name +3").
func listed(cs []ethCount, grown bool) string {
	var parts []string
	for _, c := range cs {
		switch {
		case grown && c.grownBy > 0:
			parts = append(parts, fmt.Sprintf("%s +%d", c.name, c.grownBy))
		case !grown && c.now > 0:
			parts = append(parts, fmt.Sprintf("%s=%d", c.name, c.now))
		}
	}
	return strings.Join(parts, ", ")
}

func (p *ethPort) counterSource() string {
	if p.before == nil {
		return ""
	}
	return p.before.Source
}

// judgeLinkErrors (eth.errors): bits lost on the wire. Old counts may be
// a cable since replaced (WARN); counts growing now are a link failing
// (FAIL), which drops RoCE packets into go-back-N retransmission.
func judgeLinkErrors(p *ethPort) Finding {
	cs, ok := p.counts(func(c ethside.CounterClass) bool { return c.Kind == ethside.CounterLinkError })
	if !ok {
		return skipped("ethtool -S counters")
	}
	f := Finding{Source: p.counterSource()}
	switch grown, nonzero := listed(cs, true), listed(cs, false); {
	case len(cs) == 0:
		f.Status, f.Value = Skip, "no link-error counters among the driver's"
	case grown != "":
		f.Status, f.Value = Fail, fmt.Sprintf("growing over %s: %s", p.watch, grown)
		f.Remedy = "the link is taking errors now: reseat or replace the cable/transceiver (eth.optics shows its levels), check the switch port's counters, or move the port"
	case nonzero != "":
		f.Status, f.Value = Warn, nonzero
		if p.after != nil {
			f.Value += fmt.Sprintf(" (steady over %s)", p.watch)
		}
		f.Remedy = "old errors or a flaky link: re-run with --watch 10 to see whether they grow"
	default:
		f.Status, f.Value = Pass, fmt.Sprintf("%d counters, all zero", len(cs))
	}
	return f
}

// judgePause (eth.pause): pauses and discards on the RoCE priority are
// congestion, not a broken node: growing, they say the job is slowed by
// the fabric (WARN); old counts are history (INFO).
func judgePause(p *ethPort) Finding {
	onRoCE := func(c ethside.CounterClass) bool {
		return (c.Kind == ethside.CounterPause || c.Kind == ethside.CounterDiscard) &&
			(c.Prio == -1 || !p.prio.known || c.Prio == p.prio.prio)
	}
	cs, ok := p.counts(onRoCE)
	if !ok {
		return skipped("ethtool -S counters")
	}
	f := Finding{Source: p.counterSource()}
	scope := "every priority, the RoCE one not being known"
	if p.prio.known {
		scope = fmt.Sprintf("priority %d and the port", p.prio.prio)
	}
	switch grown, nonzero := listed(cs, true), listed(cs, false); {
	case len(cs) == 0:
		f.Status, f.Value = Skip, "no pause or discard counters among the driver's"
	case grown != "":
		f.Status = Warn
		f.Value = fmt.Sprintf("growing over %s on %s: %s%s", p.watch, scope, grown, ecnGrowth(p))
		f.Remedy = "the RoCE traffic is paused or dropped: enable ECN on the NIC and the switch so senders slow before buffers fill, check the switch's buffer and PFC headroom for the priority, and look for a slow or oversubscribed receiver (incast); out_of_buffer: the receiver ran out of posted buffers"
	case nonzero != "":
		f.Status, f.Value = Info, nonzero+" on "+scope+" (since the counters were reset; --watch shows whether they grow)"
	default:
		f.Status, f.Value = Pass, fmt.Sprintf("%d counters on %s, all zero", len(cs), scope)
	}
	return f
}

// ecnGrowth says whether ECN marked packets meanwhile: congestion control
// at work beside the pauses.
func ecnGrowth(p *ethPort) string {
	cs, _ := p.counts(func(c ethside.CounterClass) bool { return c.Kind == ethside.CounterCongestion })
	if g := listed(cs, true); g != "" {
		return "; meanwhile " + g
	}
	return ""
}

// judgeFlaps (eth.flaps): each link-down drops every QP's packets in
// flight; one old event is a cable once moved, growing ones a link
// failing now.
func judgeFlaps(p *ethPort) Finding {
	cs, ok := p.counts(func(c ethside.CounterClass) bool { return c.Kind == ethside.CounterLinkDown })
	if !ok {
		return skipped("ethtool -S counters")
	}
	f := Finding{Source: p.counterSource()}
	var events uint64
	for _, c := range cs {
		events = max(events, c.now)
	}
	switch grown := listed(cs, true); {
	case len(cs) == 0:
		f.Status, f.Value = Skip, "no link-down counter among the driver's"
	case grown != "":
		f.Status, f.Value = Fail, fmt.Sprintf("the link went down over %s: %s", p.watch, grown)
		f.Remedy = "the link is flapping: reseat or replace the cable/transceiver, check the switch port's log and the NIC's (dmesg: mlx5 port module/link events)"
	case events > 1:
		f.Status, f.Value = Warn, listed(cs, false)
		f.Remedy = "the link has gone down more than once since the driver loaded: check dmesg for when, and the cable/transceiver; --watch shows whether it still does"
	case events == 1:
		f.Status, f.Value = Info, listed(cs, false)+" (one since the driver loaded: a cable moved or a switch reboot)"
	default:
		f.Status, f.Value = Pass, "no link-down events"
	}
	return f
}
