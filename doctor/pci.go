package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// checkPCIeLink: a NIC that trained at a lower PCIe speed or width than it
// supports (bad riser, wrong slot, BIOS Gen setting) cannot feed its port.
func checkPCIeLink(h *host) []Finding {
	var out []Finding
	for _, d := range h.devs {
		f := Finding{Check: "pci.link", Subject: d.Name}
		p, ok := h.pci[d.Name]
		switch {
		case !ok && rdmasys.IsSoftware(h.opts.SysRoot, d):
			f.Status, f.Value = Skip, "no PCI device (software RDMA device)"
		case !ok:
			f.Status, f.Source = Skip, rdmasys.DevicePath(h.opts.SysRoot, d.Name)+"/device"
			f.Value = "hardware device without its PCI function here (the device link is missing, as in a capture that left it out): its PCIe link cannot be judged"
		case isVF(p):
			f = vfLinkFinding(f, p)
		case !p.HasLinkInfo():
			f.Status, f.Value, f.Source = Skip, p.BDF+": PCIe link attributes not exposed", p.Dir
		default:
			f = pcieLinkFinding(f, p, upstreamOf(p))
		}
		out = append(out, f)
	}
	return out
}

// pcieLinkFinding compares the link with what it can reach: the lower of
// the card's and the upstream bridge's maximum (a Gen5 card in a Gen4 slot
// runs at Gen4 and is not degraded).
func pcieLinkFinding(f Finding, p rdmasys.PCIDevice, up *rdmasys.PCIDevice) Finding {
	f.Source = filepath.Join(p.Dir, "current_link_speed")
	capSpeed, capWidth := p.MaxLinkSpeed, p.MaxLinkWidth
	slot := ""
	if up != nil && up.HasLinkInfo() {
		if rdmasys.ParseLinkSpeed(up.MaxLinkSpeed) < rdmasys.ParseLinkSpeed(capSpeed) {
			capSpeed = up.MaxLinkSpeed
		}
		capWidth = min(capWidth, up.MaxLinkWidth)
		slot = fmt.Sprintf(", slot (%s) max %s x%d", up.BDF, speedText(up.MaxLinkSpeed), up.MaxLinkWidth)
	}
	cur := fmt.Sprintf("%s x%d", speedText(p.CurLinkSpeed), p.CurLinkWidth)
	most := fmt.Sprintf("%s x%d", speedText(p.MaxLinkSpeed), p.MaxLinkWidth)
	f.Value = fmt.Sprintf("%s %s, max %s%s", p.BDF, cur, most, slot)
	if rdmasys.ParseLinkSpeed(p.CurLinkSpeed) < rdmasys.ParseLinkSpeed(capSpeed) || p.CurLinkWidth < capWidth {
		f.Status = Fail
		f.Value += fmt.Sprintf(": below the %s x%d both ends support", speedText(capSpeed), capWidth)
		f.Remedy = "the NIC's PCIe link is downgraded: reseat it in a full-width slot, check risers and the BIOS PCIe generation setting (lspci -vv: LnkSta vs LnkCap)"
		return f
	}
	f.Status = Pass
	return f
}

// upstreamOf reads the bridge a function sits behind; nil in a flat tree.
func upstreamOf(p rdmasys.PCIDevice) *rdmasys.PCIDevice {
	dir, ok := rdmasys.UpstreamDir(p.Dir)
	if !ok {
		return nil
	}
	up, err := rdmasys.ReadPCIDevice(dir)
	if err != nil {
		return nil
	}
	return &up
}

func isVF(p rdmasys.PCIDevice) bool {
	_, ok := rdmasys.PhysFnDir(p.Dir)
	return ok
}

