// Package rdmasys reads the RDMA device tree the kernel exports under
// /sys/class/infiniband: ports, rates, GID tables with their RoCE types and
// netdevs, and counters. It is plain Go over files, so every reader takes a
// root directory and is tested on fixture trees in testdata/.
package rdmasys

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ClassDir is where the kernel lists RDMA devices, relative to the sysfs root.
const ClassDir = "class/infiniband"

// GIDType is the kind of a GID table entry.
type GIDType string

const (
	GIDTypeIB     GIDType = "IB"
	GIDTypeRoCEv1 GIDType = "RoCE v1"
	GIDTypeRoCEv2 GIDType = "RoCE v2"
)

// GID is one populated entry of a port's GID table.
type GID struct {
	Index  int     `json:"index"`
	Type   GIDType `json:"type"`
	Addr   net.IP  `json:"address"` // 16 bytes; an IPv4-mapped address for RoCE over IPv4
	Netdev string  `json:"netdev,omitempty"`
}

// IsIPv4 reports whether the GID carries an IPv4-mapped address (::ffff:a.b.c.d).
func (g GID) IsIPv4() bool { return g.Addr.To4() != nil }

// IsLinkLocal reports whether the GID is an IPv6 link-local address (fe80::/10).
func (g GID) IsLinkLocal() bool { return g.Addr.To4() == nil && g.Addr.IsLinkLocalUnicast() }

// AddrString prints IPv4-mapped GIDs as ::ffff:a.b.c.d, like show_gids.
func (g GID) AddrString() string {
	if v4 := g.Addr.To4(); v4 != nil {
		return "::ffff:" + v4.String()
	}
	return g.Addr.String()
}

// Port is one port of a device: rdmabench's one port model. ReadPort fills
// it from sysfs and verbs.Context.QueryPort from ibv_query_port; the
// inventory, doctor and the mesh hold it rather than copies of its fields.
// A field that only one of the two sources knows says so ("live only":
// ibv_query_port; "sysfs only"); the other leaves it zero.
//
// The JSON names and their order are a port's in `rdmabench devices --json`
// (inventory.Port embeds Port, and the GID table goes last there); a field
// that document does not carry is "-".
type Port struct {
	Device    string    `json:"-"`
	Number    int       `json:"port"`
	State     PortState `json:"state"`           // ACTIVE, DOWN, ...
	PhysState string    `json:"phys_state"`      // "LinkUp", "Disabled", ... as read; Phys() types it
	RateGbps  float64   `json:"rate_gbps"`       // Width × per-lane speed
	Width     int       `json:"width"`           // lanes: 1, 2, 4, 8, 12; 0 when unknown
	SpeedName string    `json:"speed,omitempty"` // per-lane speed: "HDR", "EDR", ...
	// ActiveMTU and MaxMTU are the port's RDMA MTUs in bytes: live only,
	// sysfs holds neither.
	ActiveMTU int       `json:"active_mtu"`
	MaxMTU    int       `json:"max_mtu"`
	LinkLayer LinkLayer `json:"link_layer"` // InfiniBand or Ethernet
	LID       uint16    `json:"lid,omitempty"`
	// RateText is the kernel's rate file as it prints it, e.g.
	// "200 Gb/sec (4X HDR)": sysfs only.
	RateText string `json:"-"`
	// GIDTblLen (the GID table's size, populated or not) and MaxMsgSize:
	// live only.
	GIDTblLen  int    `json:"-"`
	MaxMsgSize uint32 `json:"-"`
	// GIDs are the populated GID entries: ReadPort reads them; QueryPort
	// leaves them to verbs.Context.GIDTable.
	GIDs []GID `json:"gids"`
}

// Device is one entry of /sys/class/infiniband.
type Device struct {
	Name     string `json:"name"`
	NodeType string `json:"node_type,omitempty"`
	FWVer    string `json:"fw_ver,omitempty"`
	HCAType  string `json:"hca_type,omitempty"`
	BoardID  string `json:"board_id,omitempty"`
	NodeGUID string `json:"node_guid,omitempty"`
	Ports    []Port `json:"ports"`
}

// ErrNoDevice is returned when a named device does not exist. It is the one
// sentinel for it: verbs.ErrNoDevice is this same value.
var ErrNoDevice = errors.New("no such RDMA device")

// readDirIfAny is os.ReadDir with a missing directory read as empty: no
// device, no counters, no GIDs, not an error.
func readDirIfAny(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return entries, err
}

