package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// gpus lists the host's NVIDIA GPUs.
func (h *host) gpus() []rdmasys.PCIDevice {
	var out []rdmasys.PCIDevice
	for _, p := range h.allPCI {
		if p.IsNVIDIAGPU() {
			out = append(out, p)
		}
	}
	return out
}

// gdrLevel is NCCL_NET_GDR_LEVEL (or its old name NCCL_IB_GDR_LEVEL) as an
// index into gdrLevels, and how it was set. NCCL's default is PXB.
func (h *host) gdrLevel() (int, string) {
	for _, name := range []string{"NCCL_NET_GDR_LEVEL", "NCCL_IB_GDR_LEVEL"} {
		v, ok := h.env(name)
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 5 {
			return min(n, len(gdrLevels)-1), name + "=" + v
		}
		if i := slices.Index(gdrLevels, strings.ToUpper(v)); i >= 0 {
			return i, name + "=" + v
		}
	}
	return slices.Index(gdrLevels, "PXB"), "NCCL_NET_GDR_LEVEL unset: PXB"
}

// checkPeermem: GPUDirect RDMA needs nvidia_peermem (nv_peer_mem before
// it), or DMA-BUF, which the open GPU kernel module offers. Without either
// NCCL stages every transfer through host memory.
func checkPeermem(h *host) []Finding {
	if len(h.gpus()) == 0 || len(h.pci) == 0 {
		return nil
	}
	f := Finding{Check: "gpu.peermem", Subject: "host", Source: h.sysPath("module", "nvidia_peermem")}
	level, how := h.gdrLevel()
	version := readTrimmed(h.procPath("driver", "nvidia", "version"))
	switch {
	case gdrLevels[level] == "LOC":
		f.Status, f.Value = Skip, how+" turns GPUDirect RDMA off"
	case rdmasys.ModuleLoaded(h.opts.SysRoot, "nvidia_peermem"):
		f.Status, f.Value = Pass, "nvidia_peermem loaded"
	case rdmasys.ModuleLoaded(h.opts.SysRoot, "nv_peer_mem"):
		f.Status, f.Value = Pass, "nv_peer_mem loaded"
	case strings.Contains(version, "Open Kernel Module"):
		f.Status, f.Value, f.Source = Pass, "no nvidia_peermem, but the open GPU kernel module offers DMA-BUF (NCCL ≥ 2.19 uses it)", h.procPath("driver", "nvidia", "version")
	default:
		f.Status, f.Value = Warn, "nvidia_peermem not loaded and no DMA-BUF (the GPU driver is not the open kernel module): no GPUDirect RDMA"
		f.Remedy = "modprobe nvidia_peermem (and list it in /etc/modules-load.d/), or install the open GPU kernel module for DMA-BUF"
	}
	return []Finding{f}
}

// checkGDRDistance: NCCL uses GPUDirect RDMA between a GPU and a NIC only
// when their PCIe path is no longer than NCCL_NET_GDR_LEVEL (default PXB);
// the guides' NCCL_NET_GDR_LEVEL=2 (PXB) turns it off for a PHB pair.
func checkGDRDistance(h *host) []Finding {
	level, how := h.gdrLevel()
	var out []Finding
	for _, g := range h.gpus() {
		f := Finding{Check: "pci.gdr", Subject: "gpu " + g.BDF, Source: g.Dir}
		nic, path := h.nearestNIC(g)
		if nic == "" {
			continue // no PCI NIC NCCL uses, or a flat tree without the PCI hierarchy
		}
		f.Value = fmt.Sprintf("nearest NIC %s: %s; %s", nic, path, how)
		if slices.Index(gdrLevels, path) <= level {
			f.Status, f.Value = Pass, f.Value+": GPUDirect RDMA on"
		} else {
			f.Status, f.Value = Warn, f.Value+": GPUDirect RDMA off for this GPU"
			f.Remedy = fmt.Sprintf("raise NCCL_NET_GDR_LEVEL to %s if GPUDirect RDMA over this path performs (it usually does through a host bridge on one socket), or put the GPU and NIC behind one PCIe switch", path)
		}
		out = append(out, f)
	}
	return out
}

// nearestNIC is the RDMA device NCCL uses that is closest to a GPU on the
// PCIe tree, and the path type; "" in a flat tree or without one.
func (h *host) nearestNIC(g rdmasys.PCIDevice) (nic, path string) {
	for _, d := range h.devs {
		p, isPCI := h.pci[d.Name]
		if used, _ := h.devInScope(d.Name); !used || !isPCI {
			continue
		}
		// Nearest first; among equals, one under the GPU's own host bridge.
		t := rdmasys.PCIPathType(g, p)
		closer := path == "" || slices.Index(gdrLevels, t) < slices.Index(gdrLevels, path) ||
			(t == path && rdmasys.RootComplex(p.Dir) == rdmasys.RootComplex(g.Dir) && rdmasys.RootComplex(h.pci[nic].Dir) != rdmasys.RootComplex(g.Dir))
		if t != "" && closer {
			nic, path = d.Name, t
		}
	}
	return nic, path
}
