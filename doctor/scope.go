package doctor

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// scope is the set of ports doctor judges: the ones NCCL will use. A port
// outside it (an unplugged second port, a storage NIC that NCCL_IB_HCA
// leaves out, a device a container cannot open) is reported as INFO, so a
// healthy node gives no FAIL.
type scope struct {
	why map[string]string // port name → why it is outside; absent: judged
}

// ParseDeviceArg parses -d's DEV[:PORT].
func ParseDeviceArg(s string) (dev string, port int, err error) {
	dev, p, hasPort := strings.Cut(strings.TrimSpace(s), ":")
	if dev == "" {
		return "", 0, fmt.Errorf("-d %q: want DEV or DEV:PORT", s)
	}
	if hasPort {
		if port, err = strconv.Atoi(p); err != nil || port < 1 {
			return "", 0, fmt.Errorf("-d %q: port must be a number from 1", s)
		}
	}
	return dev, port, nil
}

// computeScope applies NCCL's selection (NCCL_IB_HCA with its ^, = and
// prefix rules; without it every ACTIVE port of a device NCCL can open),
// then narrows it to the ports -d names.
func (h *host) computeScope() error {
	h.scope = scope{why: map[string]string{}}
	all := h.ports()
	nodes := h.uverbsNodes()
	anyNode := false
	for _, ok := range nodes {
		anyNode = anyNode || ok
	}
	// In a container with some nodes, NCCL fails to open the other
	// devices and goes on without them; with none, it can use nothing, and
	// every device's missing node matters.
	openable := func(dev string) bool { return !anyNode || nodes[dev] }
	hasActive := h.activeDevices()

	val, set := h.listEnv("NCCL_IB_HCA")
	list, err := parseNCCLList(val, true)
	switch {
	case set && err == nil && !list.exclude:
		for _, p := range all {
			it, ok := list.selects(p)
			switch {
			case !ok:
				h.scope.why[p.name()] = "not in NCCL_IB_HCA"
			case it.port == 0 && !isActive(p.port) && hasActive[p.dev.Name]:
				h.scope.why[p.name()] = "inactive; NCCL uses the ACTIVE ports of " + p.dev.Name
			}
		}
	default:
		reason := "NCCL_IB_HCA is unset, so NCCL uses the ACTIVE ports"
		switch {
		case set && err == nil:
			reason = "NCCL_IB_HCA=" + val + " leaves the ACTIVE ports it does not exclude"
		case set:
			reason = "NCCL_IB_HCA does not parse (see nccl.ib_hca), so the ACTIVE ports are judged"
		}
		usable := 0
		for _, p := range all {
			selected := true
			if set && err == nil {
				_, selected = list.selects(p)
			}
			switch {
			case !selected:
				h.scope.why[p.name()] = "excluded by NCCL_IB_HCA"
			case !openable(p.dev.Name):
				h.scope.why[p.name()] = "no /dev/infiniband node here, so NCCL cannot open it"
			case !isActive(p.port):
				h.scope.why[p.name()] = "inactive; " + reason
			default:
				usable++
			}
		}
		// With nothing NCCL could use, every port's problem is the
		// problem: judge all that NCCL_IB_HCA does not exclude.
		if usable == 0 {
			maps.DeleteFunc(h.scope.why, func(_, why string) bool { return why != "excluded by NCCL_IB_HCA" })
		}
	}
	return h.narrowToDevices(all)
}

// narrowToDevices keeps the ports -d selects; -d names them explicitly, so
// they are judged whatever their state.
func (h *host) narrowToDevices(all []portRef) error {
	if len(h.opts.Devices) == 0 {
		return nil
	}
	picked := map[string]bool{}
	for _, arg := range h.opts.Devices {
		dev, port, err := ParseDeviceArg(arg)
		if err != nil {
			return err
		}
		found := false
		for _, p := range all {
			if p.dev.Name == dev && (port == 0 || p.port.Number == port) {
				picked[p.name()], found = true, true
			}
		}
		if !found {
			return fmt.Errorf("-d %s: no such RDMA device or port (have %s)", arg, orDefault(strings.Join(h.deviceNames(), ", "), "none"))
		}
	}
	for _, p := range all {
		if !picked[p.name()] {
			h.scope.why[p.name()] = "not selected by -d"
		} else if w := h.scope.why[p.name()]; strings.HasPrefix(w, "inactive") {
			delete(h.scope.why, p.name())
		}
	}
	return nil
}

// selects reports whether NCCL's list selects a port, and by which item.
// For an exclusion list, ok is true for the ports it does not exclude.
func (l ncclList) selects(p portRef) (ncclItem, bool) {
	for _, it := range l.items {
		if len(l.matches(it, []string{p.dev.Name})) > 0 && (it.port == 0 || it.port == p.port.Number) {
			return it, !l.exclude
		}
	}
	return ncclItem{}, l.exclude
}

// uverbsNodes says, per device, whether /dev/infiniband has its node.
func (h *host) uverbsNodes() map[string]bool {
	out := map[string]bool{}
	m, _ := rdmasys.UverbsDevices(h.opts.SysRoot)
	for dev, u := range m {
		_, err := os.Stat(filepath.Join(h.opts.DevRoot, "infiniband", u))
		out[dev] = err == nil
	}
	return out
}

// inScope reports whether NCCL will use the port.
func (h *host) inScope(p portRef) bool {
	_, out := h.scope.why[p.name()]
	return !out
}

// devInScope reports whether NCCL will use any port of the device; the
// reason is the first port's when it will not.
func (h *host) devInScope(dev string) (bool, string) {
	why := ""
	for _, p := range h.ports() {
		if p.dev.Name != dev {
			continue
		}
		if h.inScope(p) {
			return true, ""
		}
		if why == "" {
			why = h.scope.why[p.name()]
		}
	}
	return why == "", why
}

// unused turns a finding about something NCCL will not use into INFO.
func unused(f Finding, why string) Finding {
	f.Status, f.Remedy = Info, ""
	f.Value += " (not used by NCCL: " + why + ")"
	return f
}

// scoped judges a port's finding only when NCCL uses the port.
func (h *host) scoped(p portRef, f Finding) Finding {
	if h.inScope(p) {
		return f
	}
	return unused(f, h.scope.why[p.name()])
}

// scopedDev judges a device's finding only when NCCL uses the device.
func (h *host) scopedDev(dev string, f Finding) Finding {
	if ok, why := h.devInScope(dev); !ok {
		return unused(f, why)
	}
	return f
}
