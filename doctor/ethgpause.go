package doctor

import (
	"fmt"

	"github.com/rdmabench/rdmabench/ethside"
)

// pauseState is global (802.3x) pause as `ethtool -a` shows it, reduced to
// what the judgements need. A direction not shown counts as off.
type pauseState struct {
	rx, tx bool
	text   string // "global pause rx on, tx off (autoneg on)"
}

func readPause(p *ethside.Pause) pauseState {
	s := pauseState{rx: p.RX != nil && *p.RX, tx: p.TX != nil && *p.TX}
	s.text = "global pause rx " + onOffShown(p.RX) + ", tx " + onOffShown(p.TX)
	if p.Autoneg != nil {
		s.text += " (autoneg " + onOffShown(p.Autoneg) + ")"
	}
	return s
}

func onOffShown(b *bool) string {
	switch {
	case b == nil:
		return "not shown"
	case *b:
		return "on"
	}
	return "off"
}

// lossless: the NIC both sends pause when its buffers fill (tx) and stops
// when the switch asks (rx); one direction alone still drops.
func (s pauseState) lossless() bool { return s.rx && s.tx }

// globalPauseLossless is the port's global pause when it makes the link
// lossless (rx and tx on), else nil.
func globalPauseLossless(i *ethside.Iface) *pauseState {
	if i.Pause == nil {
		return nil
	}
	s := readPause(i.Pause)
	if !s.lossless() {
		return nil
	}
	return &s
}

// judgeGlobalPause (eth.globalpause): a RoCE fabric makes its priority
// lossless with PFC, per priority; global pause stops every priority at
// once. The two are exclusive on the NIC (mlx5 refuses PFC while global
// pause is on, or one silently wins), so both set is a misconfiguration.
// Global pause alone is a legitimate, coarser lossless fabric: eth.pfc
// says so; this check then only reports it.
func judgeGlobalPause(p *ethPort) Finding {
	if p.now.Pause == nil {
		return skipped("global pause (ethtool -a)")
	}
	s := readPause(p.now.Pause)
	f := Finding{Source: p.now.Pause.Source, Value: s.text}
	var pfc *[8]bool
	if d := p.now.DCB; d != nil {
		pfc = d.PFCEnabled
	}
	on := s.rx || s.tx
	switch {
	case pfc != nil && onPriorities(pfc) != "none" && on:
		f.Status = Warn
		f.Value += fmt.Sprintf(" beside PFC on priorities %s: the NIC takes one or the other", onPriorities(pfc))
		f.Remedy = "PFC alone keeps the RoCE priority lossless: ethtool -A " + p.now.Name + " rx off tx off (and global flow control off on the switch ports)"
	case pfc == nil && on:
		f.Status = Info
		f.Value += "; PFC not shown (where PFC is on, global pause should be off)"
	case pfc == nil || onPriorities(pfc) != "none":
		f.Status = Pass
	case s.lossless():
		f.Status = Info
		f.Value += " and PFC on no priority: the link is lossless by global pause (eth.pfc)"
	default:
		f.Status = Info
		f.Value += " and PFC on no priority: nothing shown makes the link lossless (eth.pfc)"
	}
	return f
}
