package live

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/rdmabench/rdmabench/ethside"
)

// writeTree writes files (path relative to root -> content) under root.
func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHCATemp(t *testing.T) {
	sys := t.TempDir()
	hw := "class/net/eth2/device/hwmon/hwmon3/"
	writeTree(t, sys, map[string]string{
		hw + "temp1_input": "41000", hw + "temp1_label": "sensor0",
		hw + "temp2_input": "58500", hw + "temp2_label": "asic",
		hw + "temp2_crit": "105000", hw + "temp2_max": "95000",
		"class/net/eth3/device/hwmon/hwmon1/temp1_input": "not a number",
	})
	p := &problems{}
	s := hcaTemp(sys, "eth2", p)
	if s == nil || s.Label != "asic" || s.C != 58.5 || *s.CritC != 105 || *s.MaxC != 95 {
		t.Fatalf("eth2 sensor %+v, want asic 58.5 crit 105 max 95", s)
	}
	if hcaTemp(sys, "eth9", p) != nil || len(p.lines) != 0 {
		t.Fatalf("no hwmon: want nil and no problem, got %v", p.lines)
	}
	if hcaTemp(sys, "eth3", p) != nil || len(p.lines) != 1 {
		t.Fatalf("bad temp1_input: want nil and one problem, got %v", p.lines)
	}
}

func TestSysfsQoS(t *testing.T) {
	sys := t.TempDir()
	ecn := "class/net/eth2/ecn/roce_np/enable/"
	files := map[string]string{"class/net/eth4/qos/trust": "Priority trust state: dscp"}
	for prio, v := range []string{"0", "0", "0", "1", "0", "0", "0", "0"} {
		files[ecn+string(rune('0'+prio))] = v
	}
	writeTree(t, sys, files)
	pfc := &[8]bool{3: true}
	for _, c := range []struct {
		name, iface string
		in          *ethside.DCB
		wantTrust   string
		wantECN     *[8]bool
		wantNil     bool
	}{
		{"ECN, no DCB answer", "eth2", nil, "", &[8]bool{3: true}, false},
		{"DSCP APP entries mean dscp", "eth9", &ethside.DCB{PFCEnabled: pfc, DSCPPrio: map[int]int{26: 3}}, "dscp", nil, false},
		{"PFC without DSCP entries means pcp", "eth9", &ethside.DCB{PFCEnabled: pfc}, "pcp", nil, false},
		{"OFED trust file wins", "eth4", &ethside.DCB{PFCEnabled: pfc}, "dscp", nil, false},
		{"nothing at all", "eth9", nil, "", nil, true},
	} {
		p := &problems{}
		d := withSysfsQoS(c.in, sys, c.iface, p)
		if len(p.lines) != 0 {
			t.Errorf("%s: problems %v", c.name, p.lines)
		}
		if (d == nil) != c.wantNil {
			t.Errorf("%s: DCB %+v, want nil %v", c.name, d, c.wantNil)
			continue
		}
		if d != nil && (d.Trust != c.wantTrust || !reflect.DeepEqual(d.ECN, c.wantECN)) {
			t.Errorf("%s: trust %q ECN %v, want %q %v", c.name, d.Trust, d.ECN, c.wantTrust, c.wantECN)
		}
	}
}

func TestCores(t *testing.T) {
	sys := t.TempDir()
	writeTree(t, sys, map[string]string{
		"devices/system/cpu/online":                 "0-15,32-47",
		"devices/system/node/node1/cpulist":         "8-15,40-47",
		"class/net/eth2/device/numa_node":           "1",
		"class/net/eth3/device/numa_node":           "-1",
		"class/net/eth2/device/infiniband/mlx5_1/x": "",
	})
	for _, c := range []struct {
		iface        string
		host, onNode int
	}{{"eth2", 32, 16}, {"eth3", 32, 0}} {
		h, n := cores(sys, c.iface, &problems{})
		if h != c.host || n != c.onNode {
			t.Errorf("%s: cores %d on node %d, want %d %d", c.iface, h, n, c.host, c.onNode)
		}
	}
	if got := rdmaDevOf(sys, "eth2"); got != "mlx5_1" {
		t.Errorf("rdmaDevOf eth2 = %q, want mlx5_1", got)
	}
}

func TestCountCPUList(t *testing.T) {
	for in, want := range map[string]int{"0": 1, "0-3": 4, "0-3,8,10-11": 7, "": 0, "3-1": 0, "a-b": 0, "-1": 0} {
		if got := countCPUList(in); got != want {
			t.Errorf("countCPUList(%q) = %d, want %d", in, got, want)
		}
	}
}

func TestNetdevsOf(t *testing.T) {
	sys := t.TempDir()
	writeTree(t, sys, map[string]string{
		// rxe/mlx5 RoCE: gid_attrs/ndevs names the netdev per GID entry.
		"class/infiniband/rxe0/ports/1/gid_attrs/ndevs/0": "veth0",
		"class/infiniband/rxe0/ports/1/gid_attrs/ndevs/1": "veth0",
		"class/infiniband/rxe0/ports/1/gid_attrs/ndevs/2": "vlan10",
		// No GID names: the PCI function's net/.
		"class/infiniband/mlx5_0/ports/1/state":     "4: ACTIVE",
		"class/infiniband/mlx5_0/device/net/eth2/x": "",
	})
	for _, c := range []struct {
		dev     string
		want    []string
		wantErr bool
	}{
		{"rxe0", []string{"veth0", "vlan10"}, false},
		{"mlx5_0", []string{"eth2"}, false},
		{"mlx5_9", nil, true},
	} {
		got, err := NetdevsOf(sys, c.dev, 1)
		if (err != nil) != c.wantErr || (!c.wantErr && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("NetdevsOf(%s) = %v, %v; want %v, error %v", c.dev, got, err, c.want, c.wantErr)
		}
	}
}
