package live

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

func nativeU16(b []byte) uint16 { return binary.NativeEndian.Uint16(b) }

// maxSysfsRead bounds every sysfs file read: they are one short line.
const maxSysfsRead = 4096

// readSmall reads a sysfs file, bounded, trimmed.
func readSmall(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, maxSysfsRead)
	n, err := f.Read(buf)
	if err != nil && n == 0 {
		return "", err
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// withSysfsQoS adds what mlx5 shows in sysfs to the DCB part: ECN at the
// notification point per priority (ecn/roce_np/enable/0..7) and, with
// MLNX_OFED's driver, the trust mode (qos/trust). Upstream mlx5 has no
// trust file: then trust follows the APP table — DSCP entries mean dscp
// trust, an answered table without them pcp.
func withSysfsQoS(d *ethside.DCB, sys, iface string, p *problems) *ethside.DCB {
	ecn := readECN(sys, iface, p)
	trust, err := readSmall(netPath(sys, iface, "qos", "trust"))
	note(p, "read", netPath(sys, iface, "qos", "trust"), err)
	if d == nil && ecn == nil && trust == "" {
		return nil
	}
	if d == nil {
		d = &ethside.DCB{Source: "sysfs " + netPath(sys, iface)}
	}
	d.ECN = ecn
	if f := strings.Fields(trust); len(f) > 0 {
		trust = f[len(f)-1] // MLNX_OFED may say "Priority trust state: dscp"
	}
	switch {
	case trust == "dscp" || trust == "pcp":
		d.Trust = trust
	case d.DSCPPrio != nil:
		d.Trust = "dscp"
	case d.PFCEnabled != nil:
		d.Trust = "pcp"
	}
	return d
}

// readECN reads mlx5's ecn/roce_np/enable/0..7; nil without the directory.
func readECN(sys, iface string, p *problems) *[8]bool {
	dir := netPath(sys, iface, "ecn", "roce_np", "enable")
	if _, err := os.Stat(dir); err != nil {
		note(p, "stat", dir, err)
		return nil
	}
	var ecn [8]bool
	for prio := range ecn {
		path := filepath.Join(dir, strconv.Itoa(prio))
		s, err := readSmall(path)
		if err != nil {
			note(p, "read", path, err)
			return nil
		}
		ecn[prio] = s == "1"
	}
	return &ecn
}
