package verbs

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// HostOptions place a host buffer.
type HostOptions struct {
	// Node is the NUMA node the pages should come from; -1 leaves it to the
	// kernel. The mapping's policy is MPOL_PREFERRED: a node without free memory
	// gives pages from another rather than failing, and Nodes reports what
	// was obtained.
	Node int
	// HugePages maps 2 MiB pages (MAP_HUGETLB); the size is rounded up to
	// 2 MiB. Fails with ErrNoHugePages when too few are free.
	HugePages bool
}

// HugePageSize is the huge page size --hugepages uses.
const HugePageSize = 2 << 20

// ErrNoHugePages says the 2 MiB huge page pool cannot hold the buffer.
var ErrNoHugePages = errors.New("not enough free 2 MiB huge pages")

// MPOL_PREFERRED (uapi/linux/mempolicy.h).
const mpolPreferred = 1

// maxNodes bounds the node numbers a mask can name.
const maxNodes = 1024

// mapHost maps and populates the memory. With a node, the mapping gets an
// MPOL_PREFERRED policy of its own (mbind) before any page is touched, then
// every page is faulted in (MADV_POPULATE_WRITE, as MAP_POPULATE would at
// mmap time, before the policy existed). A policy of its own also keeps the
// kernel from merging the mapping with its neighbours, so numa_maps shows it
// alone.
func mapHost(size int, o HostOptions) ([]byte, error) {
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if o.HugePages {
		size = (size + HugePageSize - 1) &^ (HugePageSize - 1)
		flags |= unix.MAP_HUGETLB | 21<<unix.MAP_HUGE_SHIFT
	}
	if o.Node >= maxNodes {
		return nil, fmt.Errorf("NUMA node %d outside 0..%d", o.Node, maxNodes-1)
	}
	if o.Node >= 0 {
		if _, err := os.Stat(fmt.Sprintf("/sys/devices/system/node/node%d", o.Node)); err != nil {
			return nil, fmt.Errorf("NUMA node %d does not exist on this host (nodes: %s)", o.Node, onlineNodes())
		}
	} else {
		flags |= unix.MAP_POPULATE // no policy to set first
	}
	data, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		// hugetlbfs reserves the pages at mmap time: too few free is ENOMEM here.
		if o.HugePages && errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("%w for %d bytes (%s): reserve at least %d with 'sysctl vm.nr_hugepages=N' or hugepages=N on the kernel command line (both sides' buffers in loopback)",
				ErrNoHugePages, size, hugePageCounts(), size/HugePageSize)
		}
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	if o.Node >= 0 {
		if err := preferNode(data, o.Node); err != nil {
			unix.Munmap(data)
			return nil, err
		}
	}
	return data, nil
}

// preferNode gives the mapping an MPOL_PREFERRED policy for node and faults
// every page in under it.
func preferNode(data []byte, node int) error {
	var mask [maxNodes / 64]uint64
	mask[node/64] |= 1 << (node % 64)
	_, _, en := unix.Syscall6(unix.SYS_MBIND, uintptr(unsafe.Pointer(&data[0])), uintptr(len(data)), mpolPreferred,
		uintptr(unsafe.Pointer(&mask[0])), maxNodes+1, 0)
	if en != 0 {
		return fmt.Errorf("mbind %d bytes to NUMA node %d: %w", len(data), node, en)
	}
	if err := unix.Madvise(data, unix.MADV_POPULATE_WRITE); err != nil {
		if !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("madvise(MADV_POPULATE_WRITE) %d bytes: %w", len(data), err)
		}
		// Before Linux 5.14: fault each page in by writing it.
		for i := 0; i < len(data); i += os.Getpagesize() {
			data[i] = 0
		}
	}
	return nil
}

// hugePageCounts reads the 2 MiB pool's size and free pages for an error.
func hugePageCounts() string {
	read := func(f string) string {
		b, err := os.ReadFile("/sys/kernel/mm/hugepages/hugepages-2048kB/" + f)
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s reserved, %s free", read("nr_hugepages"), read("free_hugepages"))
}

func onlineNodes() string {
	b, err := os.ReadFile("/sys/devices/system/node/online")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// NodeShare is how many of a buffer's sampled pages lie on one NUMA node.
type NodeShare struct {
	Node  int
	Pages int
}

// Nodes reports the NUMA nodes the buffer's pages are on (move_pages with no
// target nodes only queries), most pages first, from up to 4096 pages spread
// over the buffer. Empty when the kernel has no NUMA support.
func (b *Buffer) Nodes() ([]NodeShare, error) {
	if b.res.isClosed() {
		return nil, ErrClosed
	}
	return pageNodes(b.data)
}

func pageNodes(data []byte) ([]NodeShare, error) {
	pg := os.Getpagesize()
	n := (len(data) + pg - 1) / pg
	step := max(1, n/4096)
	var pages []uintptr
	for i := 0; i < n; i += step {
		pages = append(pages, uintptr(unsafe.Pointer(&data[i*pg])))
	}
	status := make([]int32, len(pages))
	_, _, en := unix.Syscall6(unix.SYS_MOVE_PAGES, 0, uintptr(len(pages)), uintptr(unsafe.Pointer(&pages[0])),
		0, uintptr(unsafe.Pointer(&status[0])), 0)
	runtime.KeepAlive(data)
	if en == unix.ENOSYS {
		return nil, nil
	}
	if en != 0 {
		return nil, fmt.Errorf("move_pages (query): %w", en)
	}
	count := map[int]int{}
	for _, s := range status {
		if s >= 0 {
			count[int(s)]++
		}
	}
	var out []NodeShare
	for node, c := range count {
		out = append(out, NodeShare{node, c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pages != out[j].Pages {
			return out[i].Pages > out[j].Pages
		}
		return out[i].Node < out[j].Node
	})
	return out, nil
}

// FormatNodes writes node shares as "0" or "0 (75%), 1 (25%)".
func FormatNodes(shares []NodeShare) string {
	total := 0
	for _, s := range shares {
		total += s.Pages
	}
	if len(shares) == 1 {
		return strconv.Itoa(shares[0].Node)
	}
	var parts []string
	for _, s := range shares {
		parts = append(parts, fmt.Sprintf("%d (%d%%)", s.Node, s.Pages*100/max(1, total)))
	}
	return strings.Join(parts, ", ")
}
