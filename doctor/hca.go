package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// checkSubnetManager: an InfiniBand port whose SM LID is 0 has no subnet
// manager: it stays configured until the next link flap, then never comes
// back, and new routes are never computed.
func checkSubnetManager(h *host) []Finding {
	var out []Finding
	for _, p := range h.ports() {
		if p.port.IsRoCE() || !isActive(p.port) {
			continue
		}
		f := Finding{Check: "port.sm", Subject: p.name(), Source: h.portFile(p, "sm_lid")}
		lid := readTrimmed(f.Source)
		switch lid {
		case "":
			continue // soft devices and trimmed trees do not say
		case "0", "0x0", "0x0000":
			f.Status, f.Value = Fail, "SM LID "+lid+": no subnet manager on the fabric"
			f.Remedy = "start a subnet manager (opensm on a node, or the switches' SM) and check it with sminfo"
		default:
			f.Status, f.Value = Pass, "SM LID "+lid
		}
		out = append(out, h.scoped(p, f))
	}
	return out
}

// checkFirmware: HCAs of one model should run one firmware; a mix is
// usually a card replaced without updating it, and behaves differently
// (congestion control, adaptive routing, bugs fixed in one only).
func checkFirmware(h *host) []Finding {
	byModel := map[string]map[string][]string{} // model → fw → devices
	for _, d := range h.devs {
		if d.HCAType == "" || d.FWVer == "" {
			continue
		}
		if byModel[d.HCAType] == nil {
			byModel[d.HCAType] = map[string][]string{}
		}
		byModel[d.HCAType][d.FWVer] = append(byModel[d.HCAType][d.FWVer], d.Name)
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	slices.Sort(models)
	var out []Finding
	for _, m := range models {
		f := Finding{Check: "hca.firmware", Subject: m, Source: h.sysPath(rdmasys.ClassDir, "*", "fw_ver")}
		var parts []string
		n := 0
		for fw, devs := range byModel[m] {
			parts = append(parts, fmt.Sprintf("%s on %s", fw, strings.Join(devs, ", ")))
			n += len(devs)
		}
		slices.Sort(parts)
		if len(byModel[m]) == 1 {
			f.Status, f.Value = Pass, fmt.Sprintf("%d HCA(s), firmware %s", n, parts[0])
		} else {
			f.Status, f.Value = Warn, "mixed firmware: "+strings.Join(parts, "; ")
			f.Remedy = "bring every HCA of this model to one firmware (mlxfwmanager --online -u, or the vendor's bundle)"
		}
		out = append(out, f)
	}
	return out
}

// checkUnboundFunctions: a Mellanox network function without an RDMA
// device is a NIC NCCL cannot use: no driver bound, or mlx5_ib missing.
// The second function of a RoCE LAG (its netdev is a bond slave) and
// functions whose netdevs this namespace cannot see (a pod) are skipped.
func checkUnboundFunctions(h *host) []Finding {
	withDev := map[string]bool{}
	for _, p := range h.pci {
		withDev[p.BDF] = true
	}
	slaves := bondSlaves(h)
	var out []Finding
	for _, p := range h.allPCI {
		if p.Vendor != "0x15b3" || !(strings.HasPrefix(p.Class, "0x0200") || strings.HasPrefix(p.Class, "0x0207")) || withDev[p.BDF] {
			continue
		}
		if _, err := os.Stat(filepath.Join(p.Dir, "infiniband")); err == nil {
			continue // its RDMA device is in another namespace
		}
		f := Finding{Check: "pci.driver", Subject: p.BDF, Source: p.Dir}
		driver := ""
		if l, err := os.Readlink(filepath.Join(p.Dir, "driver")); err == nil {
			driver = filepath.Base(l)
		}
		netdevs, _ := filepath.Glob(filepath.Join(p.Dir, "net", "*"))
		switch {
		case driver == "":
			f.Status, f.Value = Warn, "Mellanox function with no driver bound"
			f.Remedy = "modprobe mlx5_core and look for probe errors (dmesg | grep mlx5): firmware mismatch, PCI errors"
		case driver == "vfio-pci":
			f.Status, f.Value = Info, "bound to vfio-pci (passed to a VM)"
		case len(netdevs) == 0:
			continue // a function this namespace does not own
		case slices.Contains(slaves, filepath.Base(netdevs[0])):
			continue // RoCE LAG: the bond's RDMA device is on the first function
		default:
			f.Status = Warn
			f.Value = fmt.Sprintf("driver %s, netdev %s, but no RDMA device", driver, filepath.Base(netdevs[0]))
			f.Remedy = "modprobe mlx5_ib; if it stays absent, check that RoCE is enabled (devlink dev param show pci/" + p.BDF + " name enable_roce)"
		}
		out = append(out, f)
	}
	return out
}

// bondSlaves lists the netdevs enslaved to a bond.
func bondSlaves(h *host) []string {
	var out []string
	files, _ := filepath.Glob(filepath.Join(h.sysPath(rdmasys.NetClassDir), "*", "bonding", "slaves"))
	for _, f := range files {
		out = append(out, strings.Fields(readTrimmed(f))...)
	}
	return out
}
