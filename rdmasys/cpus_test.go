package rdmasys

import (
	"reflect"
	"testing"
)

func TestNUMAPlacement(t *testing.T) {
	root := writeTree(t, map[string]string{
		"class/infiniband/mlx5_0/device/numa_node": "1",
		"class/infiniband/rxe0/ports/1/state":      "4: ACTIVE",
		"devices/system/node/node1/cpulist":        "8-11,24",
	})
	if n := DeviceNUMANode(root, "mlx5_0"); n != 1 {
		t.Errorf("mlx5_0 node %d, want 1", n)
	}
	if n := DeviceNUMANode(root, "rxe0"); n != -1 {
		t.Errorf("rxe0 (no PCI device) node %d, want -1", n)
	}
	cpus, err := NodeCPUs(root, 1)
	if err != nil || !reflect.DeepEqual(cpus, []int{8, 9, 10, 11, 24}) {
		t.Errorf("node 1 CPUs %v %v", cpus, err)
	}
	if _, err := NodeCPUs(root, 3); err == nil {
		t.Error("missing node accepted")
	}
	if _, err := ParseCPUList("2-1"); err == nil {
		t.Error("descending range accepted")
	}
}
