package rdmasys

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// PCIDevicesDir lists every PCI function, relative to the sysfs root.
const PCIDevicesDir = "bus/pci/devices"

// PCIDevice is what sysfs says about one PCI function.
type PCIDevice struct {
	BDF      string `json:"bdf"`    // "0000:3b:00.0"
	Dir      string `json:"-"`      // the sysfs directory it was read from
	Class    string `json:"class"`  // "0x020700", "0x030200", ...
	Vendor   string `json:"vendor"` // "0x15b3", "0x10de", ...
	Device   string `json:"device"`
	NUMANode int    `json:"numa_node"` // -1 when the platform does not say

	CurLinkSpeed string `json:"current_link_speed,omitempty"` // "16.0 GT/s PCIe"
	CurLinkWidth int    `json:"current_link_width,omitempty"`
	MaxLinkSpeed string `json:"max_link_speed,omitempty"`
	MaxLinkWidth int    `json:"max_link_width,omitempty"`
}

// IsNVIDIAGPU reports whether the function is an NVIDIA display or 3D
// controller (class 0x0300xx or 0x0302xx, vendor 0x10de).
func (p PCIDevice) IsNVIDIAGPU() bool {
	return p.Vendor == "0x10de" && (strings.HasPrefix(p.Class, "0x0300") || strings.HasPrefix(p.Class, "0x0302"))
}

// HasLinkInfo reports whether sysfs exposed the PCIe link attributes.
func (p PCIDevice) HasLinkInfo() bool {
	// Functions without a PCIe capability print "Unknown" or omit the files.
	return ParseLinkSpeed(p.CurLinkSpeed) > 0 && ParseLinkSpeed(p.MaxLinkSpeed) > 0 && p.CurLinkWidth > 0 && p.MaxLinkWidth > 0
}

// ParseLinkSpeed turns "16.0 GT/s PCIe" (or the older "8 GT/s") into GT/s;
// 0 when unreadable (e.g. "Unknown").
func ParseLinkSpeed(text string) float64 { return leadingNumber(text) }

// PCIDeviceDirOf resolves the PCI function behind an RDMA device through its
// "device" link. ok is false for software devices (rxe, siw) that have none.
func PCIDeviceDirOf(sysRoot, dev string) (dir string, ok bool, err error) {
	link := filepath.Join(DevicePath(sysRoot, dev), "device")
	dir, err = filepath.EvalSymlinks(link)
	if errors.Is(err, os.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("resolve PCI device of %s: %w", dev, err)
	}
	// Software devices may link to a non-PCI parent; a PCI function always
	// has a class and a vendor.
	if _, err := os.Stat(filepath.Join(dir, "vendor")); err != nil {
		return "", false, nil
	}
	return dir, true, nil
}

// ReadPCIDevice reads a PCI function's identity, NUMA node and link state
// from its sysfs directory. Dir is the resolved directory in the device tree
// (bus/pci/devices entries are links into devices/pci*/...), so that the
// bridges above it can be found.
func ReadPCIDevice(dir string) (PCIDevice, error) {
	if _, err := os.Stat(dir); err != nil {
		return PCIDevice{}, fmt.Errorf("read PCI device: %w", err)
	}
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	p := PCIDevice{
		BDF:          filepath.Base(dir),
		Dir:          dir,
		Class:        readTrim(filepath.Join(dir, "class")),
		Vendor:       readTrim(filepath.Join(dir, "vendor")),
		Device:       readTrim(filepath.Join(dir, "device")),
		NUMANode:     -1,
		CurLinkSpeed: readTrim(filepath.Join(dir, "current_link_speed")),
		MaxLinkSpeed: readTrim(filepath.Join(dir, "max_link_speed")),
	}
	if n, err := strconv.Atoi(readTrim(filepath.Join(dir, "numa_node"))); err == nil {
		p.NUMANode = n
	}
	p.CurLinkWidth, _ = strconv.Atoi(readTrim(filepath.Join(dir, "current_link_width")))
	p.MaxLinkWidth, _ = strconv.Atoi(readTrim(filepath.Join(dir, "max_link_width")))
	return p, nil
}

