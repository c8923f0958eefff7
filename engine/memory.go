package engine

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/cuda"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/results"
	"github.com/rdmabench/rdmabench/verbs"
)

// sideMemory is a side's one buffer: host memory (host) or GPU memory (gpu),
// never both, and how it is described in the header and JSON. The side's MR
// is registered on it; the side closes the MR before the memory.
type sideMemory struct {
	host *verbs.Buffer
	gpu  *cuda.Buffer
	desc results.Memory
}

// allocMemory allocates size bytes as spec says and registers them. notes
// receives the lines the header should show (a dma-buf fallback, a node
// other than the one asked for).
func allocMemory(pd *verbs.PD, device string, size int, spec MemorySpec, access verbs.Access) (*sideMemory, *verbs.MR, []string, error) {
	if spec.OnGPU() {
		return allocGPU(pd, device, size, spec, access)
	}
	m := &sideMemory{desc: results.Memory{Kind: results.HostMemory, HugePages: spec.HugePages}}
	node := -1
	if spec.Node != nil {
		node = *spec.Node
	} else if n := rdmasys.DeviceNUMANode(verbs.SysfsRoot, device); n >= 0 {
		node = n
	}
	if node >= 0 {
		m.desc.NodeAsked = &node
	}
	var err error
	if m.host, err = verbs.AllocHostBuffer(size, verbs.HostOptions{Node: node, HugePages: spec.HugePages}); err != nil {
		return nil, nil, nil, err
	}
	var notes []string
	if shares, err := m.host.Nodes(); err != nil {
		notes = append(notes, fmt.Sprintf("NUMA placement of the buffer unknown: %v", err))
	} else if len(shares) > 0 {
		m.desc.Nodes = verbs.FormatNodes(shares)
		if node >= 0 && (len(shares) > 1 || shares[0].Node != node) {
			notes = append(notes, fmt.Sprintf("buffer pages on NUMA node %s, not %d as asked: that node lacked free memory", m.desc.Nodes, node))
		}
	}
	mr, err := pd.RegisterMR(m.host, access)
	if err != nil {
		m.close()
		return nil, nil, nil, err
	}
	return m, mr, notes, nil
}

// allocGPU allocates GPU memory and registers it: dma-buf first, then peer
// memory unless spec.Dmabuf requires dma-buf. A failure names the path that
// failed, why, and what to do, in one line.
func allocGPU(pd *verbs.PD, device string, size int, spec MemorySpec, access verbs.Access) (*sideMemory, *verbs.MR, []string, error) {
	lib, err := cuda.Load()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("GPU %s: %w", spec.GPU, err)
	}
	dev, bus, err := lib.Device(spec.GPU) // its errors name the GPU
	if err != nil {
		return nil, nil, nil, err
	}
	m := &sideMemory{desc: results.Memory{Kind: results.GPUMemory, GPU: &dev, GPUPCI: bus, FakeCUDA: lib.Fake}}
	if m.gpu, err = lib.Alloc(dev, size); err != nil {
		return nil, nil, nil, err
	}
	what := fmt.Sprintf("GPU %d (%s) memory on %s", dev, bus, device)
	var notes []string
	mr, dmaErr := registerDmabuf(pd, m.gpu, size, access, device)
	if dmaErr == nil {
		m.desc.Registration = results.RegDmabuf
	} else if spec.Dmabuf {
		m.close()
		return nil, nil, nil, fmt.Errorf("%s: dma-buf registration failed (--use-dmabuf allows no other): %w", what, dmaErr)
	} else {
		var peerErr error
		if mr, peerErr = pd.RegisterAddr(m.gpu.Ptr(), size, access); peerErr != nil {
			m.close()
			return nil, nil, nil, fmt.Errorf("%s: peer-memory registration (ibv_reg_mr on the device pointer) failed: %w: %s; dma-buf registration failed before: %v",
				what, peerErr, peerMemoryRemedy(peerErr), dmaErr)
		}
		m.desc.Registration, m.desc.DmabufError = results.RegPeerMemory, dmaErr.Error()
		notes = append(notes, fmt.Sprintf("%s: dma-buf registration failed, using peer memory: %v", what, dmaErr))
	}
	// Only now: the CPU stand-in takes its own CPU mapping away here, and
	// nothing may touch the memory but the NIC and cudaMemcpy from now on.
	if err := m.gpu.SyncMemops(); err != nil {
		mr.Close()
		m.close()
		return nil, nil, nil, err
	}
	return m, mr, notes, nil
}

// registerDmabuf exports the buffer as a dma-buf and registers it; the error
// says which step failed and the remedy.
func registerDmabuf(pd *verbs.PD, b *cuda.Buffer, size int, access verbs.Access, device string) (*verbs.MR, error) {
	fd, err := b.DmabufFD()
	if err != nil {
		return nil, fmt.Errorf("%w: the CUDA driver cannot export dma-buf (it needs CUDA 11.7+, the open GPU kernel modules and Linux 5.12+)", err)
	}
	// The MR holds its own reference to the dma-buf.
	defer unix.Close(fd)
	mr, err := pd.RegisterDmabuf(fd, 0, size, uint64(b.Ptr()), access)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", err, dmabufRemedy(err, device))
	}
	return mr, nil
}

func dmabufRemedy(err error, device string) string {
	var en syscall.Errno
	errors.As(err, &en)
	switch en {
	case unix.EOPNOTSUPP, unix.ENOSYS, unix.EPROTONOSUPPORT:
		return fmt.Sprintf("the RDMA driver of %s cannot import dma-buf (it needs Linux 5.12+, rdma-core 34+ and a driver with dma-buf support, such as mlx5)", device)
	case unix.ENOMEM:
		return "raise the locked-memory limit (ulimit -l unlimited)"
	}
	return "the GPU and the NIC may not be on a path where GPUDirect RDMA is allowed (rdmabench doctor checks the PCIe path, ACS and the IOMMU)"
}

// peermemLoaded reports whether the nvidia_peermem module is loaded.
func peermemLoaded() bool {
	_, err := os.Stat("/sys/module/nvidia_peermem")
	return err == nil
}

func peerMemoryRemedy(err error) string {
	var en syscall.Errno
	errors.As(err, &en)
	switch {
	case en == unix.ENOMEM:
		return "raise the locked-memory limit (ulimit -l unlimited)"
	case !peermemLoaded():
		return "load nvidia_peermem (modprobe nvidia_peermem), or use a driver and kernel with dma-buf"
	}
	return "nvidia_peermem is loaded: the GPU and the NIC may not be on a path where GPUDirect RDMA is allowed (rdmabench doctor checks the PCIe path, ACS and the IOMMU)"
}

// read copies n bytes at off out of the memory: a view for host memory, a
// cudaMemcpy for GPU memory.
func (m *sideMemory) read(off, n int) ([]byte, error) {
	if m.gpu == nil {
		return m.host.Bytes()[off : off+n], nil
	}
	out := make([]byte, n)
	return out, m.gpu.CopyOut(out, off)
}

// write copies data to off.
func (m *sideMemory) write(off int, data []byte) error {
	if m.gpu == nil {
		copy(m.host.Bytes()[off:], data)
		return nil
	}
	return m.gpu.CopyIn(off, data)
}

// close frees the memory (closing a host buffer deregisters its MR first;
// GPU memory's MR must be closed by the caller before).
func (m *sideMemory) close() {
	if m == nil {
		return
	}
	if m.host != nil {
		m.host.Close()
	}
	if m.gpu != nil {
		m.gpu.Close()
	}
}