// vfLinkFinding judges an SR-IOV virtual function by its PF's link: a VF
// has no link of its own.
func vfLinkFinding(f Finding, vf rdmasys.PCIDevice) Finding {
	dir, _ := rdmasys.PhysFnDir(vf.Dir)
	pf, err := rdmasys.ReadPCIDevice(dir)
	if err != nil || !pf.HasLinkInfo() {
		f.Status, f.Value, f.Source = Skip, vf.BDF+": SR-IOV VF; its PF's link is not readable", vf.Dir
		return f
	}
	f = pcieLinkFinding(f, pf, upstreamOf(pf))
	f.Value = vf.BDF + " VF of " + f.Value
	return f
}

// speedText drops the trailing "PCIe" the kernel appends ("16.0 GT/s PCIe").
func speedText(s string) string { return strings.TrimSpace(strings.TrimSuffix(s, "PCIe")) }

// checkNUMA: a GPU whose NUMA node has no NIC sends every byte across the
// inter-socket link; NCCL then either uses a remote NIC or stages in host
// memory.
func checkNUMA(h *host) []Finding {
	var gpus []rdmasys.PCIDevice
	for _, p := range h.allPCI {
		if p.IsNVIDIAGPU() {
			gpus = append(gpus, p)
		}
	}
	switch {
	case h.pciErr != nil:
		return []Finding{{Check: "pci.numa", Status: Skip, Subject: "host", Value: h.pciErr.Error()}}
	case len(gpus) == 0:
		return []Finding{{Check: "pci.numa", Status: Skip, Subject: "host", Value: "no NVIDIA GPUs",
			Source: h.sysPath(rdmasys.PCIDevicesDir)}}
	case len(h.pci) == 0:
		return []Finding{{Check: "pci.numa", Status: Skip, Subject: "host", Value: "no PCI RDMA devices"}}
	}
	nicsByNode := map[int][]string{}
	for _, d := range h.devs {
		if p, ok := h.pci[d.Name]; ok {
			nicsByNode[p.NUMANode] = append(nicsByNode[p.NUMANode], d.Name)
		}
	}
	var out []Finding
	for _, g := range gpus {
		out = append(out, gpuNUMAFinding(g, nicsByNode))
	}
	return out
}

func gpuNUMAFinding(g rdmasys.PCIDevice, nicsByNode map[int][]string) Finding {
	f := Finding{Check: "pci.numa", Subject: "gpu " + g.BDF, Source: filepath.Join(g.Dir, "numa_node")}
	if g.NUMANode < 0 {
		f.Status, f.Value = Pass, "no NUMA node reported (single-node system)"
		return f
	}
	if nics := nicsByNode[g.NUMANode]; len(nics) > 0 {
		f.Status, f.Value = Pass, fmt.Sprintf("NUMA %d, with %s", g.NUMANode, strings.Join(nics, ", "))
		return f
	}
	var elsewhere []string
	nodes := make([]int, 0, len(nicsByNode))
	for n := range nicsByNode {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		elsewhere = append(elsewhere, fmt.Sprintf("%s on NUMA %d", strings.Join(nicsByNode[n], ", "), n))
	}
	f.Status = Warn
	f.Value = fmt.Sprintf("NUMA %d has no RDMA NIC (%s)", g.NUMANode, strings.Join(elsewhere, "; "))
	f.Remedy = "put a NIC on this GPU's socket (move the card or use the GPU's PCIe switch), or pin jobs on this GPU to the NIC's node"
	return f
}

// aerTotals are the kernel's AER counter files and their total lines.
var aerTotals = []struct{ file, total string }{
	{"aer_dev_fatal", "TOTAL_ERR_FATAL"},
	{"aer_dev_nonfatal", "TOTAL_ERR_NONFATAL"},
	{"aer_dev_correctable", "TOTAL_ERR_COR"},
}

