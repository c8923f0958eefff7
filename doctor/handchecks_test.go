package doctor

import (
	"testing"

	"github.com/rdmabench/rdmabench/doctor/internal/hosttree"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// TestHGXClean: a healthy HGX node gives neither FAIL nor WARN, so every
// WARN the checks below raise is the broken thing's.
func TestHGXClean(t *testing.T) {
	r := runTree(t, hosttree.HGX("node01"), Options{Env: hosttree.HGXEnv(), ExpectRateGbps: 400})
	for _, w := range []want{
		{"pci.acs", "host", Pass, "ACS redirect off on the 24 bridges between GPUs and their NICs"},
		{"pci.maxreadreq", "mlx5_0", Pass, "MaxReadReq 4096 bytes"},
		{"pci.gdr", "gpu 0000:84:00.0", Pass, "nearest NIC mlx5_7: PIX; NCCL_NET_GDR_LEVEL unset: PXB: GPUDirect RDMA on"},
		{"gpu.peermem", "host", Pass, "nvidia_peermem loaded"},
		{"host.shm", "/dev/shm", Pass, "default size"},
		{"pci.aer", "host", Pass, "no PCIe AER errors on 18 NIC/GPU functions"},
		{"host.iommu", "host", Pass, "the IOMMU is off"},
	} {
		assertFinding(t, r, w)
	}
	for _, f := range r.Findings {
		if f.Status == Warn || f.Status == Fail {
			t.Errorf("%s %s %s: %s", f.Status, f.Check, f.Subject, f.Value)
		}
	}
}

// handCase breaks one thing on a healthy HGX node; the report must show
// the wanted findings, and its WARNs and FAILs must be exactly the wanted
// ones of those statuses.
type handCase struct {
	name   string
	mutate func(*hosttree.Tree, *Options)
	want   []want
}

var handCases = []handCase{
	{
		name:   "no subnet manager",
		mutate: func(t *hosttree.Tree, _ *Options) { t.File(t.PortDir("mlx5_2", 1)+"/sm_lid", "0x0") },
		want:   []want{{"port.sm", "mlx5_2:1", Fail, "SM LID 0x0: no subnet manager"}},
	},
	{
		name: "irqbalance stopped, IRQ affinities unreadable",
		mutate: func(t *hosttree.Tree, _ *Options) {
			t.Remove("proc/1187/comm")
			t.File("sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/0000:13:00.0/msi_irqs/100", "msi")
		},
		// No proc/irq/100: an unknown placement, not "all on no CPU".
		want: []want{{"host.irq", "mlx5_0", Skip, "1 MSI IRQs; no proc/irq/N/*_affinity_list readable"}},
	},
	{
		name:   "one HCA on older firmware",
		mutate: func(t *hosttree.Tree, _ *Options) { t.File(hosttree.DevDir("mlx5_6")+"/fw_ver", "28.36.1010") },
		want: []want{{"hca.firmware", "MT4129", Warn,
			"mixed firmware: 28.36.1010 on mlx5_6; 28.39.1002 on mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_7"}},
	},
	{
		name:   "mlx5_ib missing for a function",
		mutate: func(t *hosttree.Tree, _ *Options) { t.RemoveRDMADev("mlx5_9") },
		want:   []want{{"pci.driver", "0000:b1:00.0", Warn, "driver mlx5_core, netdev ens9np0, but no RDMA device"}},
	},
	{
		name: "no driver bound",
		mutate: func(t *hosttree.Tree, _ *Options) {
			t.RemoveRDMADev("mlx5_9")
			t.Remove(hosttree.PCIDir("pci0000:b0/0000:b0:01.0/0000:b1:00.0") + "/net")
			t.Remove(hosttree.PCIDir("pci0000:b0/0000:b0:01.0/0000:b1:00.0") + "/driver")
		},
		want: []want{{"pci.driver", "0000:b1:00.0", Warn, "Mellanox function with no driver bound"}},
	},
}

func init() {
	handCases = append(handCases,
		handCase{
			name:   "no nvidia_peermem",
			mutate: func(t *hosttree.Tree, _ *Options) { t.Remove("sys/module/nvidia_peermem") },
			want:   []want{{"gpu.peermem", "host", Warn, "nvidia_peermem not loaded and no DMA-BUF"}},
		},
		handCase{
			name: "open GPU kernel module: DMA-BUF",
			mutate: func(t *hosttree.Tree, _ *Options) {
				t.Remove("sys/module/nvidia_peermem")
				t.File("proc/driver/nvidia/version", "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.161.08  Release Build")
			},
			want: []want{{"gpu.peermem", "host", Pass, "open GPU kernel module offers DMA-BUF"}},
		},
		handCase{
			name: "GPU behind the host bridge with NCCL_NET_GDR_LEVEL=2",
			mutate: func(t *hosttree.Tree, o *Options) {
				// GPU 7 moves from rail 7's switch to its own root port of
				// the same host bridge: PHB to mlx5_7.
				t.Remove(hosttree.PCIDir("pci0000:80/0000:80:01.0/0000:81:00.0/0000:82:01.0"))
				t.Remove("sys/bus/pci/devices/0000:84:00.0")
				t.Remove("sys/bus/pci/devices/0000:82:01.0")
				t.Bridge("pci0000:80/0000:80:02.0", hosttree.Gen5, 16, 1)
				t.GPU("pci0000:80/0000:80:02.0/0000:85:00.0", hosttree.Gen5, 1)
				o.Env["NCCL_NET_GDR_LEVEL"] = "2"
			},
			want: []want{
				{"pci.gdr", "gpu 0000:85:00.0", Warn, "nearest NIC mlx5_7: PHB; NCCL_NET_GDR_LEVEL=2: GPUDirect RDMA off for this GPU"},
				{"pci.gdr", "gpu 0000:14:00.0", Pass, "nearest NIC mlx5_0: PIX; NCCL_NET_GDR_LEVEL=2: GPUDirect RDMA on"},
			},
		},
	)
}

func init() {
	handCases = append(handCases,
		handCase{
			name: "docker's 64 MiB /dev/shm",
			mutate: func(t *hosttree.Tree, _ *Options) {
				t.File("proc/self/mounts", "overlay / overlay rw 0 0\nshm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k,inode64 0 0")
			},
			want: []want{{"host.shm", "/dev/shm", Warn, "tmpfs, 64 MiB: too small"}},
		},
		handCase{
			name: "big enough /dev/shm",
			mutate: func(t *hosttree.Tree, _ *Options) {
				t.File("proc/self/mounts", "shm /dev/shm tmpfs rw,size=16g 0 0")
			},
			want: []want{{"host.shm", "/dev/shm", Pass, "tmpfs, 16 GiB"}},
		},
		handCase{
			name: "PCIe AER errors",
			mutate: func(t *hosttree.Tree, _ *Options) {
				nic := hosttree.PCIDir(hosttree.RailNIC(5))
				t.File(nic+"/aer_dev_nonfatal", "DLP 0\nCmpltTO 2\nTOTAL_ERR_NONFATAL 2")
				t.File(nic+"/aer_dev_correctable", "RxErr 30\nBadTLP 11\nTOTAL_ERR_COR 41")
				t.File(hosttree.PCIDir(hosttree.RailNIC(1))+"/aer_dev_correctable", "BadDLLP 3\nTOTAL_ERR_COR 3")
			},
			want: []want{
				{"pci.aer", "0000:63:00.0", Warn, "0 fatal, 2 non-fatal, 41 corrected PCIe errors"},
				{"pci.aer", "0000:23:00.0", Info, "3 corrected PCIe errors"},
			},
		},
		handCase{
			name: "IOMMU translating",
			mutate: func(t *hosttree.Tree, _ *Options) {
				t.IOMMUGroup(hosttree.RailNIC(0), 40, "DMA-FQ")
				t.IOMMUGroup(hosttree.RailNIC(1), 41, "identity")
			},
			want: []want{{"host.iommu", "host", Warn, "the IOMMU translates DMA for 0000:13:00.0 DMA-FQ"}},
		},
	)
}

func init() {
	handCases = append(handCases,
		handCase{
			name: "ACS redirect on a switch port",
			mutate: func(t *hosttree.Tree, _ *Options) {
				// Rail 3's switch port above its GPU (0000:42:01.0).
				t.ACS("pci0000:40/0000:40:01.0/0000:41:00.0/0000:42:01.0", rdmasys.ACSRequestRedirect|rdmasys.ACSCompletionRedirect|1)
			},
			want: []want{{"pci.acs", "0000:42:01.0", Warn, "ACS redirect on (ACSCtl 0x000d) between gpu 0000:44:00.0 and mlx5_3"}},
		},
		handCase{
			name:   "MaxReadReq 256",
			mutate: func(t *hosttree.Tree, _ *Options) { t.MaxReadReq(hosttree.RailNIC(4), 256) },
			want:   []want{{"pci.maxreadreq", "mlx5_4", Warn, "0000:53:00.0 MaxReadReq 256 bytes"}},
		},
		handCase{
			name:   "MaxReadReq 512",
			mutate: func(t *hosttree.Tree, _ *Options) { t.MaxReadReq(hosttree.RailNIC(4), 512) },
			want:   []want{{"pci.maxreadreq", "mlx5_4", Info, "MaxReadReq 512 bytes (tuning guides set 4096)"}},
		},
		handCase{
			name: "config space without root",
			mutate: func(t *hosttree.Tree, _ *Options) {
				for i := 0; i < 10; i++ {
					nic := hosttree.RailNIC(i)
					if i >= 8 {
						nic = map[int]string{8: "pci0000:a0/0000:a0:01.0/0000:a1:00.0", 9: "pci0000:b0/0000:b0:01.0/0000:b1:00.0"}[i]
					}
					t.Binary(hosttree.PCIDir(nic)+"/config", rdmasys.BuildPCIConfig(4096, nil)[:64])
				}
			},
			want: []want{{"pci.maxreadreq", "host", Skip, "readable by root only"}},
		},
	)
}

func init() {
	handCases = append(handCases, handCase{
		name: "an NDR rail at 1X without --expect-rate",
		mutate: func(t *hosttree.Tree, o *Options) {
			o.ExpectRateGbps = 0
			t.File(t.PortDir("mlx5_5", 1)+"/rate", "100 Gb/sec (1X NDR)")
		},
		want: []want{{"port.rate", "mlx5_5:1", Warn, "100 Gb/sec (1X NDR); trained at 1X width"}},
	})
}

func TestHandChecks(t *testing.T) {
	for _, c := range handCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tree, opts := hosttree.HGX("node01"), Options{Env: hosttree.HGXEnv(), ExpectRateGbps: 400}
			opts.Env["NCCL_DEBUG"] = "WARN"
			c.mutate(tree, &opts)
			r := runTree(t, tree, opts)
			bad := 0
			for _, w := range c.want {
				assertFinding(t, r, w)
				if w.status == Warn || w.status == Fail {
					bad++
				}
			}
			if s := r.Summary(); s.Warn+s.Fail != bad {
				logReport(t, r)
				t.Errorf("%d WARN + %d FAIL, want %d", s.Warn, s.Fail, bad)
			}
		})
	}
}

// TestNoDriverWarnings: the LAG's second function and the host functions a
// pod sees without owning them are not unbound NICs.
func TestNoDriverWarnings(t *testing.T) {
	for name, tree := range map[string]*hosttree.Tree{"bond": hosttree.RoCEBond("n"), "vf pod": hosttree.VFPod("n")} {
		if got := runTree(t, tree, Options{}).Find("pci.driver", ""); len(got) != 0 {
			t.Errorf("%s: %+v", name, got)
		}
	}
}
