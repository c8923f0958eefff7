package rdmasys

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ClueKind is what told a device iWARP.
type ClueKind int

const (
	// ClueNone: not told iWARP.
	ClueNone ClueKind = iota
	// ClueNodeType: node_type says RNIC. A live sysfs always has the file
	// (ib_core writes it for every device); it decides when present.
	ClueNodeType
	// ClueNodeDesc: node_desc is siw's, "Software iWARP stack".
	ClueNodeDesc
	// ClueHCAType: hca_type as an iWARP driver writes it: i40iw "I40IW",
	// iw_cxgb4 the name of the Chelsio netdev's driver ("cxgb4"), qedr
	// "FastLinQ QL… iWARP".
	ClueHCAType
	// ClueParent: the device hangs from an auxiliary device the Intel
	// network driver names for the protocol it gave irdma: ice.iwarp.N.
	ClueParent
	// ClueDriver: the driver of the function the device hangs from
	// (device/driver) has iWARP as its only RDMA: i40e (X722: i40iw, or
	// irdma generation 1), cxgb4 and cxgb3 (Chelsio: iw_cxgb4, iw_cxgb3).
	ClueDriver
	// ClueGIDTypes: an irdma device whose GID table has iWARP entries and
	// no RoCE v2 one.
	ClueGIDTypes
)

var clueNames = []string{"none", "node_type", "node_desc", "hca_type", "parent device", "driver", "GID types"}

func (k ClueKind) String() string {
	if k < 0 || int(k) >= len(clueNames) {
		return fmt.Sprintf("ClueKind(%d)", int(k))
	}
	return clueNames[k]
}

// IWARPClue is how a device was told iWARP: what said so, the file (or
// link) read, and what it read.
type IWARPClue struct {
	By   ClueKind
	Path string
	Text string
}

// String says it as doctor and devices quote it: "node type 4: RNIC",
// "hca_type I40IW; no node_type in the capture", "driver cxgb4, RDMA by
// iw_cxgb4; no node_type in the capture". A live sysfs always has
// node_type: told by anything else, the tree is a capture that left it
// out, and the reader should know the verdict is inferred.
func (c IWARPClue) String() string {
	var s string
	switch c.By {
	case ClueNodeType:
		return "node type " + c.Text
	case ClueDriver:
		s = "driver " + c.Text + ", RDMA by " + iwarpOnlyDrivers[c.Text]
	case ClueParent:
		s = "parent device " + c.Text
	case ClueGIDTypes:
		s = "irdma with iWARP GIDs and no RoCE v2 one: " + c.Text
	default:
		s = c.By.String() + " " + c.Text
	}
	return s + "; no node_type in the capture"
}

// iwarpOnlyDrivers are the drivers of the PCI functions whose RDMA device
// can only be iWARP, with the RDMA driver that makes it.
var iwarpOnlyDrivers = map[string]string{
	"i40e":  "i40iw or irdma", // X722, the only i40e part with RDMA: iWARP
	"cxgb4": "iw_cxgb4",
	"cxgb3": "iw_cxgb3",
}

// irdmaParent is the auxiliary device irdma binds to, named by the network
// driver (ice, and iavf, idpf, iecm for functions of it) for the protocol
// it runs: iwarp or roce.
var irdmaParent = regexp.MustCompile(`^(ice|iavf|idpf|iecm)\.(iwarp|roce)\.\d+$`)

// siwNodeDesc is siw's node_desc (SIW_NODE_DESC_COMMON).
const siwNodeDesc = "Software iWARP stack"

