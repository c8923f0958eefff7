package rdmasys

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// NetClassDir is where the kernel lists network interfaces, relative to the
// sysfs root.
const NetClassDir = "class/net"

// Netdev is what sysfs says about one network interface.
type Netdev struct {
	Name      string `json:"name"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operstate"` // "up", "down", "unknown", ...
	Flags     uint64 `json:"flags"`     // IFF_* bits
}

// iffUp is IFF_UP: the interface is administratively up.
const iffUp = 0x1

// IsUp reports whether the interface carries traffic. Virtual interfaces
// (loopback, some tunnels) report operstate "unknown" while working, so for
// them the administrative IFF_UP flag decides.
func (n Netdev) IsUp() bool {
	switch n.OperState {
	case "up":
		return true
	case "unknown", "":
		return n.Flags&iffUp != 0
	}
	return false
}

// NetdevPath is the sysfs directory of a network interface.
func NetdevPath(sysRoot, name string) string { return filepath.Join(sysRoot, NetClassDir, name) }

// ReadNetdev reads an interface's MTU, operstate and flags.
func ReadNetdev(sysRoot, name string) (Netdev, error) {
	dir := NetdevPath(sysRoot, name)
	if _, err := os.Stat(dir); err != nil {
		return Netdev{}, fmt.Errorf("network interface %q: %w", name, err)
	}
	n := Netdev{Name: name, OperState: readTrim(filepath.Join(dir, "operstate"))}
	n.MTU, _ = strconv.Atoi(readTrim(filepath.Join(dir, "mtu")))
	n.Flags, _ = strconv.ParseUint(strings.TrimPrefix(readTrim(filepath.Join(dir, "flags")), "0x"), 16, 64)
	return n, nil
}

// NetdevNames lists the interfaces under class/net, sorted; none when the
// directory is missing.
func NetdevNames(sysRoot string) ([]string, error) {
	entries, err := readDirIfAny(filepath.Join(sysRoot, NetClassDir))
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	var names []string
	for _, e := range entries {
		// class/net also holds regular files (bonding_masters); an
		// interface is a link (live) or a directory (a capture).
		if e.Type().IsRegular() {
			continue
		}
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// UverbsClassDir lists the verbs character devices, relative to the sysfs root.
const UverbsClassDir = "class/infiniband_verbs"

// UverbsDevices maps RDMA device names to their uverbs character device
// names ("rxe0" → "uverbs0") from class/infiniband_verbs/*/ibdev. A missing
// class directory (ib_uverbs not loaded) yields an empty map.
func UverbsDevices(sysRoot string) (map[string]string, error) {
	out := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(sysRoot, UverbsClassDir))
	if os.IsNotExist(err) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list uverbs devices: %w", err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "uverbs") {
			continue
		}
		if ib := readTrim(filepath.Join(sysRoot, UverbsClassDir, e.Name(), "ibdev")); ib != "" {
			out[ib] = e.Name()
		}
	}
	return out, nil
}

// ModuleLoaded reports whether a kernel module is present under
// sysfs/module. Built-in modules appear there too when they have parameters,
// so absence is strong evidence only together with other signs.
func ModuleLoaded(sysRoot, name string) bool {
	_, err := os.Stat(filepath.Join(sysRoot, "module", name))
	return err == nil
}
