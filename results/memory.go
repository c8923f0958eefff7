package results

import "fmt"

// MemoryKind is where a side's buffers live.
type MemoryKind string

const (
	HostMemory MemoryKind = "host"
	GPUMemory  MemoryKind = "gpu"
)

// Registration is how GPU memory was registered with the NIC.
type Registration string

const (
	// RegDmabuf: ibv_reg_dmabuf_mr on the fd the CUDA driver exported.
	RegDmabuf Registration = "dma-buf"
	// RegPeerMemory: ibv_reg_mr on the device pointer, through a
	// peer-memory client (nvidia_peermem).
	RegPeerMemory Registration = "peer-memory"
)

// Memory names one side's registered memory: host memory and the NUMA node
// it is on, or a GPU and how its memory was registered.
type Memory struct {
	Kind MemoryKind `json:"kind"`
	// NodeAsked is the NUMA node asked for (--mem-node, else the NIC's);
	// nil when neither is known and the kernel chose.
	NodeAsked *int `json:"numa_node_asked,omitempty"`
	// Nodes is the node the pages were found on ("1"), or the share of each
	// ("0 (75%), 1 (25%)"); empty without NUMA support.
	Nodes     string `json:"numa_nodes,omitempty"`
	HugePages bool   `json:"hugepages,omitempty"` // 2 MiB pages
	// GPU is the device index, GPUPCI its PCI bus id (GPU memory only).
	GPU          *int         `json:"gpu,omitempty"`
	GPUPCI       string       `json:"gpu_pci,omitempty"`
	Registration Registration `json:"registration,omitempty"`
	// DmabufError is why dma-buf registration was not used, when peer
	// memory was.
	DmabufError string `json:"dmabuf_error,omitempty"`
	// FakeCUDA marks rdmabench's CPU stand-in for CUDA: not a GPU measurement.
	FakeCUDA bool `json:"fake_cuda,omitempty"`
}

// String is the memory as the header shows it.
func (m *Memory) String() string {
	if m == nil {
		return "host memory"
	}
	if m.Kind == GPUMemory {
		gpu := -1
		if m.GPU != nil {
			gpu = *m.GPU
		}
		s := fmt.Sprintf("GPU %d (%s), %s registration", gpu, m.GPUPCI, m.Registration)
		if m.FakeCUDA {
			s += " [CPU stand-in for CUDA: not a GPU measurement]"
		}
		return s
	}
	s := "host memory"
	switch {
	case m.Nodes != "":
		s += ", NUMA node " + m.Nodes
	case m.NodeAsked != nil:
		s += fmt.Sprintf(", NUMA node %d asked (placement unknown)", *m.NodeAsked)
	}
	if m.NodeAsked != nil && m.Nodes != "" && m.Nodes != fmt.Sprint(*m.NodeAsked) {
		s += fmt.Sprintf(" (asked for %d)", *m.NodeAsked)
	}
	if m.HugePages {
		s += ", 2 MiB huge pages"
	}
	return s
}