// DeviceNames lists the devices under root/class/infiniband, sorted.
// A missing class directory means no RDMA devices, not an error.
func DeviceNames(sysRoot string) ([]string, error) {
	entries, err := readDirIfAny(filepath.Join(sysRoot, ClassDir))
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names, nil
}

// DevicePath is the sysfs directory of a device.
func DevicePath(sysRoot, dev string) string { return filepath.Join(sysRoot, ClassDir, dev) }

// PortPath is the sysfs directory of a device's port.
func PortPath(sysRoot, dev string, port int) string {
	return filepath.Join(DevicePath(sysRoot, dev), "ports", strconv.Itoa(port))
}

// ReadDevice reads a device and all its ports.
func ReadDevice(sysRoot, dev string) (Device, error) {
	dir := DevicePath(sysRoot, dev)
	if _, err := os.Stat(dir); err != nil {
		return Device{}, fmt.Errorf("%w: %q", ErrNoDevice, dev)
	}
	d := Device{
		Name:     dev,
		NodeType: readTrim(filepath.Join(dir, "node_type")),
		FWVer:    readTrim(filepath.Join(dir, "fw_ver")),
		HCAType:  readTrim(filepath.Join(dir, "hca_type")),
		BoardID:  readTrim(filepath.Join(dir, "board_id")),
		NodeGUID: readTrim(filepath.Join(dir, "node_guid")),
	}
	nums, err := PortNumbers(sysRoot, dev)
	if err != nil {
		return Device{}, err
	}
	for _, n := range nums {
		p, err := ReadPort(sysRoot, dev, n)
		if err != nil {
			return Device{}, err
		}
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

// ReadDevices reads every device under the root.
func ReadDevices(sysRoot string) ([]Device, error) {
	names, err := DeviceNames(sysRoot)
	if err != nil {
		return nil, err
	}
	var devs []Device
	for _, n := range names {
		d, err := ReadDevice(sysRoot, n)
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// PortNumbers lists a device's port numbers in order.
func PortNumbers(sysRoot, dev string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(DevicePath(sysRoot, dev), "ports"))
	if err != nil {
		return nil, fmt.Errorf("list ports of %s: %w", dev, err)
	}
	return numbered(entries), nil
}

// numbered is the entries named by numbers (ports, IRQs), sorted; the
// others are skipped.
func numbered(entries []os.DirEntry) []int {
	var nums []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			nums = append(nums, n)
		}
	}
	sort.Ints(nums)
	return nums
}

// ReadPort reads one port's state, rate (with its width and speed), link
// layer, LID and GID table.
func ReadPort(sysRoot, dev string, port int) (Port, error) {
	dir := PortPath(sysRoot, dev, port)
	if _, err := os.Stat(dir); err != nil {
		return Port{}, fmt.Errorf("port %d of %s: %w", port, dev, err)
	}
	p := Port{
		Device:    dev,
		Number:    port,
		State:     PortState(stripCode(readTrim(filepath.Join(dir, "state")))),
		PhysState: stripCode(readTrim(filepath.Join(dir, "phys_state"))),
		RateText:  readTrim(filepath.Join(dir, "rate")),
		LinkLayer: LinkLayer(readTrim(filepath.Join(dir, "link_layer"))),
	}
	p.RateGbps = ParseRate(p.RateText)
	p.Width, p.SpeedName = rateWidth(p.RateText)
	if lid, err := strconv.ParseUint(strings.TrimPrefix(readTrim(filepath.Join(dir, "lid")), "0x"), 16, 16); err == nil {
		p.LID = uint16(lid)
	}
	gids, err := ReadGIDs(sysRoot, dev, port)
	if err != nil {
		return Port{}, err
	}
	p.GIDs = gids
	return p, nil
}

// IsRoCE reports whether the port runs over Ethernet.
func (p Port) IsRoCE() bool { return p.LinkLayer == Ethernet }

// ReadGIDs returns the populated entries of a port's GID table, in index order.
// Unpopulated entries read as all zeros, and their type files fail with EINVAL:
// both are skipped.
func ReadGIDs(sysRoot, dev string, port int) ([]GID, error) {
	dir := PortPath(sysRoot, dev, port)
	entries, err := readDirIfAny(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, fmt.Errorf("read GID table of %s port %d: %w", dev, port, err)
	}
	linkLayer := LinkLayer(readTrim(filepath.Join(dir, "link_layer")))
	var gids []GID
	for _, e := range entries {
		idx, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		text := readTrim(filepath.Join(dir, "gids", e.Name()))
		addr, err := ParseGID(text)
		if err != nil || addr.IsUnspecified() {
			continue
		}
		typ := parseGIDType(readTrim(filepath.Join(dir, "gid_attrs", "types", e.Name())), linkLayer)
		gids = append(gids, GID{
			Index:  idx,
			Type:   typ,
			Addr:   addr,
			Netdev: readTrim(filepath.Join(dir, "gid_attrs", "ndevs", e.Name())),
		})
	}
	sort.Slice(gids, func(i, j int) bool { return gids[i].Index < gids[j].Index })
	return gids, nil
}

// ParseGID parses the kernel's GID text, eight groups of four hex digits.
func ParseGID(text string) (net.IP, error) {
	ip := net.ParseIP(strings.TrimSpace(text))
	if ip == nil || len(ip) != net.IPv6len {
		return nil, fmt.Errorf("bad GID %q", text)
	}
	return ip, nil
}

func parseGIDType(text string, linkLayer LinkLayer) GIDType {
	switch {
	case text == "RoCE v2":
		return GIDTypeRoCEv2
	case linkLayer == InfiniBand:
		return GIDTypeIB
	case text == "IB/RoCE v1" || text == "RoCE v1":
		return GIDTypeRoCEv1
	case linkLayer == Ethernet:
		return GIDTypeRoCEv1
	default:
		return GIDTypeIB
	}
}

// PickRoCEv2IPv4 chooses the GID index RoCE traffic (and NCCL_IB_GID_INDEX)
// should use: the lowest RoCE v2 entry with an IPv4-mapped address. The reason
// says which entry and why, e.g. "gid 1: RoCE v2 ::ffff:198.18.0.1 on veth0".
func PickRoCEv2IPv4(gids []GID) (GID, string, error) {
	for _, g := range gids {
		if g.Type == GIDTypeRoCEv2 && g.IsIPv4() {
			return g, DescribeGID(g), nil
		}
	}
	return GID{}, "", errors.New("no RoCE v2 GID with an IPv4 address (is an IPv4 address configured on the netdev?)")
}

// DescribeGID prints an entry the way operators read show_gids.
func DescribeGID(g GID) string {
	s := fmt.Sprintf("gid %d: %s %s", g.Index, g.Type, g.AddrString())
	if g.Netdev != "" {
		s += " on " + g.Netdev
	}
	return s
}

// ParseRate turns the kernel's rate text ("100 Gb/sec (4X EDR)", "2.5 Gb/sec
// (1X SDR)") into Gb/s; 0 when unreadable.
func ParseRate(text string) float64 { return leadingNumber(text) }

// reRateWidth reads the width and speed from the kernel's rate text
// ("200 Gb/sec (4X HDR)").
var reRateWidth = regexp.MustCompile(`\((\d+)X ?([A-Za-z0-9]*)\)`)

// rateWidth is the lane count and per-lane speed name of the kernel's rate
// text; 0 and "" when it names none.
func rateWidth(text string) (width int, speed string) {
	m := reRateWidth.FindStringSubmatch(text)
	if m == nil {
		return 0, ""
	}
	width, _ = strconv.Atoi(m[1])
	return width, m[2]
}

// leadingNumber reads the number that starts a sysfs value ("100 Gb/sec ...",
// "16.0 GT/s PCIe"); 0 when there is none.
func leadingNumber(text string) float64 {
	f := strings.Fields(text)
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 0
	}
	return v
}

// ReadCounters reads every numeric file in a port's counter directory
// ("counters" or "hw_counters"). A missing directory yields an empty map.
func ReadCounters(sysRoot, dev string, port int, dirName string) (map[string]uint64, error) {
	dir := filepath.Join(PortPath(sysRoot, dev, port), dirName)
	entries, err := readDirIfAny(dir)
	if err != nil {
		return nil, fmt.Errorf("read %s of %s port %d: %w", dirName, dev, port, err)
	}
	out := make(map[string]uint64)
	for _, e := range entries {
		if e.IsDir() || e.Name() == "lifespan" { // lifespan is a cache lifetime, not a counter
			continue
		}
		v, err := strconv.ParseUint(readTrim(filepath.Join(dir, e.Name())), 10, 64)
		if err == nil {
			out[e.Name()] = v
		}
	}
	return out, nil
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// stripCode turns "4: ACTIVE" into "ACTIVE".
func stripCode(s string) string {
	if i := strings.Index(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
