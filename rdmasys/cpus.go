package rdmasys

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxCPUs bounds a CPU list: CPU numbers and the list's length. Linux
// configures at most 8192 CPUs; the bound keeps "0-2000000000" from
// allocating gigabytes.
const MaxCPUs = 1 << 16

// ParseCPUList parses the kernel's CPU list form, "0-3,8,10-11".
func ParseCPUList(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		if part == "" {
			continue
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("bad CPU list %q", s)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("bad CPU list %q", s)
			}
		}
		if b >= MaxCPUs {
			return nil, fmt.Errorf("CPU list %q: CPU %d beyond %d", s, b, MaxCPUs-1)
		}
		if len(out)+b-a+1 > MaxCPUs {
			return nil, fmt.Errorf("CPU list %q: more than %d CPUs", s, MaxCPUs)
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	return out, nil
}

// DeviceNUMANode is the NUMA node of an RDMA device's PCI function, -1 when
// sysfs does not say (software devices, single-node machines).
func DeviceNUMANode(sysRoot, dev string) int {
	n, err := strconv.Atoi(readTrim(filepath.Join(DevicePath(sysRoot, dev), "device", "numa_node")))
	if err != nil {
		return -1
	}
	return n
}

// NodeCPUs lists the CPUs of a NUMA node.
func NodeCPUs(sysRoot string, node int) ([]int, error) {
	b, err := os.ReadFile(filepath.Join(sysRoot, "devices", "system", "node", "node"+strconv.Itoa(node), "cpulist"))
	if err != nil {
		return nil, err
	}
	return ParseCPUList(string(b))
}

// OnlineNodes is the host's online NUMA nodes as the kernel lists them
// ("0-1"), and whether it lists them at all (kernels without NUMA do not).
func OnlineNodes(sysRoot string) (nodes []int, known bool) {
	b, err := os.ReadFile(filepath.Join(sysRoot, "devices", "system", "node", "online"))
	if err != nil {
		return nil, false
	}
	nodes, err = ParseCPUList(string(b))
	return nodes, err == nil
}
