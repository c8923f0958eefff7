package doctor

import (
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// checkPortState: a port carries traffic only when ACTIVE with its physical
// link up. The remedy depends on where the bring-up stopped.
func checkPortState(h *host) []Finding {
	var out []Finding
	for _, p := range h.ports() {
		f := Finding{Check: "port.state", Subject: p.name(),
			Value: string(p.port.State) + ", " + p.port.PhysState, Source: h.portFile(p, "state")}
		switch phys := p.port.Phys(); {
		case p.port.State == "":
			// A capture without the port's state file (or an empty one):
			// nothing to judge, as for every other file a tree lacks.
			f.Status, f.Value = Skip, "unknown: no state file"
		case isActive(p.port) && phys == rdmasys.PhysLinkUp:
			f.Status = Pass
		case isActive(p.port) && phys == rdmasys.PhysOther:
			// Not a physical state the kernel names (a driver writing
			// "4: ACTIVE" there): a port only becomes ACTIVE over a
			// trained link, so the state decides.
			f.Status = Pass
			f.Value += fmt.Sprintf(" (phys_state %q is not a physical state name; ACTIVE implies the link is up)", p.port.PhysState)
		default:
			f.Status, f.Remedy = Fail, portStateRemedy(p.port)
		}
		out = append(out, h.scoped(p, f))
	}
	return out
}

func portStateRemedy(p rdmasys.Port) string {
	switch phys := p.Phys(); {
	case phys == rdmasys.PhysDisabled:
		if p.IsRoCE() {
			return "the port is administratively down: ip link set dev " + orDefault(portNetdev(p), "<netdev>") + " up"
		}
		return "the port is disabled: enable it (ibportstate <lid> <port> enable) or on the switch"
	case phys == rdmasys.PhysPolling || phys == rdmasys.PhysSleep:
		return "no link partner: check the cable, the transceiver and that the switch port is enabled"
	case phys == rdmasys.PhysLinkUp && (p.State == rdmasys.PortInit || p.State == rdmasys.PortArmed):
		return "the link is up but no subnet manager configured it: start opensm (or check the fabric's SM)"
	default:
		return "bring the link up: check the cable, the switch port and the driver log (dmesg)"
	}
}

// checkPortRate: an active port that trained below the expected rate
// silently caps the job. Without --expect-rate there is nothing to compare
// with on one host: ports of one model legitimately run at different rates
// (a 200G rail and a 100G storage port of the same ConnectX), and the fleet
// view compares the hosts instead.
func checkPortRate(h *host) []Finding {
	var out []Finding
	for _, p := range h.ports() {
		f := Finding{Check: "port.rate", Subject: p.name(), Value: orDefault(p.port.RateText, "unknown"),
			Source: h.portFile(p, "rate")}
		e := h.opts.ExpectRateGbps
		switch {
		case !isActive(p.port):
			f.Status, f.Value = Skip, "port not active"
		case e == 0 && isNarrowIB(p.port):
			// The port's own maximum width: InfiniBand HCA ports are 4X
			// (2X on NDR splitter cables); at 1X a lane is down.
			f.Status = Warn
			f.Value += "; trained at 1X width"
			f.Remedy = "a lane of the link is down: reseat or replace the cable/transceiver, check the switch port (ibportstate), then reset the port"
		case e == 0:
			f.Status = Info
			f.Value += "; no --expect-rate to compare with"
		case p.port.RateGbps < e:
			f.Status = Fail
			f.Value += fmt.Sprintf(", expected %g Gb/sec", e)
			f.Remedy = "the link trained below the expected rate: reseat or replace the cable/transceiver, check the switch port's speed setting, then reset the port and re-check"
		default:
			f.Status = Pass
			f.Value += fmt.Sprintf(", expected %g Gb/sec", e)
		}
		out = append(out, h.scoped(p, f))
	}
	return out
}

// isNarrowIB reports an InfiniBand port that trained at 1X width
// ("25 Gb/sec (1X EDR)").
func isNarrowIB(p rdmasys.Port) bool {
	return !p.IsRoCE() && strings.Contains(p.RateText, "(1X ")
}

// ibMTUs are the MTUs an RDMA port can use, largest first.
var ibMTUs = []int{4096, 2048, 1024, 512, 256}

// roceHeadroom is what RoCE v2 headers (GRH/IP, UDP, BTH, extended headers,
// ICRC) take from the Ethernet MTU before the RDMA payload MTU is chosen;
// the kernel subtracts the same bytes.
const roceHeadroom = 96

// roceMTU derives the active RDMA MTU of a RoCE port from its netdev MTU:
// the largest IB MTU that fits after the headers (1500 → 1024, 9000 → 4096).
func roceMTU(netdevMTU int) int {
	for _, m := range ibMTUs {
		if netdevMTU-roceHeadroom >= m {
			return m
		}
	}
	return ibMTUs[len(ibMTUs)-1]
}

// checkPortMTU: an active MTU below the maximum multiplies per-packet
// overhead; on RoCE the netdev MTU is the usual cap (1500 → 1024).
func checkPortMTU(h *host) []Finding {
	var out []Finding
	for _, p := range h.ports() {
		if !isActive(p.port) {
			out = append(out, Finding{Check: "port.mtu", Status: Skip, Subject: p.name(), Value: "port not active"})
			continue
		}
		if p.port.IsRoCE() {
			out = append(out, h.scoped(p, roceMTUFinding(h, p)))
		} else {
			out = append(out, h.scoped(p, ibMTUFinding(h, p)))
		}
	}
	return out
}

func ibMTUFinding(h *host, p portRef) Finding {
	f := Finding{Check: "port.mtu", Subject: p.name()}
	if h.opts.Querier == nil {
		f.Status, f.Value = Skip, "active/max MTU come from ibv_query_port, not sysfs (pass --ibv-devinfo FILE)"
		return f
	}
	active, maxMTU, err := h.opts.Querier.PortMTU(p.dev.Name, p.port.Number)
	f.Source = "ibv_query_port"
	if err != nil {
		f.Status, f.Value = Skip, "query port: "+err.Error()
		return f
	}
	f.Value = fmt.Sprintf("active %d, max %d", active, maxMTU)
	if active < maxMTU {
		f.Status = Warn
		f.Remedy = fmt.Sprintf("the subnet manager caps the MTU: set mtu=5 (%d) for the partition in opensm's partitions.conf and restart opensm", maxMTU)
	} else {
		f.Status = Pass
	}
	return f
}

func roceMTUFinding(h *host, p portRef) Finding {
	f := Finding{Check: "port.mtu", Subject: p.name()}
	ndev := portNetdev(p.port)
	if ndev == "" {
		f.Status, f.Value = Skip, "no netdev in the GID table"
		return f
	}
	nd, err := rdmasys.ReadNetdev(h.opts.SysRoot, ndev)
	f.Source = rdmasys.NetdevPath(h.opts.SysRoot, ndev) + "/mtu"
	switch {
	case err != nil && h.netns.lacks(ndev):
		f.Status, f.Value = Skip, ndev+" is not in this network namespace (a container's view): its MTU is the node's to check"
		return f
	case err != nil:
		f.Status, f.Value = Skip, err.Error()
		return f
	}
	var active, maxMTU int
	if h.opts.Querier != nil {
		if a, m, err := h.opts.Querier.PortMTU(p.dev.Name, p.port.Number); err == nil {
			active, maxMTU = a, m
			f.Value = fmt.Sprintf("active %d, max %d, netdev %s MTU %d", a, m, ndev, nd.MTU)
		}
	}
	if active == 0 {
		active, maxMTU = roceMTU(nd.MTU), ibMTUs[0]
		f.Value = fmt.Sprintf("active %d (derived from netdev %s MTU %d), max %d", active, ndev, nd.MTU, maxMTU)
	}
	if active < maxMTU {
		f.Status = Warn
		f.Remedy = fmt.Sprintf("use jumbo frames: ip link set dev %s mtu 9000 (and MTU 9000+ on the switch ports); RoCE then uses %d-byte packets", ndev, maxMTU)
	} else {
		f.Status = Pass
	}
	return f
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
