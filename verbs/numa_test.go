package verbs

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// guestWants reports whether the rxe guest was booted with a kernel argument
// (ci/rxe-run --numa N adds rxe.numa=N, --hugepages N adds hugepages=N):
// there the test must run, not skip.
func guestWants(arg string) bool {
	b, _ := os.ReadFile("/proc/cmdline")
	return strings.Contains(" "+string(b), " "+arg)
}

func onlineNodeCount() int {
	n := 0
	for i := 0; i < 64; i++ {
		if _, err := os.Stat(fmt.Sprintf("/sys/devices/system/node/node%d", i)); err == nil {
			n++
		}
	}
	return n
}

// numaMapsLine is /proc/self/numa_maps' line of the mapping at addr.
func numaMapsLine(t *testing.T, addr uint64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/numa_maps")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("%x ", addr)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("no numa_maps line for %#x", addr)
	return ""
}

var numaMapsNode = regexp.MustCompile(`\bN(\d+)=(\d+)`)

// TestHostBufferNUMAMaps checks the placement against the kernel's own
// account (numa_maps), on every node: the policy is prefer:N and every page
// is on N, and Nodes says the same.
func TestHostBufferNUMAMaps(t *testing.T) {
	nodes := onlineNodeCount()
	if nodes < 2 {
		if guestWants("rxe.numa=") {
			t.Fatalf("guest booted with NUMA nodes, but %d online", nodes)
		}
		t.Skip("one NUMA node (ci/rxe-run --numa 2 makes more)")
	}
	for node := 0; node < nodes; node++ {
		t.Run(fmt.Sprint("node", node), func(t *testing.T) {
			b, err := AllocHostBuffer(4<<20, HostOptions{Node: node})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			line := numaMapsLine(t, b.Addr())
			if !strings.Contains(line, fmt.Sprintf("prefer:%d ", node)) {
				t.Errorf("policy not prefer:%d: %s", node, line)
			}
			m := numaMapsNode.FindAllStringSubmatch(line, -1)
			if len(m) != 1 || m[0][1] != fmt.Sprint(node) || m[0][2] != "1024" {
				t.Errorf("pages not all on node %d: %s", node, line)
			}
			shares, err := b.Nodes()
			if err != nil || len(shares) != 1 || shares[0].Node != node {
				t.Errorf("Nodes() = %v, %v; want node %d", shares, err, node)
			}
		})
	}
}

// TestHugePagesReserved: in a guest with reserved 2 MiB pages the buffer
// gets them (numa_maps says huge), rounded up to whole pages.
func TestHugePagesReserved(t *testing.T) {
	b, err := AllocHostBuffer(HugePageSize+1, HostOptions{Node: -1, HugePages: true})
	if err != nil {
		if guestWants("hugepages=") {
			t.Fatalf("guest reserved huge pages, but: %v", err)
		}
		t.Skipf("no huge pages reserved here (ci/rxe-run --hugepages N): %v", err)
	}
	defer b.Close()
	if b.Len() != 2*HugePageSize {
		t.Errorf("%d bytes, want %d", b.Len(), 2*HugePageSize)
	}
	if line := numaMapsLine(t, b.Addr()); !strings.Contains(line, "huge") || !strings.Contains(line, "kernelpagesize_kB=2048") {
		t.Errorf("not huge pages: %s", line)
	}
}
