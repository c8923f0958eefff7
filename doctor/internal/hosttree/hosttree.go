// Package hosttree writes host trees (sysfs, procfs, /dev) in the kernel's
// real layout for doctor's and fleet's tests: PCI functions nested under
// their root ports and switch ports in sys/devices, bus/pci/devices and
// class/{infiniband,infiniband_verbs,net} as links into that tree, RDMA
// devices and netdevs under their PCI function, virtual netdevs (bonds,
// VLANs) under devices/virtual/net. It is what capture.sh copies from a
// live host, built from a description instead.
package hosttree

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// Tree is a host under construction: relative path → file content, or a
// symlink target when the path is in links.
type Tree struct {
	files map[string]string
	links map[string]string // path → absolute (tree-relative) target
	bins  map[string]bool   // files written as they are, without a newline
}

// New returns a tuned, healthy host with no devices: memlock unlimited,
// network sysctls at the tuning guides' values, irqbalance running, the
// RDMA modules loaded, its hostname and kernel release in procfs.
func New(hostname string) *Tree {
	t := &Tree{files: map[string]string{}, links: map[string]string{}, bins: map[string]bool{}}
	t.File("proc/sys/kernel/hostname", hostname)
	t.File("proc/sys/kernel/osrelease", "5.15.0-105-generic")
	t.File("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\n"+
		"Max locked memory         unlimited            unlimited            bytes")
	t.File("proc/self/status", "Name:\trdmabench\nCapEff:\t0000000000000000")
	for k, v := range map[string]string{
		"net/core/rmem_max": "268435456", "net/core/wmem_max": "268435456",
		"net/ipv4/tcp_rmem": "4096\t87380\t268435456", "net/ipv4/tcp_wmem": "4096\t65536\t268435456",
		"net/core/netdev_max_backlog": "250000", "net/ipv4/tcp_congestion_control": "bbr",
		"net/ipv4/tcp_mtu_probing": "1",
	} {
		t.File("proc/sys/"+k, v)
	}
	t.File("proc/1187/comm", "irqbalance")
	t.File("proc/self/mounts", "sysfs /sys sysfs rw,nosuid,nodev,noexec,relatime 0 0\n"+
		"tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0")
	for _, m := range []string{"ib_core", "ib_uverbs", "rdma_ucm", "mlx5_core", "mlx5_ib"} {
		t.File("sys/module/"+m+"/refcnt", "1")
	}
	t.File("dev/infiniband/rdma_cm", "")
	t.Netdev(Netdev{Name: "lo", MTU: 65536, Oper: "unknown"})
	return t
}

// File sets a file's content. A path through a link (class/infiniband/
// mlx5_0/fw_ver) writes where the link points, as on a live host.
func (t *Tree) File(rel, content string) {
	rel = t.through(rel)
	delete(t.links, rel)
	delete(t.bins, rel)
	t.files[rel] = content
}

// Binary sets a binary file's content (PCI config space).
func (t *Tree) Binary(rel string, b []byte) {
	t.File(rel, string(b))
	t.bins[t.through(rel)] = true
}

// Link makes rel a symlink to target (both relative to the tree's root);
// Write turns the target into a relative one, as sysfs has them.
func (t *Tree) Link(rel, target string) {
	delete(t.files, rel)
	t.links[rel] = target
}

// Remove drops a file, link or whole directory.
func (t *Tree) Remove(rel string) {
	rel = t.through(rel)
	for p := range t.bins {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			delete(t.bins, p)
		}
	}
	for _, m := range []map[string]string{t.files, t.links} {
		for p := range m {
			if p == rel || strings.HasPrefix(p, rel+"/") {
				delete(m, p)
			}
		}
	}
}

// Has reports whether a file or link exists at rel.
func (t *Tree) Has(rel string) bool {
	_, f := t.files[rel]
	_, l := t.links[rel]
	return f || l
}

// Clone copies the tree, so a broken twin can be made from a healthy host.
func (t *Tree) Clone() *Tree {
	c := &Tree{files: map[string]string{}, links: map[string]string{}, bins: map[string]bool{}}
	for k, v := range t.files {
		c.files[k] = v
	}
	for k := range t.bins {
		c.bins[k] = true
	}
	for k, v := range t.links {
		c.links[k] = v
	}
	return c
}

