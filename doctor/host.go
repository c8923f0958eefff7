package doctor

import (
	"fmt"
	"os"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// host is what every check reads: the options plus the RDMA devices and PCI
// functions, read once.
type host struct {
	opts    Options
	devs    []rdmasys.Device
	devErrs []error                      // devices that could not be read
	pci     map[string]rdmasys.PCIDevice // RDMA device → its PCI function
	allPCI  []rdmasys.PCIDevice
	pciErr  error
	log     *ncclFacts // nil without --nccl-log
	netns   namespace  // this network namespace's interfaces (class/net); nil when unreadable
	// iwarp holds the iWARP devices and how each was told (node_type, or
	// in a capture without it what the driver writes): nccl.iwarp reports
	// them, and the RoCE GID checks pass their ports by.
	iwarp map[string]rdmasys.IWARPClue
	scope scope

	confSources map[string][]confSource // NCCL config files' settings
	confBad     []confLine              // lines NCCL misreads
	confRead    []string                // the config files NCCL reads

	eth *ethReadings // nil without Options.Ethernet
}

// loadHost reads the device inventory. Only an unusable sysfs root is an
// error; anything else becomes a finding of the check that needs it.
func loadHost(opts Options) (*host, error) {
	if st, err := os.Stat(opts.SysRoot); err != nil {
		return nil, fmt.Errorf("sysfs root: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("sysfs root %s: not a directory", opts.SysRoot)
	}
	h := &host{opts: opts, pci: map[string]rdmasys.PCIDevice{}, iwarp: map[string]rdmasys.IWARPClue{}}
	names, err := rdmasys.DeviceNames(opts.SysRoot)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		d, err := rdmasys.ReadDevice(opts.SysRoot, n)
		if err != nil {
			h.devErrs = append(h.devErrs, err)
			continue
		}
		h.devs = append(h.devs, d)
		if clue, ok := rdmasys.TellIWARP(opts.SysRoot, d); ok {
			h.iwarp[n] = clue
		}
		if dir, ok, err := rdmasys.PCIDeviceDirOf(opts.SysRoot, n); err == nil && ok {
			if p, err := rdmasys.ReadPCIDevice(dir); err == nil {
				h.pci[n] = p
			}
		}
	}
	h.allPCI, h.pciErr = rdmasys.ReadPCIDevices(opts.SysRoot)
	h.netns = readNamespace(opts.SysRoot)
	if err := h.computeScope(); err != nil {
		return nil, err
	}
	return h, nil
}

// hasDir reports whether the sysfs tree has a directory at all: a live
// sysfs always has module/ and, with ib_uverbs, class/infiniband_verbs; a
// capture may have left them out, and what it lacks cannot be judged.
func (h *host) hasDir(rel string) bool {
	st, err := os.Stat(h.sysPath(rel))
	return err == nil && st.IsDir()
}

// hasDevRoot reports whether the device-node root exists; a capture sent
// without dev/ cannot show whether /dev/infiniband was there.
func (h *host) hasDevRoot() bool {
	st, err := os.Stat(h.opts.DevRoot)
	return err == nil && st.IsDir()
}

// notCaptured is the value of a SKIP for input a captured tree lacks.
func notCaptured(what, shows string) string {
	return "not in this tree (" + what + " missing; a capture without it cannot show " + shows + ")"
}

// portRef pairs a port with its device.
type portRef struct {
	dev  *rdmasys.Device
	port rdmasys.Port
}

func (p portRef) name() string { return fmt.Sprintf("%s:%d", p.dev.Name, p.port.Number) }

// roce reports a RoCE port: Ethernet, and not an iWARP device's, whose
// ports are Ethernet too but carry no RoCE GIDs to pick (nccl.iwarp says
// what to do with those).
func (h *host) roce(p portRef) bool {
	_, iwarp := h.iwarp[p.dev.Name]
	return p.port.IsRoCE() && !iwarp
}

func (h *host) ports() []portRef {
	var out []portRef
	for i := range h.devs {
		for _, p := range h.devs[i].Ports {
			out = append(out, portRef{dev: &h.devs[i], port: p})
		}
	}
	return out
}

// portFile is the sysfs path of one attribute of a port.
func (h *host) portFile(p portRef, name string) string {
	return rdmasys.PortPath(h.opts.SysRoot, p.dev.Name, p.port.Number) + "/" + name
}

// deviceNames lists the readable devices.
func (h *host) deviceNames() []string {
	var names []string
	for _, d := range h.devs {
		names = append(names, d.Name)
	}
	return names
}

// env returns an NCCL variable from the job environment.
func (h *host) env(name string) (string, bool) {
	v, ok := h.opts.Env[name]
	return strings.TrimSpace(v), ok
}

// portNetdev is the netdev a RoCE port runs over, from its GID table.
func portNetdev(p rdmasys.Port) string {
	for _, g := range p.GIDs {
		if g.Netdev != "" {
			return g.Netdev
		}
	}
	return ""
}

func isActive(p rdmasys.Port) bool { return p.State == rdmasys.PortActive }

// activeDevices says which devices have an ACTIVE port.
func (h *host) activeDevices() map[string]bool {
	out := map[string]bool{}
	for _, p := range h.ports() {
		out[p.dev.Name] = out[p.dev.Name] || isActive(p.port)
	}
	return out
}
