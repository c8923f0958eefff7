package live

import (
	"sort"
	"strconv"
	"strings"

	"github.com/mdlayher/ethtool"
	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

// link reads ETHTOOL_MSG_LINKMODES_GET and LINKSTATE_GET through the
// library: the trained speed, duplex, carrier, and the speeds the port
// advertises.
func (k *kernel) link(name string, p *problems) *ethside.Link {
	if k.eth == nil {
		note(p, "ethtool netlink", name, k.ethErr)
		return nil
	}
	ifi := ethtool.Interface{Name: name}
	lm, err := k.eth.LinkMode(ifi)
	if err != nil {
		note(p, "ethtool netlink LINKMODES_GET", name, err)
		return nil
	}
	l := &ethside.Link{Source: "ethtool netlink LINKMODES_GET " + name}
	// The kernel reports an unknown speed as SPEED_UNKNOWN (-1, or
	// 0xffffffff read as unsigned).
	if lm.SpeedMegabits > 0 && lm.SpeedMegabits < 1<<31-1 {
		l.SpeedMbps = lm.SpeedMegabits
	}
	switch lm.Duplex {
	case ethtool.Full:
		l.Duplex = "Full"
	case ethtool.Half:
		l.Duplex = "Half"
	}
	l.SupportedMbps = speedsOf(lm.Ours)
	if st, err := k.eth.LinkState(ifi); err == nil {
		up := st.Link
		l.Up = &up
	} else {
		note(p, "ethtool netlink LINKSTATE_GET", name, err)
	}
	return l
}

// speedsOf takes the speeds out of link mode names ("100000baseCR4/Full"
// -> 100000), sorted and without repeats.
func speedsOf(modes []ethtool.AdvertisedLinkMode) []int {
	seen := map[int]bool{}
	var out []int
	for _, m := range modes {
		head, _, ok := strings.Cut(m.Name, "base")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(head)
		if err != nil || n <= 0 || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// fec reads ETHTOOL_MSG_FEC_GET through the library.
func (k *kernel) fec(name string, p *problems) *ethside.FEC {
	if k.eth == nil {
		return nil // link already noted why
	}
	f, err := k.eth.FEC(ethtool.Interface{Name: name})
	if err != nil {
		note(p, "ethtool netlink FEC_GET", name, err)
		return nil
	}
	out := &ethside.FEC{Source: "ethtool netlink FEC_GET " + name}
	if f.Active != 0 {
		out.Active = ethtool.FECMode(f.Active).String()
	}
	out.Configured = fecNames(f.Supported())
	return out
}

// fecNames spells a FEC mode mask as ethtool --show-fec does.
func fecNames(m ethtool.FECModes) []string {
	var out []string
	for _, b := range []struct {
		bit  int
		name string
	}{
		{unix.ETHTOOL_FEC_AUTO, "Auto"}, {unix.ETHTOOL_FEC_OFF, "Off"},
		{unix.ETHTOOL_FEC_NONE, "None"}, {unix.ETHTOOL_FEC_RS, "RS"},
		{unix.ETHTOOL_FEC_BASER, "BaseR"}, {unix.ETHTOOL_FEC_LLRS, "LLRS"},
	} {
		if int(m)&b.bit != 0 {
			out = append(out, b.name)
		}
	}
	return out
}
