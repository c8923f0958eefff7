package live

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// NetdevsOf gives the netdev(s) of RDMA device rdmaDev's port: the names
// in /sys/class/infiniband/DEV/ports/N/gid_attrs/ndevs/* (one per GID
// entry; rxe and mlx5 fill them), else the PCI function's
// DEV/device/net/*. sysRoot "" means /sys.
func NetdevsOf(sysRoot, rdmaDev string, port int) ([]string, error) {
	if sysRoot == "" {
		sysRoot = "/sys"
	}
	dev := filepath.Join(sysRoot, "class", "infiniband", rdmaDev)
	if _, err := os.Stat(dev); err != nil {
		return nil, fmt.Errorf("RDMA device %s: %w", rdmaDev, err)
	}
	names := map[string]bool{}
	ndevs := filepath.Join(dev, "ports", strconv.Itoa(port), "gid_attrs", "ndevs")
	ents, _ := os.ReadDir(ndevs) // absent on IB ports; then device/net
	for i, e := range ents {
		if i >= 1024 {
			break
		}
		if name, err := readSmall(filepath.Join(ndevs, e.Name())); err == nil && name != "" {
			names[name] = true
		}
	}
	if len(names) == 0 {
		nets, _ := os.ReadDir(filepath.Join(dev, "device", "net"))
		for _, e := range nets {
			names[e.Name()] = true
		}
	}
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}
