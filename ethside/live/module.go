package live

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

const (
	modinfoWords = 11   // struct ethtool_modinfo: cmd, type, eeprom_len, reserved[8]
	maxEEPROM    = 1024 // the ioctl's layouts reach 640 bytes (SFF-8636 pages 0-3)
)

// Module types of ETHTOOL_GMODULEINFO (linux/ethtool.h ETH_MODULE_*).
const (
	modSFF8079 = 0x1
	modSFF8472 = 0x2
	modSFF8636 = 0x3
	modSFF8436 = 0x4
)

// module reads the plug-in module's EEPROM with ETHTOOL_GMODULEINFO and
// ETHTOOL_GMODULEEEPROM and decodes its diagnostics.
func (k *kernel) module(name string, p *problems) *ethside.Module {
	info, err := getWords(k.fd, name, unix.ETHTOOL_GMODULEINFO, modinfoWords)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GMODULEINFO", name, err)
		return nil
	}
	typ, n := info[1], int(info[2])
	if n <= 0 || n > maxEEPROM {
		p.add("SIOCETHTOOL ETHTOOL_GMODULEINFO %s: EEPROM length %d out of 1..%d", name, n, maxEEPROM)
		return nil
	}
	img, err := k.eeprom(name, n)
	if err != nil {
		note(p, "SIOCETHTOOL ETHTOOL_GMODULEEEPROM", name, err)
		return nil
	}
	m, err := decodeModule(typ, img)
	if err != nil {
		p.add("module EEPROM %s: %v", name, err)
	}
	if m == nil {
		return nil
	}
	m.Source = "SIOCETHTOOL ETHTOOL_GMODULEEEPROM " + name
	return m
}

// eeprom runs ETHTOOL_GMODULEEEPROM (struct ethtool_eeprom: cmd, magic,
// offset, len, then len bytes) from offset 0.
func (k *kernel) eeprom(name string, n int) ([]byte, error) {
	buf := make([]byte, 16+n)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GMODULEEEPROM)
	binary.NativeEndian.PutUint32(buf[12:], uint32(n))
	if err := ethtoolIoctl(k.fd, name, unsafe.Pointer(&buf[0])); err != nil {
		return nil, err
	}
	got := min(int(binary.NativeEndian.Uint32(buf[12:])), n)
	return buf[16 : 16+got], nil
}

// decodeModule picks the decoder for the module type GMODULEINFO gave. A
// module with an error is what could be decoded before it (the identity
// without the diagnostics); nil when nothing could.
func decodeModule(typ uint32, img []byte) (*ethside.Module, error) {
	switch typ {
	case modSFF8472, modSFF8079:
		return decodeSFF8472(img)
	case modSFF8636, modSFF8436:
		return decodeSFF8636(img)
	}
	return nil, fmt.Errorf("module type %#x not decoded", typ)
}