// checkAER: PCIe Advanced Error Reporting counts per NIC and GPU.
// Uncorrectable errors (fatal, non-fatal) are lost or poisoned transfers;
// corrected ones are replays, a marginal link when they keep rising.
func checkAER(h *host) []Finding {
	var out []Finding
	seen := 0
	for _, p := range h.nicsAndGPUs() {
		counts := map[string]int64{}
		for _, a := range aerTotals {
			b, err := os.ReadFile(filepath.Join(p.Dir, a.file))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(line, a.total+" "); ok {
					counts[a.file], _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				}
			}
		}
		if len(counts) == 0 {
			continue
		}
		seen++
		f := Finding{Check: "pci.aer", Subject: p.BDF, Source: filepath.Join(p.Dir, "aer_dev_*")}
		switch {
		case counts["aer_dev_fatal"]+counts["aer_dev_nonfatal"] > 0:
			f.Status = Warn
			f.Value = fmt.Sprintf("%d fatal, %d non-fatal, %d corrected PCIe errors", counts["aer_dev_fatal"], counts["aer_dev_nonfatal"], counts["aer_dev_correctable"])
			f.Remedy = "uncorrectable PCIe errors: reseat the card, check the riser and slot, update the BIOS and firmware; dmesg shows the AER reports"
		case counts["aer_dev_correctable"] > 0:
			f.Status = Info
			f.Value = fmt.Sprintf("%d corrected PCIe errors (replays); watch whether they keep rising", counts["aer_dev_correctable"])
		default:
			continue
		}
		out = append(out, f)
	}
	if seen > 0 && len(out) == 0 {
		out = append(out, Finding{Check: "pci.aer", Status: Pass, Subject: "host",
			Value: fmt.Sprintf("no PCIe AER errors on %d NIC/GPU functions", seen)})
	}
	return out
}

// nicsAndGPUs are the PCI functions of the RDMA devices and the GPUs.
func (h *host) nicsAndGPUs() []rdmasys.PCIDevice {
	var out []rdmasys.PCIDevice
	for _, d := range h.devs {
		if p, ok := h.pci[d.Name]; ok {
			out = append(out, p)
		}
	}
	return append(out, h.gpus()...)
}

// checkIOMMU: with the IOMMU translating (DMA, DMA-FQ domains) every NIC
// and GPU access goes through the IOTLB: GPUDirect RDMA and peer-to-peer
// slow down or fail. Passthrough (identity) or no IOMMU is what GPU nodes
// run.
func checkIOMMU(h *host) []Finding {
	devs := h.nicsAndGPUs()
	if len(devs) == 0 {
		return nil
	}
	f := Finding{Check: "host.iommu", Subject: "host", Source: h.sysPath("kernel", "iommu_groups")}
	var translated []string
	grouped := 0
	for _, p := range devs {
		group, err := filepath.EvalSymlinks(filepath.Join(p.Dir, "iommu_group"))
		if err != nil {
			continue
		}
		grouped++
		if t := readTrimmed(filepath.Join(group, "type")); strings.HasPrefix(t, "DMA") {
			translated = append(translated, p.BDF+" "+t)
		}
	}
	switch {
	case grouped == 0 && h.opts.Capture && !h.hasDir(filepath.Join("kernel", "iommu_groups")):
		f.Status, f.Value = Skip, notCaptured("kernel/iommu_groups", "whether the IOMMU is on")
	case grouped == 0:
		f.Status, f.Value = Pass, "no IOMMU groups: the IOMMU is off"
	case len(translated) == 0:
		f.Status, f.Value = Pass, fmt.Sprintf("IOMMU in passthrough for %d NIC/GPU functions", grouped)
	default:
		f.Status = Warn
		f.Value = "the IOMMU translates DMA for " + strings.Join(translated, ", ")
		f.Remedy = "boot with iommu=pt (intel_iommu=on iommu=pt, or amd_iommu=on iommu=pt) so NICs and GPUs bypass translation"
	}
	return []Finding{f}
}

