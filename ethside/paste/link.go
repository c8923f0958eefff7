package paste

import (
	"sort"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// parseLink reads `ethtool IF`: speed, duplex, link detected and the
// speeds of the supported (else advertised) link modes, whose lists
// continue on lines without a colon.
func parseLink(lines []string, src string, it *ethside.Iface) error {
	l := &ethside.Link{Source: src}
	var fe firstErr
	var supported, advertised []int
	var list *[]int // the link-mode list a continuation line extends
	for i, raw := range lines {
		key, val, ok := keyValue(raw)
		if !ok {
			if list != nil {
				*list = append(*list, modeSpeeds(raw)...)
			}
			continue
		}
		list = nil
		switch key {
		case "Supported link modes":
			list = &supported
		case "Advertised link modes":
			list = &advertised
		case "Speed":
			l.SpeedMbps = speedMbps(val, i+1, &fe)
		case "Duplex":
			if val == "Full" || val == "Half" {
				l.Duplex = val
			}
		case "Link detected":
			if up, ok := onOff(val); ok {
				l.Up = ptr(up)
			} else {
				fe.add(i+1, "Link detected %q is neither yes nor no", val)
			}
		}
		if list != nil {
			*list = append(*list, modeSpeeds(val)...)
		}
	}
	if l.Up == nil && l.SpeedMbps == 0 && len(supported)+len(advertised) == 0 && fe.err == nil {
		return errorf(0, "no Speed, link modes or Link detected line: not `ethtool IF` output")
	}
	if len(supported) == 0 {
		supported = advertised
	}
	l.SupportedMbps = uniqueSorted(supported)
	it.Link = l
	return fe.err
}

// speedMbps reads "100000Mb/s"; "Unknown!" (link down) is 0.
func speedMbps(val string, line int, fe *firstErr) int {
	if strings.HasPrefix(val, "Unknown") {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSuffix(val, "Mb/s"))
	if err != nil || n < 0 {
		fe.add(line, "Speed %q is not N Mb/s", val)
		return 0
	}
	return n
}

// modeSpeeds reads "100000baseCR4/Full 25000baseSR/Full" as Mb/s.
func modeSpeeds(s string) []int {
	var out []int
	for _, f := range strings.Fields(s) {
		digits, _, ok := strings.Cut(f, "base")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(digits); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

func uniqueSorted(v []int) []int {
	if len(v) == 0 {
		return nil
	}
	sort.Ints(v)
	out := v[:1]
	for _, x := range v[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// parseFEC reads `ethtool --show-fec IF`. Early ethtool printed one
// "FEC encodings:" line, and ethtool 5.x "Supported/Configured FEC
// encodings:", both read as the configured ones.
func parseFEC(lines []string, src string, it *ethside.Iface) error {
	f := &ethside.FEC{Source: src}
	seen := false
	for _, raw := range lines {
		key, val, ok := keyValue(raw)
		if !ok {
			continue
		}
		switch key {
		case "Active FEC encoding":
			f.Active, seen = val, true
		case "Configured FEC encodings", "Supported/Configured FEC encodings", "FEC encodings":
			f.Configured, seen = strings.Fields(val), true
		}
	}
	if !seen {
		return errorf(0, "no \"Active FEC encoding\" or \"Configured FEC encodings\" line")
	}
	it.FEC = f
	return nil
}