// ReadPCIDevices reads every function under bus/pci/devices, sorted by
// address. A missing directory (no PCI, or a trimmed fixture) yields none.
func ReadPCIDevices(sysRoot string) ([]PCIDevice, error) {
	base := filepath.Join(sysRoot, PCIDevicesDir)
	entries, err := readDirIfAny(base)
	if err != nil {
		return nil, fmt.Errorf("list PCI devices: %w", err)
	}
	var devs []PCIDevice
	for _, e := range entries {
		d, err := ReadPCIDevice(filepath.Join(base, e.Name()))
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].BDF < devs[j].BDF })
	return devs, nil
}

// MSIIRQs lists the interrupt numbers a PCI function has allocated
// (its msi_irqs directory), sorted; none when MSI is not in use.
func MSIIRQs(pciDir string) ([]int, error) {
	entries, err := readDirIfAny(filepath.Join(pciDir, "msi_irqs"))
	if err != nil {
		return nil, fmt.Errorf("list MSI IRQs of %s: %w", filepath.Base(pciDir), err)
	}
	return numbered(entries), nil
}

// reBDF matches a PCI address, "0000:3b:00.0".
var reBDF = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// IsBDF reports whether s is a PCI address.
func IsBDF(s string) bool { return reBDF.MatchString(s) }

// UpstreamDir returns the directory of the bridge (root port or switch
// downstream port) a function sits behind: its parent in the device tree.
// ok is false at a root bus or in a flat tree without the hierarchy.
func UpstreamDir(pciDir string) (string, bool) {
	parent := filepath.Dir(pciDir)
	if !IsBDF(filepath.Base(parent)) {
		return "", false
	}
	if _, err := os.Stat(filepath.Join(parent, "vendor")); err != nil {
		return "", false
	}
	return parent, true
}

// PathBDFs lists the PCI addresses from the root bus down to the function
// itself, from its resolved sysfs path (devices/pci0000:00/0000:00:01.0/...).
func PathBDFs(pciDir string) []string {
	var out []string
	for _, part := range strings.Split(filepath.ToSlash(pciDir), "/") {
		if IsBDF(part) {
			out = append(out, part)
		}
	}
	return out
}

// PhysFnDir returns the physical function of an SR-IOV virtual function
// (its physfn link); ok is false for a physical function.
func PhysFnDir(pciDir string) (string, bool) {
	dir, err := filepath.EvalSymlinks(filepath.Join(pciDir, "physfn"))
	if err != nil {
		return "", false
	}
	return dir, true
}

// PCIPathType is NCCL's name for the PCIe path between two functions, from
// their places in the device tree: PIX through at most one PCIe switch,
// PXB through several switches without the host bridge, PHB through the
// CPU's host bridge, SYS across the inter-socket link (NUMA nodes differ).
// "" when the tree has no hierarchy to tell.
func PCIPathType(a, b PCIDevice) string {
	ra, rb := RootComplex(a.Dir), RootComplex(b.Dir)
	if ra == "" || rb == "" {
		return ""
	}
	if ra != rb {
		if a.NUMANode >= 0 && b.NUMANode >= 0 && a.NUMANode != b.NUMANode {
			return "SYS"
		}
		return "PHB"
	}
	pa, pb := PathBDFs(a.Dir), PathBDFs(b.Dir)
	c := 0
	for c < len(pa)-1 && c < len(pb)-1 && pa[c] == pb[c] {
		c++
	}
	if c <= 1 { // only the host bridge, or one root port, in common
		return "PHB"
	}
	if len(pa)-1-c <= 1 && len(pb)-1-c <= 1 {
		return "PIX"
	}
	return "PXB"
}

// reRootComplex matches a host bridge's directory, "pci0000:3a".
var reRootComplex = regexp.MustCompile(`^pci[0-9a-f]{4}:[0-9a-f]{2}$`)

// RootComplex is the host bridge a function's directory is under,
// "pci0000:3a"; "" in a flat tree.
func RootComplex(dir string) string {
	for _, part := range strings.Split(filepath.ToSlash(dir), "/") {
		if reRootComplex.MatchString(part) {
			return part
		}
	}
	return ""
}