// Write materializes the tree under dir (which must exist).
func (t *Tree) Write(dir string) error {
	paths := make([]string, 0, len(t.files))
	for p := range t.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		c := t.files[p]
		if c != "" && !t.bins[p] {
			c += "\n"
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	for p, target := range t.links {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		rel, err := filepath.Rel(path.Dir(p), target)
		if err != nil {
			return err
		}
		if err := os.Symlink(rel, full); err != nil {
			return fmt.Errorf("link %s: %w", p, err)
		}
	}
	return nil
}

// PCIe link speeds as the kernel prints them.
const (
	Gen3 = "8.0 GT/s PCIe"
	Gen4 = "16.0 GT/s PCIe"
	Gen5 = "32.0 GT/s PCIe"
)

// PCI is one function. Path is its place in the device tree below
// sys/devices, e.g. "pci0000:3a/0000:3a:00.0/0000:3b:00.0".
type PCI struct {
	Path               string
	Class, Vendor, Dev string
	NUMA               int
	CurSpeed, MaxSpeed string
	CurWidth, MaxWidth int
}

// PCIDir is the tree-relative directory of a function.
func PCIDir(p string) string { return "sys/devices/" + p }

// PCI adds a function and its bus/pci/devices link.
func (t *Tree) PCI(p PCI) {
	dir := PCIDir(p.Path)
	t.File(dir+"/class", p.Class)
	t.File(dir+"/vendor", p.Vendor)
	t.File(dir+"/device", p.Dev)
	t.File(dir+"/numa_node", fmt.Sprint(p.NUMA))
	if p.CurSpeed != "" {
		t.File(dir+"/current_link_speed", p.CurSpeed)
		t.File(dir+"/current_link_width", fmt.Sprint(p.CurWidth))
		t.File(dir+"/max_link_speed", p.MaxSpeed)
		t.File(dir+"/max_link_width", fmt.Sprint(p.MaxWidth))
	}
	t.Link("sys/bus/pci/devices/"+path.Base(p.Path), dir)
	if p.Vendor == "0x15b3" || p.Vendor == "0x10de" {
		t.File(dir+"/aer_dev_correctable", "RxErr 0\nBadTLP 0\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 0")
		t.File(dir+"/aer_dev_nonfatal", "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nTOTAL_ERR_NONFATAL 0")
		t.File(dir+"/aer_dev_fatal", "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nTOTAL_ERR_FATAL 0")
	}
	switch p.Vendor {
	case "0x15b3":
		t.Link(dir+"/driver", "sys/bus/pci/drivers/mlx5_core")
		t.MaxReadReq(p.Path, 4096) // as mlnx_tune sets it
	case "0x10de":
		t.Link(dir+"/driver", "sys/bus/pci/drivers/nvidia")
	}
}

// Bridge adds a PCIe bridge (root port, switch port) trained at its
// maximum, with ACS present and off (what GPU servers' BIOSes set).
func (t *Tree) Bridge(p string, speed string, width, numa int) {
	t.PCI(PCI{Path: p, Class: "0x060400", Vendor: "0x8086", Dev: "0x347a", NUMA: numa,
		CurSpeed: speed, MaxSpeed: speed, CurWidth: width, MaxWidth: width})
	off := uint16(0)
	t.Binary(PCIDir(p)+"/config", rdmasys.BuildPCIConfig(256, &off))
}

// ACS sets the ACS control register of a bridge.
func (t *Tree) ACS(p string, ctrl uint16) {
	t.Binary(PCIDir(p)+"/config", rdmasys.BuildPCIConfig(256, &ctrl))
}

// MaxReadReq sets a function's PCIe Max_Read_Request_Size.
func (t *Tree) MaxReadReq(p string, bytes int) {
	t.Binary(PCIDir(p)+"/config", rdmasys.BuildPCIConfig(bytes, nil))
}

// GPU adds an NVIDIA 3D controller trained at its maximum.
func (t *Tree) GPU(p string, speed string, numa int) {
	t.PCI(PCI{Path: p, Class: "0x030200", Vendor: "0x10de", Dev: "0x2330", NUMA: numa,
		CurSpeed: speed, MaxSpeed: speed, CurWidth: 16, MaxWidth: 16})
}

// Dev is an RDMA device. PCIPath is its parent's Path below sys/devices:
// a PCI function, or an auxiliary device below one ("" for a software
// device); Uverbs is its uverbs number, -1 for none bound.
type Dev struct {
	Name, PCIPath        string
	FW, HCAType, BoardID string
	NodeType             string // "" is "1: CA"; iWARP devices write "4: RNIC"
	Uverbs               int
	NoNode               bool // the uverbs device exists but /dev has no node for it (a container)
	Parent               string
}

// DevDir is the tree-relative directory of an RDMA device (through its class link).
func DevDir(name string) string { return "sys/class/infiniband/" + name }

// RDMADev adds a device: class/infiniband/<name> links into the PCI
// function's infiniband/ directory, with a "device" link back up.
func (t *Tree) RDMADev(d Dev) {
	real := "sys/devices/virtual/infiniband/" + d.Name
	if d.PCIPath != "" {
		real = PCIDir(d.PCIPath) + "/infiniband/" + d.Name
		t.Link(real+"/device", PCIDir(d.PCIPath))
	}
	t.Link(DevDir(d.Name), real)
	t.File(real+"/node_type", orDefault(d.NodeType, "1: CA"))
	t.File(real+"/node_guid", "b83f:d203:00a1:0000")
	if d.FW != "" {
		t.File(real+"/fw_ver", d.FW)
	}
	if d.HCAType != "" {
		t.File(real+"/hca_type", d.HCAType)
	}
	if d.BoardID != "" {
		t.File(real+"/board_id", d.BoardID)
	}
	if d.Parent != "" {
		t.File(real+"/parent", d.Parent)
	}
	if d.Uverbs >= 0 {
		u := fmt.Sprintf("uverbs%d", d.Uverbs)
		ureal := "sys/devices/virtual/infiniband_verbs/" + u
		if d.PCIPath != "" {
			ureal = PCIDir(d.PCIPath) + "/infiniband_verbs/" + u
		}
		t.File(ureal+"/ibdev", d.Name)
		t.File(ureal+"/abi_version", "1")
		t.Link("sys/class/infiniband_verbs/"+u, ureal)
		if !d.NoNode {
			t.File("dev/infiniband/"+u, "")
		}
	}
}

// RemoveRDMADev removes a device as if its driver (mlx5_ib) were not
// loaded: its directory, class link, uverbs device and node.
func (t *Tree) RemoveRDMADev(name string) {
	for u, target := range t.links {
		if strings.HasPrefix(u, "sys/class/infiniband_verbs/") && t.files[target+"/ibdev"] == name {
			t.Remove(target)
			t.Remove(u)
			t.Remove("dev/infiniband/" + path.Base(u))
		}
	}
	t.Remove(t.realDir(DevDir(name)))
	t.Remove(DevDir(name))
}

// realDir resolves the tree's links in rel (for writing under a class link).
func (t *Tree) realDir(rel string) string {
	parts := strings.Split(rel, "/")
	for i := len(parts); i > 0; i-- {
		if target, ok := t.links[strings.Join(parts[:i], "/")]; ok {
			return t.realDir(path.Join(append([]string{target}, parts[i:]...)...))
		}
	}
	return rel
}

// through resolves the links in a path's directory part.
func (t *Tree) through(rel string) string {
	return path.Join(t.realDir(path.Dir(rel)), path.Base(rel))
}

// Port is one port of an RDMA device.
type Port struct {
	Dev                string
	N                  int
	State, Phys        string // "4: ACTIVE", "5: LinkUp"
	Rate, LinkLayer    string // "400 Gb/sec (4X NDR)", "InfiniBand"
	LID, SMLID         string // InfiniBand only
	SymbolErrs, Downed int    // PMA counters
}

// Active is the state pair of a port that carries traffic.
const (
	Active = "4: ACTIVE"
	LinkUp = "5: LinkUp"
	Down   = "1: DOWN"
	Poll   = "2: Polling"
)

// PortDir is the tree-relative directory of a port.
func (t *Tree) PortDir(dev string, n int) string {
	return t.realDir(fmt.Sprintf("%s/ports/%d", DevDir(dev), n))
}

// Port adds a port with zeroed error counters.
func (t *Tree) Port(p Port) {
	d := t.PortDir(p.Dev, p.N)
	t.File(d+"/state", p.State)
	t.File(d+"/phys_state", p.Phys)
	t.File(d+"/rate", p.Rate)
	t.File(d+"/link_layer", p.LinkLayer)
	if p.LinkLayer == string(rdmasys.InfiniBand) {
		t.File(d+"/lid", orDefault(p.LID, "0x12"))
		t.File(d+"/sm_lid", orDefault(p.SMLID, "0x1"))
		t.File(d+"/gids/0", "fe80:0000:0000:0000:b83f:d203:00a1:"+fmt.Sprintf("%04x", p.N))
	}
	for _, c := range []string{"symbol_error", "link_downed", "port_rcv_errors", "link_error_recovery", "port_xmit_discards"} {
		t.File(d+"/counters/"+c, "0")
	}
	t.File(d+"/counters/symbol_error", fmt.Sprint(p.SymbolErrs))
	t.File(d+"/counters/link_downed", fmt.Sprint(p.Downed))
	t.File(d+"/counters/port_xmit_data", "123456789")
	for _, c := range []string{"out_of_sequence", "duplicate_request", "local_ack_timeout_err", "rnr_nak_retry_err"} {
		t.File(d+"/hw_counters/"+c, "0")
	}
}

// GID adds a GID table entry to a port. typ is the kernel's type text
// ("RoCE v2", "IB/RoCE v1").
func (t *Tree) GID(dev string, port, idx int, gid, typ, ndev string) {
	d := t.PortDir(dev, port)
	t.File(fmt.Sprintf("%s/gids/%d", d, idx), gid)
	t.File(fmt.Sprintf("%s/gid_attrs/types/%d", d, idx), typ)
	t.File(fmt.Sprintf("%s/gid_attrs/ndevs/%d", d, idx), ndev)
}

// RoCEGIDs adds the table the kernel builds for a netdev with an IPv4
// address: link-local v1 and v2 at base, base+1, the IPv4 ones at base+2,
// base+3 (the v2 one is what NCCL_IB_GID_INDEX should name).
func (t *Tree) RoCEGIDs(dev string, port, base int, ndev, ipv4Hex string) {
	ll := "fe80:0000:0000:0000:0e42:a1ff:fe9c:" + fmt.Sprintf("%04x", base)
	t.GID(dev, port, base, ll, "IB/RoCE v1", ndev)
	t.GID(dev, port, base+1, ll, "RoCE v2", ndev)
	if ipv4Hex != "" {
		v4 := "0000:0000:0000:0000:0000:ffff:" + ipv4Hex
		t.GID(dev, port, base+2, v4, "IB/RoCE v1", ndev)
		t.GID(dev, port, base+3, v4, "RoCE v2", ndev)
	}
}

// Netdev is a network interface; PCIPath "" makes it virtual.
type Netdev struct {
	Name, PCIPath string
	MTU           int
	Oper          string // "up", "down", "unknown"
	Slaves        []string
}

// Netdev adds an interface and its class/net link.
func (t *Tree) Netdev(n Netdev) {
	real := "sys/devices/virtual/net/" + n.Name
	if n.PCIPath != "" {
		real = PCIDir(n.PCIPath) + "/net/" + n.Name
	}
	t.File(real+"/mtu", fmt.Sprint(n.MTU))
	t.File(real+"/operstate", n.Oper)
	flags := "0x1003"
	if n.Oper == "down" {
		flags = "0x1002"
	}
	t.File(real+"/flags", flags)
	if len(n.Slaves) > 0 {
		t.File(real+"/bonding/slaves", strings.Join(n.Slaves, " "))
	}
	t.Link("sys/class/net/"+n.Name, real)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
