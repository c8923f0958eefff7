package rdmasys

import (
	"os"
	"path/filepath"
	"strings"
)

// PhysState is a port's physical link state, by the names the kernel
// prints after the code in ports/N/phys_state ("5: LinkUp").
type PhysState int

const (
	// PhysOther is a text the kernel's own table does not print: some
	// drivers (and hand-made captures) write the logical state there
	// ("4: ACTIVE"). It says nothing about the link either way.
	PhysOther PhysState = iota
	PhysSleep
	PhysPolling
	PhysDisabled
	PhysTraining // PortConfigurationTraining
	PhysLinkUp
	PhysErrorRecovery // LinkErrorRecovery
	PhysTest          // Phy Test
)

// physNames are the kernel's names (drivers/infiniband/core/sysfs.c).
var physNames = map[string]PhysState{
	"Sleep": PhysSleep, "Polling": PhysPolling, "Disabled": PhysDisabled,
	"PortConfigurationTraining": PhysTraining, "LinkUp": PhysLinkUp,
	"LinkErrorRecovery": PhysErrorRecovery, "Phy Test": PhysTest,
}

// ParsePhysState reads a phys_state text, with or without its code, by the
// name: the name is what the kernel derives from the code, and a driver
// that writes another name ("4: ACTIVE") means something else by the code.
func ParsePhysState(text string) PhysState {
	return physNames[stripCode(strings.TrimSpace(text))]
}

// Phys is the port's physical state.
func (p Port) Phys() PhysState { return ParsePhysState(p.PhysState) }

// NodeKind is what node_type says a device is.
type NodeKind int

const (
	NodeUnknown NodeKind = iota
	NodeCA               // 1: CA, an InfiniBand or RoCE channel adapter
	NodeSwitch           // 2: switch
	NodeRouter           // 3: router
	NodeRNIC             // 4: RNIC, iWARP
	NodeUSNIC            // 5, 6: usNIC
)

// Kind reads node_type ("1: CA", "4: RNIC"), by code when there is one.
func (d Device) Kind() NodeKind {
	code, name, ok := strings.Cut(d.NodeType, ": ")
	if !ok {
		name = code
	}
	switch {
	case code == "1" || name == "CA":
		return NodeCA
	case code == "2" || name == "switch":
		return NodeSwitch
	case code == "3" || name == "router":
		return NodeRouter
	case code == "4" || name == "RNIC":
		return NodeRNIC
	case code == "5" || code == "6" || strings.HasPrefix(name, "usNIC"):
		return NodeUSNIC
	}
	return NodeUnknown
}

// IsSoftware reports whether an RDMA device is a software one (rxe, siw)
// rather than a hardware function whose PCI link a capture may have lost.
// The kernel files software devices under devices/virtual; a flat capture
// keeps no links, so there the name and the hardware-only attributes
// (hca_type, board_id) decide.
func IsSoftware(sysRoot string, d Device) bool {
	if target, err := os.Readlink(DevicePath(sysRoot, d.Name)); err == nil {
		return strings.Contains(filepath.ToSlash(target), "/devices/virtual/")
	}
	if d.HCAType != "" || d.BoardID != "" {
		return false
	}
	return strings.HasPrefix(d.Name, "rxe") || strings.HasPrefix(d.Name, "siw") ||
		readTrim(filepath.Join(DevicePath(sysRoot, d.Name), "parent")) != ""
}

// PortState is a port's logical state, by the names the kernel prints in
// ports/N/state ("4: ACTIVE") and ibv_query_port's enum has.
type PortState string

const (
	PortNOP         PortState = "NOP"
	PortDown        PortState = "DOWN"
	PortInit        PortState = "INIT"
	PortArmed       PortState = "ARMED"
	PortActive      PortState = "ACTIVE"
	PortActiveDefer PortState = "ACTIVE_DEFER"
)

// LinkLayer is what a port runs on (ports/N/link_layer).
type LinkLayer string

const (
	InfiniBand LinkLayer = "InfiniBand"
	Ethernet   LinkLayer = "Ethernet"
)
