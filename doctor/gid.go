package doctor

import (
	"fmt"
	"strconv"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// checkRoCEGID: RoCE traffic between subnets needs a RoCE v2 GID with an
// IPv4 address; report which index that is, since NCCL_IB_GID_INDEX and
// rdmabench --gid-index must name it.
func checkRoCEGID(h *host) []Finding {
	var out []Finding
	for _, p := range h.ports() {
		if !p.port.IsRoCE() {
			continue
		}
		f := Finding{Check: "gid.roce_v2", Subject: p.name(), Source: h.portFile(p, "gids")}
		g, reason, err := rdmasys.PickRoCEv2IPv4(p.port.GIDs)
		if err != nil {
			f.Status, f.Value = Fail, "no RoCE v2 IPv4 GID"
			f.Remedy = "assign an IPv4 address to " + orDefault(portNetdev(p.port), "the port's netdev") + "; the kernel then adds the RoCE v2 entry"
		} else {
			f.Status, f.Value = Pass, fmt.Sprintf("index %d (%s)", g.Index, reason)
			f.Value += otherInterfaces(p.port.GIDs, g)
		}
		out = append(out, h.scoped(p, f))
	}
	return out
}

// otherInterfaces names the RoCE v2 IPv4 entries of interfaces other than
// the chosen entry's: on a RoCE LAG the bond's VLANs each have their own,
// and NCCL (which takes the lowest unless NCCL_IB_GID_INDEX says) sends
// untagged on the bond while the fabric's lossless class may be on a VLAN.
func otherInterfaces(gids []rdmasys.GID, chosen rdmasys.GID) string {
	s, seen := "", map[string]bool{chosen.Netdev: true}
	for _, g := range gids {
		if g.Type != rdmasys.GIDTypeRoCEv2 || !g.IsIPv4() || g.Netdev == "" || seen[g.Netdev] {
			continue
		}
		seen[g.Netdev] = true
		s += fmt.Sprintf("; %s has its own at index %d (%s): NCCL_IB_GID_INDEX=%d sends on it", g.Netdev, g.Index, g.AddrString(), g.Index)
	}
	return s
}

// checkNCCLGIDIndex: a wrong NCCL_IB_GID_INDEX still connects (RoCE v1 or
// link-local entries work on one L2 segment) but crawls or hangs across
// routers, so name the entry it points at and the one to use.
func checkNCCLGIDIndex(h *host) []Finding {
	val, set := h.env("NCCL_IB_GID_INDEX")
	var out []Finding
	for _, p := range h.ports() {
		if !p.port.IsRoCE() {
			continue
		}
		out = append(out, h.scoped(p, gidIndexFinding(h, p, val, set)))
	}
	if set && len(out) == 0 && len(h.devs) > 0 {
		out = append(out, Finding{Check: "nccl.gid_index", Status: Info, Subject: "NCCL_IB_GID_INDEX",
			Value: "NCCL_IB_GID_INDEX=" + val + " has no effect without RoCE ports"})
	}
	return out
}

func gidIndexFinding(h *host, p portRef, val string, set bool) Finding {
	f := Finding{Check: "nccl.gid_index", Subject: p.name(), Source: h.portFile(p, "gids")}
	want, reason, pickErr := rdmasys.PickRoCEv2IPv4(p.port.GIDs)
	use := "assign an IPv4 address to " + orDefault(portNetdev(p.port), "the netdev") + ", then set NCCL_IB_GID_INDEX to its RoCE v2 entry"
	if pickErr == nil {
		use = fmt.Sprintf("set NCCL_IB_GID_INDEX=%d (%s)", want.Index, reason)
	}
	if !set {
		f.Status, f.Value = Info, "NCCL_IB_GID_INDEX not set (NCCL ≥ 2.21 picks RoCE v2 IPv4 itself; older versions use 0)"
		if pickErr == nil {
			f.Value += fmt.Sprintf("; index %d is right here", want.Index)
		}
		return f
	}
	idx, err := strconv.Atoi(val)
	switch {
	case err == nil && idx == -1:
		// NCCL >= 2.21 reads -1 as "choose": the first entry of the
		// configured family (NCCL_IB_ADDR_FAMILY) and RoCE version.
		f.Value = "NCCL_IB_GID_INDEX=-1: NCCL ≥ 2.21 chooses the entry itself"
		if pickErr == nil {
			f.Status, f.Value = Pass, f.Value+"; here "+reason
		} else {
			f.Status, f.Value, f.Remedy = Fail, f.Value+", and this port has no RoCE v2 IPv4 entry to choose", use
		}
		return f
	case err != nil || idx < 0:
		f.Status, f.Value, f.Remedy = Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%q is not an index", val), use
		return f
	}
	f.Value = fmt.Sprintf("NCCL_IB_GID_INDEX=%d: ", idx)
	g, ok := findGID(p.port.GIDs, idx)
	switch {
	case !ok:
		f.Value += fmt.Sprintf("gid %d is not populated", idx)
	case g.Type != rdmasys.GIDTypeRoCEv2:
		f.Value += fmt.Sprintf("gid %d is %s (%s)", idx, g.Type, g.AddrString())
	case g.IsLinkLocal():
		f.Value += fmt.Sprintf("gid %d is link-local %s (%s)", idx, g.AddrString(), g.Type)
	case !netdevUp(h, g.Netdev):
		f.Value += rdmasys.DescribeGID(g) + ", which is not up"
	case !g.IsIPv4():
		// A routable IPv6 entry works when every node uses IPv6.
		f.Value += rdmasys.DescribeGID(g)
		if v, _ := h.env("NCCL_IB_ADDR_FAMILY"); v == "AF_INET6" {
			f.Status = Pass
			return f
		}
		f.Status = Warn
		f.Value += " is IPv6"
		f.Remedy = "set NCCL_IB_ADDR_FAMILY=AF_INET6 on every node, or " + use
		return f
	default:
		// Any RoCE v2 IPv4 entry on an up interface routes: a VLAN's or a
		// secondary address's entry is as good as the lowest one.
		f.Status, f.Value = Pass, f.Value+rdmasys.DescribeGID(g)
		if pickErr == nil && want.Index != idx {
			f.Value += fmt.Sprintf(" (the lowest RoCE v2 IPv4 entry is %d; either works)", want.Index)
		}
		return f
	}
	f.Status, f.Remedy = Fail, use
	return f
}

// netdevUp reports whether a GID's interface is up; an entry without one
// (or a tree without class/net) is not held against it.
func netdevUp(h *host, name string) bool {
	if name == "" {
		return true
	}
	nd, err := rdmasys.ReadNetdev(h.opts.SysRoot, name)
	return err != nil || nd.IsUp()
}

func findGID(gids []rdmasys.GID, idx int) (rdmasys.GID, bool) {
	for _, g := range gids {
		if g.Index == idx {
			return g, true
		}
	}
	return rdmasys.GID{}, false
}
