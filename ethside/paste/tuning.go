package paste

import (
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// section tracks ethtool -g/-l's two blocks.
type section int

const (
	sectionNone section = iota
	sectionMax
	sectionCurrent
)

func sectionOf(line string) (section, bool) {
	switch {
	case strings.HasPrefix(line, "Pre-set maximums"):
		return sectionMax, true
	case strings.HasPrefix(line, "Current hardware settings"):
		return sectionCurrent, true
	}
	return sectionNone, false
}

// sectioned walks "Pre-set maximums:"/"Current hardware settings:" and
// hands each counted key to set.
func sectioned(lines []string, set func(sec section, key string, n int)) (bool, error) {
	var fe firstErr
	sec, seen := sectionNone, false
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if s, ok := sectionOf(line); ok {
			sec, seen = s, true
			continue
		}
		key, val, ok := keyValue(line)
		if !ok || sec == sectionNone || val == "" {
			continue
		}
		switch key {
		case "RX", "TX", "Combined", "Other":
			n, ok := count(val)
			if !ok {
				fe.add(i+1, "%s %q is not a count", key, val)
				continue
			}
			set(sec, key, n)
		}
	}
	if !seen {
		return false, errorf(0, "no \"Pre-set maximums\" or \"Current hardware settings\" block")
	}
	return true, fe.err
}

// parseRing reads `ethtool -g IF`.
func parseRing(lines []string, src string, it *ethside.Iface) error {
	r := &ethside.Ring{Source: src}
	seen, err := sectioned(lines, func(sec section, key string, n int) {
		switch {
		case sec == sectionMax && key == "RX":
			r.RXMax = n
		case sec == sectionMax && key == "TX":
			r.TXMax = n
		case sec == sectionCurrent && key == "RX":
			r.RX = n
		case sec == sectionCurrent && key == "TX":
			r.TX = n
		}
	})
	if seen {
		it.Ring = r
	}
	return err
}

// parseChannels reads `ethtool -l IF`.
func parseChannels(lines []string, src string, it *ethside.Iface) error {
	c := &ethside.Channels{Source: src}
	seen, err := sectioned(lines, func(sec section, key string, n int) {
		dst := map[string]*int{"RX": &c.RX, "TX": &c.TX, "Combined": &c.Combined}
		if sec == sectionMax {
			dst = map[string]*int{"RX": &c.RXMax, "TX": &c.TXMax, "Combined": &c.CombinedMax}
		}
		if p := dst[key]; p != nil {
			*p = n
		}
	})
	if seen {
		it.Channels = c
	}
	return err
}

// parseCoalesce reads `ethtool -c IF`; "Adaptive RX: on  TX: on" holds
// two settings on one line.
func parseCoalesce(lines []string, src string, it *ethside.Iface) error {
	c := &ethside.Coalesce{Source: src}
	var fe firstErr
	usecs := false
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		if rest, ok := strings.CutPrefix(line, "Adaptive RX:"); ok {
			rx, tx, _ := strings.Cut(rest, "TX:")
			if v, ok := onOff(rx); ok {
				c.AdaptiveRX = ptr(v)
			}
			if v, ok := onOff(tx); ok {
				c.AdaptiveTX = ptr(v)
			}
			continue
		}
		key, val, ok := keyValue(line)
		if !ok || (key != "rx-usecs" && key != "tx-usecs") {
			continue
		}
		n, ok := count(val)
		if !ok {
			fe.add(i+1, "%s %q is not a number", key, val)
			continue
		}
		usecs = true
		if key == "rx-usecs" {
			c.RXUsecs = n
		} else {
			c.TXUsecs = n
		}
	}
	if c.AdaptiveRX == nil && c.AdaptiveTX == nil && !usecs && fe.err == nil {
		return errorf(0, "no Adaptive or rx-usecs line: not `ethtool -c IF` output")
	}
	it.Coalesce = c
	return fe.err
}

// parsePause reads `ethtool -a IF`.
func parsePause(lines []string, src string, it *ethside.Iface) error {
	p := &ethside.Pause{Source: src}
	var fe firstErr
	for i, raw := range lines {
		key, val, ok := keyValue(raw)
		if !ok {
			continue
		}
		var dst **bool
		switch key {
		case "Autonegotiate":
			dst = &p.Autoneg
		case "RX":
			dst = &p.RX
		case "TX":
			dst = &p.TX
		default:
			continue
		}
		v, ok := onOff(val)
		if !ok {
			fe.add(i+1, "%s %q is neither on nor off", key, val)
			continue
		}
		*dst = ptr(v)
	}
	if p.Autoneg == nil && p.RX == nil && p.TX == nil && fe.err == nil {
		return errorf(0, "no Autonegotiate, RX or TX line: not `ethtool -a IF` output")
	}
	it.Pause = p
	return fe.err
}
