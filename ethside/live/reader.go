// Package live reads the Ethernet side of RoCE ports from the kernel's own
// interfaces: ethtool netlink (link modes, FEC) through
// github.com/mdlayher/ethtool, the SIOCETHTOOL ioctls the library does not
// cover (rings, coalescing, channels, pause, statistics, module EEPROM),
// rtnetlink DCB (IEEE PFC and the APP table), and sysfs (mlx5's ECN
// switches, hwmon temperatures, CPU counts, the RDMA port's hw_counters).
//
// A part the device does not answer (EOPNOTSUPP, ENODEV, no file) stays
// nil, which judgements report as SKIP; a real failure becomes one line in
// Iface.Problems naming the call and the errno. Only a failure to open
// any kernel interface at all fails the whole read.
package live

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/rdmabench/rdmabench/ethside"
)

// Reader reads the named netdevs afresh at each Read.
type Reader struct {
	SysRoot string   // "" means /sys; tests point it at a temporary tree
	Ifaces  []string // the netdevs to read
}

var _ ethside.Reader = Reader{}

func (r Reader) sys() string {
	if r.SysRoot == "" {
		return "/sys"
	}
	return r.SysRoot
}

// Read gives one reading of every interface in r.Ifaces, in that order.
func (r Reader) Read() ([]ethside.Iface, error) {
	k, err := openKernel()
	if err != nil {
		return nil, err
	}
	defer k.close()
	out := make([]ethside.Iface, 0, len(r.Ifaces))
	for _, name := range r.Ifaces {
		out = append(out, r.readOne(k, name))
	}
	return out, nil
}

// readOne fills one Iface; every part is independent of the others.
func (r Reader) readOne(k *kernel, name string) ethside.Iface {
	ifc := ethside.Iface{Name: name, RDMADev: rdmaDevOf(r.sys(), name)}
	p := &problems{}
	if _, err := net.InterfaceByName(name); err != nil {
		ifc.Problems = []string{fmt.Sprintf("netdev %s: %v", name, err)}
		return ifc
	}
	ifc.Link = k.link(name, p)
	ifc.FEC = k.fec(name, p)
	ifc.Ring = k.ring(name, p)
	ifc.Coalesce = k.coalesce(name, p)
	ifc.Channels = k.channels(name, p)
	if ifc.Channels != nil {
		ifc.Channels.Cores, ifc.Channels.CoresOnNICNode = cores(r.sys(), name, p)
	}
	ifc.Pause = k.pause(name, p)
	ifc.Counters = withHWCounters(k.stats(name, p), r.sys(), ifc.RDMADev, name, p)
	ifc.Module = k.module(name, p)
	ifc.DCB = k.dcb(name, p)
	ifc.DCB = withSysfsQoS(ifc.DCB, r.sys(), name, p)
	ifc.HCATemp = hcaTemp(r.sys(), name, p)
	ifc.Problems = p.lines
	return ifc
}

// problems collects the one-line failures of one interface's reading.
type problems struct{ lines []string }

func (p *problems) add(format string, args ...any) {
	p.lines = append(p.lines, fmt.Sprintf(format, args...))
}

// netPath is /sys/class/net/IF/REL under the reader's root.
func netPath(sys, iface string, rel ...string) string {
	return filepath.Join(append([]string{sys, "class", "net", iface}, rel...)...)
}
