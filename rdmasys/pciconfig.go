package rdmasys

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// PCIConfig is what doctor reads from a function's configuration space
// (its sysfs "config" file): what lspci -vv shows as MaxReadReq and ACSCtl.
type PCIConfig struct {
	MaxReadReq int    // bytes; 0 when the function has no PCIe capability
	HasACS     bool   // the function has an ACS extended capability
	ACSCtrl    uint16 // its control register
}

// ACS control bits that send peer-to-peer traffic up to the root complex.
const (
	ACSRequestRedirect    = 1 << 2
	ACSCompletionRedirect = 1 << 3
	ACSUpstreamForwarding = 1 << 4
)

// ErrConfigTruncated: without CAP_SYS_ADMIN the kernel returns only the
// first 64 bytes of config space, the header without the capabilities.
var ErrConfigTruncated = errors.New("PCI config space beyond the header is readable by root only")

// Capability IDs (PCI Local Bus and PCIe Base specifications).
const (
	capPCIExpress = 0x10
	extCapACS     = 0x0d
)

// ReadPCIConfig parses a function's config space.
func ReadPCIConfig(pciDir string) (PCIConfig, error) {
	b, err := os.ReadFile(filepath.Join(pciDir, "config"))
	if err != nil {
		return PCIConfig{}, fmt.Errorf("read config space: %w", err)
	}
	return ParsePCIConfig(b)
}

// ParsePCIConfig walks the capability lists of raw config space.
func ParsePCIConfig(b []byte) (PCIConfig, error) {
	var c PCIConfig
	if len(b) < 0x40 {
		return c, fmt.Errorf("config space of %d bytes: too short", len(b))
	}
	const statusCapList = 1 << 4
	if binary.LittleEndian.Uint16(b[0x06:])&statusCapList == 0 {
		return c, nil
	}
	if len(b) <= 0x40 {
		return c, ErrConfigTruncated
	}
	// Standard capabilities: a linked list from 0x34, bounded in length.
	for ptr, n := int(b[0x34]&^3), 0; ptr >= 0x40 && ptr+12 <= len(b) && n < 48; ptr, n = int(b[ptr+1]&^3), n+1 {
		if b[ptr] == capPCIExpress {
			devCtl := binary.LittleEndian.Uint16(b[ptr+8:])
			c.MaxReadReq = 128 << ((devCtl >> 12) & 7)
		}
	}
	// Extended capabilities: a linked list from 0x100 (PCIe only).
	for ptr, n := 0x100, 0; ptr >= 0x100 && ptr+8 <= len(b) && n < 512; n++ {
		hdr := binary.LittleEndian.Uint32(b[ptr:])
		if hdr == 0 || hdr == 0xffffffff {
			break
		}
		if hdr&0xffff == extCapACS {
			c.HasACS = true
			c.ACSCtrl = binary.LittleEndian.Uint16(b[ptr+6:])
		}
		ptr = int(hdr>>20) &^ 3
	}
	return c, nil
}

// BuildPCIConfig makes config space with a PCIe capability carrying
// maxReadReq and, when acs is not nil, an ACS capability with that control
// value: the inverse of ParsePCIConfig, for test trees.
func BuildPCIConfig(maxReadReq int, acs *uint16) []byte {
	b := make([]byte, 4096)
	binary.LittleEndian.PutUint16(b[0x06:], 1<<4) // capabilities list
	b[0x34] = 0x40
	b[0x40], b[0x41] = 0x01, 0x60 // power management, then PCIe at 0x60
	b[0x60], b[0x61] = capPCIExpress, 0
	code := uint16(0)
	for 128<<code < maxReadReq {
		code++
	}
	binary.LittleEndian.PutUint16(b[0x68:], code<<12|0x2810&0x0fff)
	if acs != nil {
		binary.LittleEndian.PutUint32(b[0x100:], 0x1<<16|extCapACS) // version 1, last
		binary.LittleEndian.PutUint16(b[0x104:], 0x5f)              // capabilities
		binary.LittleEndian.PutUint16(b[0x106:], *acs)
	}
	return b
}