// checkMaxReadReq: a NIC reads host memory in requests no larger than its
// Max_Read_Request_Size; firmware defaults of 128-256 bytes cost
// bandwidth, tuning guides (mlnx_tune) set 4096.
func checkMaxReadReq(h *host) []Finding {
	var out []Finding
	truncated := false
	for _, d := range h.devs {
		p, ok := h.pci[d.Name]
		if !ok {
			continue
		}
		c, err := rdmasys.ReadPCIConfig(p.Dir)
		if errors.Is(err, rdmasys.ErrConfigTruncated) {
			truncated = true
			continue
		}
		if err != nil || c.MaxReadReq == 0 {
			continue
		}
		f := Finding{Check: "pci.maxreadreq", Subject: d.Name, Source: filepath.Join(p.Dir, "config"),
			Value: fmt.Sprintf("%s MaxReadReq %d bytes", p.BDF, c.MaxReadReq)}
		switch {
		case c.MaxReadReq >= 4096:
			f.Status = Pass
		case c.MaxReadReq >= 512:
			f.Status, f.Value = Info, f.Value+" (tuning guides set 4096)"
		default:
			f.Status = Warn
			f.Remedy = "raise it: setpci -s " + p.BDF + " CAP_EXP+8.w (bits 14:12 = 5 for 4096), or mlnx_tune, or the BIOS setting"
		}
		out = append(out, h.scopedDev(d.Name, f))
	}
	if truncated && len(out) == 0 {
		f := Finding{Check: "pci.maxreadreq", Status: Skip, Subject: "host",
			Value: "PCI config space beyond the header is readable by root only (run doctor as root)"}
		if h.opts.Capture {
			f.Value = "the captured config files hold only the 64-byte header (captured without root): MaxReadReq cannot be told"
		}
		out = append(out, f)
	}
	return out
}

// checkACS: Access Control Services redirect on a PCIe switch port sends
// GPU-NIC peer-to-peer traffic up to the root complex (or to the IOMMU),
// which cuts GPUDirect RDMA bandwidth or breaks it. It matters on the
// bridges between a GPU and the NIC NCCL pairs it with.
func checkACS(h *host) []Finding {
	var out []Finding
	seen := map[string]bool{}
	for _, g := range h.gpus() {
		nic, path := h.nearestNIC(g)
		if nic == "" || (path != "PIX" && path != "PXB") {
			continue
		}
		for _, dir := range bridgesBetween(g.Dir, h.pci[nic].Dir) {
			c, err := rdmasys.ReadPCIConfig(dir)
			if err != nil || !c.HasACS || seen[dir] {
				continue
			}
			seen[dir] = true
			bdf := filepath.Base(dir)
			f := Finding{Check: "pci.acs", Subject: bdf, Source: filepath.Join(dir, "config")}
			if c.ACSCtrl&(rdmasys.ACSRequestRedirect|rdmasys.ACSCompletionRedirect|rdmasys.ACSUpstreamForwarding) == 0 {
				continue
			}
			f.Status = Warn
			f.Value = fmt.Sprintf("ACS redirect on (ACSCtl %#04x) between gpu %s and %s", c.ACSCtrl, g.BDF, nic)
			f.Remedy = "disable ACS on the switch ports (BIOS option, or setpci -s " + bdf + " ECAP_ACS+6.w=0 at boot) unless VMs need the isolation"
			out = append(out, f)
		}
	}
	if len(seen) > 0 && len(out) == 0 {
		out = append(out, Finding{Check: "pci.acs", Status: Pass, Subject: "host",
			Value: fmt.Sprintf("ACS redirect off on the %d bridges between GPUs and their NICs", len(seen))})
	}
	return out
}

// bridgesBetween lists the bridge directories on the path between two
// functions below their common ancestor.
func bridgesBetween(a, b string) []string {
	var out []string
	for _, side := range []struct{ from, other string }{{a, b}, {b, a}} {
		for dir := filepath.Dir(side.from); rdmasys.IsBDF(filepath.Base(dir)); dir = filepath.Dir(dir) {
			if strings.HasPrefix(side.other, dir+"/") {
				out = append(out, dir) // the common ancestor routes the peer-to-peer traffic too
				break
			}
			out = append(out, dir)
		}
	}
	return out
}
