package rdmasys

import (
	"path/filepath"
	"strings"
	"testing"
)

// TellIWARP on trees as the kernel lays them out, each device without its
// node_type unless the case is about it: what else tells iWARP, and what
// must not.
func TestTellIWARP(t *testing.T) {
	const (
		pci   = "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"
		gidV1 = "IB/RoCE v1"
		mac   = "b496:91a1:b2c3:0000:0000:0000:0000:0000"
		v2ll  = "fe80:0000:0000:0000:b696:91ff:fea1:b2c3"
	)
	// dev lays out a device as the kernel does, under parent (a PCI
	// function, an auxiliary device below it, or devices/virtual) bound to
	// driver ("" for none), with the files given (relative to the device). The driver's
	// own directory is not in the tree, as captures leave it out.
	dev := func(name, parent, driver string, files map[string]string) map[string]string {
		real := parent + "/infiniband/" + name
		tree := map[string]string{
			"class/infiniband/" + name: "->../../" + real,
			real + "/ports/1/state":    "4: ACTIVE",
		}
		if parent != "devices/virtual" { // a software device has no parent
			tree[real+"/device"] = "->../../../" + filepath.Base(parent)
		}
		if driver != "" {
			up, bus := strings.Repeat("../", strings.Count(parent, "/")+1), "pci"
			if parent != pci {
				bus = "auxiliary"
			}
			tree[parent+"/driver"] = "->" + up + "bus/" + bus + "/drivers/" + driver
		}
		for p, c := range files {
			tree[real+"/"+p] = c
		}
		return tree
	}
	gids := func(entries ...[2]string) map[string]string {
		f := map[string]string{"ports/1/link_layer": "Ethernet"}
		for i, e := range entries {
			f["ports/1/gids/"+string(rune('0'+i))] = e[0]
			if e[1] != "" {
				f["ports/1/gid_attrs/types/"+string(rune('0'+i))] = e[1]
			}
		}
		return f
	}
	tests := []struct {
		name   string
		tree   map[string]string
		dev    string
		want   bool
		by     ClueKind
		path   string // the clue's file, relative to the device
		String string
	}{
		{"node_type RNIC", dev("iw0", pci, "", map[string]string{"node_type": "4: RNIC"}), "iw0", true, ClueNodeType, "node_type", "node type 4: RNIC"},
		{"node_type CA decides over hca_type", dev("mlx5_0", pci, "", map[string]string{"node_type": "1: CA", "hca_type": "I40IW"}), "mlx5_0", false, ClueNodeType, "", ""},
		{"i40iw's hca_type", dev("i40iw0", pci, "", map[string]string{"hca_type": "I40IW"}), "i40iw0", true, ClueHCAType, "hca_type", "hca_type I40IW; no node_type in the capture"},
		{"iw_cxgb4's hca_type", dev("cxgb4_0", pci, "", map[string]string{"hca_type": "cxgb4"}), "cxgb4_0", true, ClueHCAType, "hca_type", "hca_type cxgb4; no node_type in the capture"},
		{"qedr in iWARP mode", dev("qedr0", pci, "", map[string]string{"hca_type": "FastLinQ QL8070 iWARP"}), "qedr0", true, ClueHCAType, "hca_type", "hca_type FastLinQ QL8070 iWARP; no node_type in the capture"},
		{"qedr in RoCE mode", dev("qedr0", pci, "cxgb4", map[string]string{"hca_type": "FastLinQ QL8070 RoCE"}), "qedr0", false, ClueNone, "", ""},
		{"mlx5's hca_type", dev("mlx5_0", pci, "mlx5_core", map[string]string{"hca_type": "MT4123"}), "mlx5_0", false, ClueNone, "", ""},
		{"siw's node_desc", dev("siw0", "devices/virtual", "", map[string]string{"node_desc": "Software iWARP stack"}), "siw0", true, ClueNodeDesc, "node_desc", "node_desc Software iWARP stack; no node_type in the capture"},
		{"Chelsio by its driver", dev("iwp59s0f4", pci, "cxgb4", nil), "iwp59s0f4", true, ClueDriver, "device/driver", "driver cxgb4, RDMA by iw_cxgb4; no node_type in the capture"},
		{"X722 by its driver", dev("iwp59s0f0", pci, "i40e", nil), "iwp59s0f0", true, ClueDriver, "device/driver", "driver i40e, RDMA by i40iw or irdma; no node_type in the capture"},
		// An older kernel hangs rxe from its netdev's function: the
		// function's driver says nothing of it.
		{"rxe on an X722's netdev", dev("rxe0", pci, "i40e", map[string]string{"parent": "eno1"}), "rxe0", false, ClueNone, "", ""},
		{"irdma under ice.iwarp", dev("iwp59s0f0", pci+"/ice.iwarp.0", "irdma", gids([2]string{v2ll, "RoCE v2"})), "iwp59s0f0", true, ClueParent, "device", "parent device ice.iwarp.0; no node_type in the capture"},
		{"irdma under ice.roce", dev("rocep59s0f0", pci+"/ice.roce.0", "irdma", gids([2]string{mac, gidV1})), "rocep59s0f0", false, ClueNone, "", ""},
		{"irdma on the PCI function, iWARP GIDs", dev("irdma0", pci, "ice", gids([2]string{mac, gidV1})), "irdma0", true, ClueGIDTypes, "ports/1/gid_attrs/types/0", "irdma with iWARP GIDs and no RoCE v2 one: port 1 gid 0 IB/RoCE v1; no node_type in the capture"},
		{"irdma on the PCI function, RoCE v2 GIDs", dev("irdma0", pci, "ice", gids([2]string{v2ll, "RoCE v2"}, [2]string{mac, gidV1})), "irdma0", false, ClueNone, "", ""},
		// Without the type files the GIDs could be either.
		{"irdma, GIDs without types", dev("irdma0", pci, "ice", gids([2]string{mac, ""})), "irdma0", false, ClueNone, "", ""},
		{"no clue at all", dev("dev0", pci, "", nil), "dev0", false, ClueNone, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeTree(t, tt.tree)
			d, err := ReadDevice(root, tt.dev)
			if err != nil {
				t.Fatal(err)
			}
			c, ok := TellIWARP(root, d)
			if ok != tt.want || (ok && (c.By != tt.by || c.String() != tt.String)) {
				t.Fatalf("%v %+v (%s), want %v by %v %q", ok, c, c, tt.want, tt.by, tt.String)
			}
			if ok && c.Path != filepath.Join(DevicePath(root, tt.dev), tt.path) {
				t.Errorf("path %s, want the device's %s", c.Path, tt.path)
			}
		})
	}
}
