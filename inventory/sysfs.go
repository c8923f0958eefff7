package inventory

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// notInSysfs are the fields only ibv_query_port knows; a device read from a
// sysfs tree leaves them zero and names them.
var notInSysfs = []string{"active_mtu", "max_mtu"}

// FromSysfs describes the devices of a sysfs tree (a capture, or a host
// where the devices cannot be opened) without verbs: every value comes
// from the tree, and the ones sysfs does not hold are named in
// NotInCapture rather than taken from this machine.
func FromSysfs(sysRoot string, names []string) ([]Device, error) {
	all, err := rdmasys.DeviceNames(sysRoot)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		names = all
	}
	var devs []Device
	for _, n := range names {
		d, err := rdmasys.ReadDevice(sysRoot, n)
		if errors.Is(err, rdmasys.ErrNoDevice) {
			return nil, fmt.Errorf("%w (devices in %s: %s)", err, sysRoot, listOrNone(all))
		}
		if err != nil {
			return nil, err
		}
		devs = append(devs, fromSysfsDevice(sysRoot, d))
	}
	return devs, nil
}

func fromSysfsDevice(sysRoot string, d rdmasys.Device) Device {
	out := Device{Name: d.Name, FWVer: d.FWVer, NodeType: nodeTypeName(d.NodeType), IWARP: iwarpClue(sysRoot, d),
		Capture: sysRoot, NotInCapture: notInSysfs}
	for _, sp := range d.Ports {
		p := Port{Port: sp}
		Annotate(&p)
		out.Ports = append(out.Ports, p)
	}
	return out
}

// iwarpClue says how a device was told iWARP, "" when it is not one.
func iwarpClue(sysRoot string, d rdmasys.Device) string {
	if c, ok := rdmasys.TellIWARP(sysRoot, d); ok {
		return c.String()
	}
	return ""
}

// nodeTypeName turns "1: CA" into "CA".
func nodeTypeName(s string) string {
	if i := strings.Index(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
