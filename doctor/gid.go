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
	ns := h.netns
	for _, p := range h.ports() {
		if !h.roce(p) {
			continue
		}
		f := Finding{Check: "gid.roce_v2", Subject: p.name(), Source: h.portFile(p, "gids")}
		g, reason, err := rdmasys.PickRoCEv2IPv4(p.port.GIDs)
		switch own, hasOwn := ns.ownRoCEv2IPv4(p.port.GIDs); {
		case err != nil:
			f.Status, f.Value = Fail, "no RoCE v2 IPv4 GID"
			f.Remedy = "assign an IPv4 address to " + orDefault(portNetdev(p.port), "the port's netdev") + "; the kernel then adds the RoCE v2 entry"
		case ns.foreign(g) && hasOwn:
			f.Status = Warn
			f.Value = fmt.Sprintf("index %d (%s) is the lowest, the one NCCL picks, but %s is not in this network namespace (a container's view); "+
				"this namespace's own is index %d (%s)", g.Index, reason, g.Netdev, own.Index, rdmasys.DescribeGID(own))
			f.Remedy = fmt.Sprintf("set NCCL_IB_GID_INDEX=%d here: %s", own.Index, foreignGIDEffect)
		case ns.foreign(g):
			f.Status = Warn
			f.Value = fmt.Sprintf("index %d (%s), but no RoCE v2 IPv4 entry is on an interface of this network namespace (a container's view)", g.Index, reason)
			f.Remedy = "give the pod an interface on the RoCE port (a macvlan or SR-IOV secondary network, or the host's network): " + foreignGIDEffect
		default:
			f.Status, f.Value = Pass, fmt.Sprintf("index %d (%s)", g.Index, reason)
			f.Value += otherInterfaces(p.port.GIDs, g)
		}
		out = append(out, h.scoped(p, f))
	}
	return out
}

// foreignGIDEffect is what using a GID of another network namespace does.
const foreignGIDEffect = "MLNX_OFED's and DOCA-OFED's ib_core refuse a GID whose interface is in another namespace to this process " +
	"(ibv_modify_qp fails with ENODEV), and the upstream kernel sends from that interface's address, outside this namespace's network"

// namespace is the set of interfaces this network namespace holds
// (class/net). In a pod under the shared RDMA mode, class/infiniband shows
// every device of the node and its GID table names the node's interfaces
// and other pods', which this namespace's class/net does not list.
type namespace map[string]bool

// readNamespace reads class/net; nil (no judgement) when the tree has none.
func readNamespace(sysRoot string) namespace {
	names, err := rdmasys.NetdevNames(sysRoot)
	if err != nil || len(names) == 0 {
		return nil
	}
	ns := namespace{}
	for _, n := range names {
		ns[n] = true
	}
	return ns
}

// lacks: the interface is in another network namespace.
func (ns namespace) lacks(netdev string) bool { return ns != nil && netdev != "" && !ns[netdev] }

// foreign: the entry's interface is in another network namespace.
func (ns namespace) foreign(g rdmasys.GID) bool { return ns.lacks(g.Netdev) }

