package live

import (
	"path/filepath"
	"slices"

	"github.com/rdmabench/rdmabench/ethside"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// withHWCounters adds the RDMA port's hw_counters (the driver's own:
// mlx5's out_of_buffer, np_cnp_sent, rp_cnp_handled; rxe's
// retry_exceeded_err, rcvd_seq_err) to the netdev's ethtool -S counters,
// as the hw_counters paste does, for the same judgements. The PMA
// counters/ directory is doctor's RDMA counter check's, not read here.
// No RDMA device, or no hw_counters, leaves c as it is.
func withHWCounters(c *ethside.Counters, sys, dev, iface string, p *problems) *ethside.Counters {
	port, ok := 0, false
	if dev != "" {
		port, ok = rdmaPortOf(sys, dev, iface)
	} else {
		dev, port, ok = rdmaPortByGID(sys, iface)
	}
	if !ok {
		return c
	}
	vals, err := rdmasys.ReadCounters(sys, dev, port, "hw_counters")
	if err != nil {
		p.add("%v", err)
		return c
	}
	if len(vals) == 0 {
		return c
	}
	src := filepath.Join(rdmasys.PortPath(sys, dev, port), "hw_counters")
	if c == nil {
		c = &ethside.Counters{Source: src}
	} else {
		c.Source += "+" + src
	}
	names := make([]string, 0, len(vals))
	for n := range vals {
		names = append(names, n)
	}
	slices.Sort(names) // "hw:" prefixes land the same at every read
	for _, n := range names {
		c.AddHW(n, vals[n])
	}
	return c
}

// rdmaPortOf is the port of dev whose GIDs name iface, or dev's only
// port; a device of several ports none of which names it has none.
func rdmaPortOf(sys, dev, iface string) (int, bool) {
	ports, err := rdmasys.PortNumbers(sys, dev)
	if err != nil || len(ports) == 0 {
		return 0, false
	}
	if len(ports) == 1 {
		return ports[0], true
	}
	for _, n := range ports {
		gids, err := rdmasys.ReadGIDs(sys, dev, n)
		if err != nil {
			continue
		}
		if slices.ContainsFunc(gids, func(g rdmasys.GID) bool { return g.Netdev == iface }) {
			return n, true
		}
	}
	return 0, false
}

// rdmaPortByGID finds the device and port whose GIDs name iface: a
// software device (rxe on a virtio or veth netdev) has no
// device/infiniband link under the netdev. Iface.RDMADev stays what that
// link says, so doctor scopes such a port's findings as before.
func rdmaPortByGID(sys, iface string) (string, int, bool) {
	devs, err := rdmasys.DeviceNames(sys)
	if err != nil {
		return "", 0, false
	}
	for _, d := range devs {
		ports, err := rdmasys.PortNumbers(sys, d)
		if err != nil {
			continue
		}
		for _, n := range ports {
			gids, err := rdmasys.ReadGIDs(sys, d, n)
			if err == nil && slices.ContainsFunc(gids, func(g rdmasys.GID) bool { return g.Netdev == iface }) {
				return d, n, true
			}
		}
	}
	return "", 0, false
}