// TellIWARP reports whether a device is iWARP, and how that was told.
// node_type decides when the tree has it. A capture may leave it out
// (node_exporter's and procfs's fixtures do); then what the drivers write
// elsewhere tells, and only positive evidence counts — a device not shown
// to be iWARP is not called one, since NCCL would be told to leave it:
//
//   - node_desc "Software iWARP stack": siw;
//   - hca_type: i40iw's "I40IW", iw_cxgb4's "cxgb4" (its netdev's
//     driver), qedr's "FastLinQ QL… iWARP" (and "… RoCE": not iWARP);
//   - a parent named ice.iwarp.N (or .roce.N: not iWARP): irdma's mode as
//     ice chose it (kernels since the auxiliary bus hang the device there);
//   - the parent function's driver: i40e, cxgb4, cxgb3 have only iWARP
//     RDMA; ice (irdma, older kernels: the PCI function) and irdma itself
//     run either protocol, and the GID table tells: irdma's RoCE ports are
//     RoCE v2 only (its port immutable data give ROCE_UDP_ENCAP alone), so
//     each GID's type is "RoCE v2", while its iWARP ports hold the MAC-based
//     GID typed "IB/RoCE v1"; a table whose type files are absent tells
//     nothing. link_layer does not tell: every iWARP port is Ethernet to
//     the kernel, and so is irdma's in RoCE mode (and node_exporter's
//     capture says InfiniBand for its i40iw0).
//
// rxe and, on older kernels, siw hang from the netdev's PCI function, so
// its driver says nothing of them: a device with rxe's parent file is not
// judged by it.
func TellIWARP(sysRoot string, d Device) (IWARPClue, bool) {
	dir := DevicePath(sysRoot, d.Name)
	if d.NodeType != "" {
		c := IWARPClue{By: ClueNodeType, Path: filepath.Join(dir, "node_type"), Text: d.NodeType}
		return c, d.Kind() == NodeRNIC
	}
	if p := filepath.Join(dir, "node_desc"); readTrim(p) == siwNodeDesc {
		return IWARPClue{By: ClueNodeDesc, Path: p, Text: siwNodeDesc}, true
	}
	if readTrim(filepath.Join(dir, "parent")) != "" {
		return IWARPClue{}, false // rxe: RoCE, whatever its netdev's NIC
	}
	hca := filepath.Join(dir, "hca_type")
	switch t := d.HCAType; {
	case t == "I40IW", t == "cxgb4", t == "cxgb3", strings.HasSuffix(t, " iWARP"):
		return IWARPClue{By: ClueHCAType, Path: hca, Text: t}, true
	case strings.HasSuffix(t, " RoCE"):
		return IWARPClue{}, false
	}
	parent := linkName(filepath.Join(dir, "device"))
	if m := irdmaParent.FindStringSubmatch(parent); m != nil {
		if m[2] == "roce" {
			return IWARPClue{}, false
		}
		return IWARPClue{By: ClueParent, Path: filepath.Join(dir, "device"), Text: parent}, true
	}
	link := filepath.Join(dir, "device", "driver")
	driver := linkName(link)
	if _, ok := iwarpOnlyDrivers[driver]; ok {
		return IWARPClue{By: ClueDriver, Path: link, Text: driver}, true
	}
	if driver == "ice" || driver == "irdma" || strings.HasPrefix(driver, "irdma.") {
		return irdmaByGIDs(sysRoot, d)
	}
	return IWARPClue{}, false
}

// linkName is the name of what a link points to ("" when it is none): the
// last element of its resolved path, since a relative target may end in
// ".." (a capture's ../.. to the parent); a link whose target the tree
// left out (bus/pci/drivers/cxgb4) is named by its target's last element.
func linkName(link string) string {
	if real, err := filepath.EvalSymlinks(link); err == nil {
		return filepath.Base(real)
	}
	if target, err := os.Readlink(link); err == nil {
		return filepath.Base(target)
	}
	return ""
}

// irdmaByGIDs tells an irdma device's protocol by its GID types (see
// TellIWARP): iWARP when some entry is typed "IB/RoCE v1" and none "RoCE
// v2"; the first such type file is the clue.
func irdmaByGIDs(sysRoot string, d Device) (IWARPClue, bool) {
	var clue IWARPClue
	for _, p := range d.Ports {
		for _, g := range p.GIDs {
			path := filepath.Join(PortPath(sysRoot, d.Name, p.Number), "gid_attrs", "types", fmt.Sprint(g.Index))
			switch t := readTrim(path); t {
			case "RoCE v2":
				return IWARPClue{}, false
			case "IB/RoCE v1":
				if clue.By == ClueNone {
					clue = IWARPClue{By: ClueGIDTypes, Path: path, Text: fmt.Sprintf("port %d gid %d %s", p.Number, g.Index, t)}
				}
			}
		}
	}
	return clue, clue.By != ClueNone
}