// ownRoCEv2IPv4 is the lowest RoCE v2 IPv4 entry on an interface of this
// namespace.
func (ns namespace) ownRoCEv2IPv4(gids []rdmasys.GID) (rdmasys.GID, bool) {
	for _, g := range gids {
		if g.Type == rdmasys.GIDTypeRoCEv2 && g.IsIPv4() && !ns.foreign(g) {
			return g, true
		}
	}
	return rdmasys.GID{}, false
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
		if !h.roce(p) {
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
	c := newGIDChoice(h, p)
	if !set {
		return c.unset(f)
	}
	idx, err := strconv.Atoi(val)
	switch {
	case err == nil && idx == -1:
		return c.chosen(f)
	case err != nil || idx < 0:
		f.Status, f.Value, f.Remedy = Fail, fmt.Sprintf("NCCL_IB_GID_INDEX=%q is not an index", val), c.use
		return f
	}
	return c.index(h, p, f, idx)
}

// gidChoice is the entry NCCL_IB_GID_INDEX should name on a port: the
// lowest RoCE v2 IPv4 entry (want, NCCL's own choice), or this network
// namespace's own where the lowest is the node's interface (nsWrong: in a
// pod), and the remedy that says so.
type gidChoice struct {
	want    rdmasys.GID
	reason  string
	pickErr error
	own     rdmasys.GID
	hasOwn  bool
	nsWrong bool
	ns      namespace
	use     string // the remedy: what to set
}

func newGIDChoice(h *host, p portRef) gidChoice {
	c := gidChoice{ns: h.netns}
	c.want, c.reason, c.pickErr = rdmasys.PickRoCEv2IPv4(p.port.GIDs)
	c.own, c.hasOwn = c.ns.ownRoCEv2IPv4(p.port.GIDs)
	c.nsWrong = c.pickErr == nil && c.ns.foreign(c.want) && c.hasOwn
	c.use = "assign an IPv4 address to " + orDefault(portNetdev(p.port), "the netdev") + ", then set NCCL_IB_GID_INDEX to its RoCE v2 entry"
	switch {
	case c.nsWrong:
		c.use = fmt.Sprintf("set NCCL_IB_GID_INDEX=%d (%s, this network namespace's own)", c.own.Index, rdmasys.DescribeGID(c.own))
	case c.pickErr == nil:
		c.use = fmt.Sprintf("set NCCL_IB_GID_INDEX=%d (%s)", c.want.Index, c.reason)
	}
	return c
}

// unset: NCCL picks the entry itself, wrongly in a pod whose lowest entry
// is the node's interface.
func (c gidChoice) unset(f Finding) Finding {
	f.Status, f.Value = Info, "NCCL_IB_GID_INDEX not set (NCCL ≥ 2.21 picks RoCE v2 IPv4 itself; older versions use 0)"
	switch {
	case c.nsWrong:
		f.Status = Warn
		f.Value += fmt.Sprintf("; it would pick index %d, on %s, which is not in this network namespace", c.want.Index, c.want.Netdev)
		f.Remedy = c.use + ": " + foreignGIDEffect
	case c.pickErr == nil:
		f.Value += fmt.Sprintf("; index %d is right here", c.want.Index)
	}
	return f
}

// chosen: NCCL >= 2.21 reads -1 as "choose": the first entry of the
// configured family (NCCL_IB_ADDR_FAMILY) and RoCE version.
func (c gidChoice) chosen(f Finding) Finding {
	f.Value = "NCCL_IB_GID_INDEX=-1: NCCL ≥ 2.21 chooses the entry itself"
	switch {
	case c.nsWrong:
		f.Status, f.Value = Warn, f.Value+fmt.Sprintf(": index %d, on %s, which is not in this network namespace", c.want.Index, c.want.Netdev)
		f.Remedy = c.use + ": " + foreignGIDEffect
	case c.pickErr == nil:
		f.Status, f.Value = Pass, f.Value+"; here "+c.reason
	default:
		f.Status, f.Value, f.Remedy = Fail, f.Value+", and this port has no RoCE v2 IPv4 entry to choose", c.use
	}
	return f
}

// index judges the entry idx that NCCL_IB_GID_INDEX names.
func (c gidChoice) index(h *host, p portRef, f Finding, idx int) Finding {
	f.Value = fmt.Sprintf("NCCL_IB_GID_INDEX=%d: ", idx)
	g, ok := findGID(p.port.GIDs, idx)
	switch {
	case !ok:
		f.Value += fmt.Sprintf("gid %d is not populated", idx)
	case g.Type != rdmasys.GIDTypeRoCEv2:
		f.Value += fmt.Sprintf("gid %d is %s (%s)", idx, g.Type, g.AddrString())
	case g.IsLinkLocal():
		f.Value += fmt.Sprintf("gid %d is link-local %s (%s)", idx, g.AddrString(), g.Type)
	case c.ns.foreign(g):
		f.Value += rdmasys.DescribeGID(g) + ", whose interface is not in this network namespace (a container's view)"
		f.Status, f.Remedy = Warn, foreignGIDEffect
		if c.hasOwn {
			f.Remedy = fmt.Sprintf("set NCCL_IB_GID_INDEX=%d (%s): %s", c.own.Index, rdmasys.DescribeGID(c.own), foreignGIDEffect)
		}
		return f
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
		f.Remedy = "set NCCL_IB_ADDR_FAMILY=AF_INET6 on every node, or " + c.use
		return f
	default:
		// Any RoCE v2 IPv4 entry on an up interface routes: a VLAN's or a
		// secondary address's entry is as good as the lowest one.
		f.Status, f.Value = Pass, f.Value+rdmasys.DescribeGID(g)
		switch {
		case c.nsWrong:
			f.Value += fmt.Sprintf(" (the lowest RoCE v2 IPv4 entry, %d, is on %s, not in this network namespace: this one is right)", c.want.Index, c.want.Netdev)
		case c.pickErr == nil && c.want.Index != idx:
			f.Value += fmt.Sprintf(" (the lowest RoCE v2 IPv4 entry is %d; either works)", c.want.Index)
		}
		return f
	}
	f.Status, f.Remedy = Fail, c.use
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
