package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// memoryFlags say where each side's buffers are: GPU or host memory, its
// NUMA node, huge pages, dma-buf.
type memoryFlags struct {
	useCuda, peerUseCuda *string
	useDmabuf, hugePages *bool
	memNode, peerMemNode *int
}

func addMemoryFlags(fs *pflag.FlagSet) memoryFlags {
	return memoryFlags{
		useCuda:     fs.String("use-cuda", "", "put this side's buffers in GPU memory: a device index or PCI bus id (as perftest's --use_cuda); registered by dma-buf, else peer memory (nvidia_peermem)"),
		peerUseCuda: fs.String("peer-use-cuda", "", "put the other side's buffers (the server's, or the loopback peer's) in GPU memory"),
		useDmabuf:   fs.Bool("use-dmabuf", false, "register GPU memory by dma-buf only: fail instead of falling back to peer memory (as perftest's --use_cuda_dmabuf)"),
		memNode:     fs.Int("mem-node", -1, "put this side's host buffers on this NUMA node (default: the NIC's node)"),
		peerMemNode: fs.Int("peer-mem-node", -1, "put the other side's host buffers on this NUMA node (default: its NIC's node)"),
		hugePages:   fs.Bool("hugepages", false, "map host buffers in 2 MiB huge pages (reserve them first: sysctl vm.nr_hugepages=N)"),
	}
}

// specs are this side's memory and the peer's.
func (mf memoryFlags) specs(fs *pflag.FlagSet) (mine, peer engine.MemorySpec, err error) {
	switch {
	case *mf.useDmabuf && *mf.useCuda == "" && *mf.peerUseCuda == "":
		return mine, peer, errors.New("--use-dmabuf registers GPU memory: give --use-cuda or --peer-use-cuda")
	case *mf.hugePages && *mf.useCuda != "" && *mf.peerUseCuda != "":
		return mine, peer, errors.New("--hugepages maps host memory, and both sides' buffers are on GPUs")
	}
	if mine, err = memorySpec(fs, "", *mf.useCuda, *mf.memNode, *mf.useDmabuf, *mf.hugePages); err != nil {
		return mine, peer, err
	}
	peer, err = memorySpec(fs, "peer-", *mf.peerUseCuda, *mf.peerMemNode, *mf.useDmabuf, *mf.hugePages)
	return mine, peer, err
}

// memorySpec builds one side's memory from its flags (prefix "" for this
// side, "peer-" for the other). --use-dmabuf and --hugepages apply to every
// side whose memory they can: dma-buf to GPU memory, huge pages to host
// memory.
func memorySpec(fs *pflag.FlagSet, prefix, gpu string, node int, dmabuf, huge bool) (engine.MemorySpec, error) {
	m := engine.MemorySpec{GPU: gpu}
	if fs.Changed(prefix+"use-cuda") && gpu == "" {
		return m, fmt.Errorf("--%suse-cuda needs a GPU: a device index or a PCI bus id", prefix)
	}
	if fs.Changed(prefix + "mem-node") {
		if gpu != "" {
			return m, fmt.Errorf("--%smem-node places host memory; --%suse-cuda %s puts it on the GPU", prefix, prefix, gpu)
		}
		if node < 0 || node > 1023 {
			return m, fmt.Errorf("--%smem-node %d outside 0..1023", prefix, node)
		}
		// This side's node is known here; the peer's is the peer's to check.
		if nodes, known := rdmasys.OnlineNodes("/sys"); prefix == "" && known && !slices.Contains(nodes, node) {
			return m, fmt.Errorf("--mem-node %d: no such NUMA node on this host (online: %s)", node, strings.ReplaceAll(strings.Trim(fmt.Sprint(nodes), "[]"), " ", ","))
		}
		m.Node = &node
	}
	if gpu != "" {
		m.Dmabuf = dmabuf
	} else {
		m.HugePages = huge
	}
	return m, nil
}
