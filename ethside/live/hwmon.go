package live

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

const maxHwmonSensors = 64

// hcaTemp reads the NIC's hwmon (mlx5 registers one from kernel 6.11):
// /sys/class/net/IF/device/hwmon/hwmon*/temp*_input in m°C, with _crit,
// _max and _label beside it. The sensor labelled "asic" is the HCA's;
// without one, the lowest-numbered.
func hcaTemp(sys, iface string, p *problems) *ethside.Sensor {
	glob := netPath(sys, iface, "device", "hwmon", "hwmon*", "temp*_input")
	inputs, _ := filepath.Glob(glob) // the only error is a bad pattern
	if len(inputs) == 0 {
		return nil
	}
	sort.Strings(inputs)
	if len(inputs) > maxHwmonSensors {
		inputs = inputs[:maxHwmonSensors]
	}
	pick := inputs[0]
	for _, in := range inputs {
		label, _ := readSmall(strings.TrimSuffix(in, "_input") + "_label")
		if strings.Contains(strings.ToLower(label), "asic") {
			pick = in
			break
		}
	}
	c, err := milli(pick)
	if err != nil {
		p.add("read %s: %v", pick, err)
		return nil
	}
	base := strings.TrimSuffix(pick, "_input")
	s := &ethside.Sensor{Source: pick, C: *c}
	s.Label, _ = readSmall(base + "_label")
	s.CritC, _ = milli(base + "_crit")
	s.MaxC, _ = milli(base + "_max")
	return s
}

// milli reads a hwmon value in thousandths.
func milli(path string) (*float64, error) {
	s, err := readSmall(path)
	if err != nil {
		return nil, err
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, err
	}
	v := float64(n) / 1000
	return &v, nil
}

// cores counts the host's online CPUs and those on the NIC's NUMA node
// (device/numa_node, then node/nodeN/cpulist); 0 where unknown.
func cores(sys, iface string, p *problems) (host, onNode int) {
	cpus, err := readSmall(filepath.Join(sys, "devices", "system", "cpu", "online"))
	if err == nil {
		host = countCPUList(cpus)
	}
	node, err := readSmall(netPath(sys, iface, "device", "numa_node"))
	if err != nil || strings.HasPrefix(node, "-") {
		return host, 0
	}
	n, err := strconv.Atoi(node)
	if err != nil {
		p.add("read %s: %v", netPath(sys, iface, "device", "numa_node"), err)
		return host, 0
	}
	list, err := readSmall(filepath.Join(sys, "devices", "system", "node", "node"+strconv.Itoa(n), "cpulist"))
	if err == nil {
		onNode = countCPUList(list)
	}
	return host, onNode
}

// countCPUList counts a kernel CPU list ("0-3,8,10-11"); 0 when it does
// not parse.
func countCPUList(s string) int {
	total := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		total += b - a + 1
	}
	return total
}

// rdmaDevOf is the RDMA device on iface's PCI function
// (device/infiniband/*), "" when none.
func rdmaDevOf(sys, iface string) string {
	ents, err := os.ReadDir(netPath(sys, iface, "device", "infiniband"))
	if err != nil || len(ents) == 0 {
		return ""
	}
	return ents[0].Name()
}
