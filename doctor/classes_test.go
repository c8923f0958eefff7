package doctor

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/doctor/internal/hosttree"
)

// classCase is one misreading seen on a tree captured from a real host:
// the finding a careful reader expects, and no FAIL elsewhere unless
// listed.
type classCase struct {
	name  string
	root  func(t *testing.T) string // a tree with sys/, proc/, dev/
	env   map[string]string
	want  []want
	fails []string
	// source, when set, is the Source of want[0]'s finding, relative to
	// the tree's sys/.
	source string
}

// hgxRoot writes a generated HGX node, edited.
func hgxRoot(edit func(*hosttree.Tree)) func(t *testing.T) string {
	return func(t *testing.T) string {
		tree := hosttree.HGX("node01")
		edit(tree)
		root := t.TempDir()
		if err := tree.Write(root); err != nil {
			t.Fatal(err)
		}
		return root
	}
}

// treeRoot writes a generated host, edited (nil: as built).
func treeRoot(build func(string) *hosttree.Tree, edit func(*hosttree.Tree)) func(t *testing.T) string {
	return func(t *testing.T) string {
		tree := build("node01")
		if edit != nil {
			edit(tree)
		}
		root := t.TempDir()
		if err := tree.Write(root); err != nil {
			t.Fatal(err)
		}
		return root
	}
}

// withoutFiles removes a device's files as a capture that left them out.
func withoutFiles(dev string, files ...string) func(*hosttree.Tree) {
	return func(t *hosttree.Tree) {
		for _, f := range files {
			t.Remove(hosttree.DevDir(dev) + "/" + f)
		}
	}
}

// e810 is an E810 whose irdma device runs mode, below ice's auxiliary
// device or (underPCI) the PCI function.
func e810(mode string, underPCI bool) func(string) *hosttree.Tree {
	return func(h string) *hosttree.Tree { return hosttree.E810(h, mode, underPCI) }
}

func rxeWith(edits map[string]string) func(t *testing.T) string {
	return func(t *testing.T) string { return fixtureWith(t, "rxe", edits) }
}

var classCases = []classCase{
	{
		// A capture without sys/module and class/infiniband_verbs cannot
		// show what is loaded: SKIP, not FAIL "not loaded".
		name: "capture without module/",
		root: rxeWith(map[string]string{"sys/module": "", "sys/class/infiniband_verbs": ""}),
		want: []want{
			{"rdma.modules", "host", Skip, "module/ missing"},
			{"rdma.uverbs", "host", Skip, "class/infiniband_verbs and module/ missing"},
		},
	},
	{
		name: "capture without dev/",
		root: rxeWith(map[string]string{"dev": ""}),
		want: []want{{"rdma.uverbs", "rxe0", Skip, "uverbs0 bound; not in this tree (dev/ missing"}},
	},
	{
		// Some drivers write the logical state into phys_state.
		name: "phys_state 4: ACTIVE",
		root: rxeWith(map[string]string{"sys/class/infiniband/rxe0/ports/1/phys_state": "4: ACTIVE"}),
		want: []want{{"port.state", "rxe0:1", Pass, "ACTIVE implies the link is up"}},
	},
	{
		name: "hardware HCA without its device link",
		root: hgxRoot(func(t *hosttree.Tree) { t.Remove(hosttree.DevDir("mlx5_0") + "/device") }),
		env:  hosttree.HGXEnv(),
		want: []want{{"pci.link", "mlx5_0", Skip, "hardware device without its PCI function here"}},
	},
	{
		// RLIM_INFINITY rounded to MiB by a container runtime.
		name: "memlock 18446744073708503040",
		root: rxeWith(map[string]string{"proc/self/limits": "Limit                     Soft Limit           Hard Limit           Units\n" +
			"Max locked memory         18446744073708503040 18446744073708503040 bytes"}),
		want: []want{{"host.memlock", "host", Pass, "soft unlimited, hard unlimited"}},
	},
	{
		name: "NCCL_IB_HCA empty",
		root: rxeWith(nil),
		env:  map[string]string{"NCCL_IB_HCA": ""},
		want: []want{
			{"nccl.ib_hca", "NCCL_IB_HCA", Info, "set but empty: NCCL reads it as unset and uses every RDMA device"},
			{"port.state", "rxe0:1", Pass, "ACTIVE, LinkUp"},
		},
	},
	{
		// mlx5_8 is a storage NIC outside NCCL_IB_HCA: its state and
		// rate are INFO, so are its counters.
		name: "counters on a port NCCL does not use",
		root: hgxRoot(func(t *hosttree.Tree) {
			t.File(t.PortDir("mlx5_8", 1)+"/counters/symbol_error", "7")
			t.File(t.PortDir("mlx5_8", 1)+"/counters/port_rcv_errors", "0")
		}),
		env:  hosttree.HGXEnv(),
		want: []want{{"port.counters", "mlx5_8:1", Info, "symbol_error=7 (not used by NCCL: not in NCCL_IB_HCA)"}},
	},
	{
		name:  "iWARP device in NCCL_IB_HCA",
		root:  rxeWith(map[string]string{"sys/class/infiniband/rxe0/node_type": "4: RNIC"}),
		env:   map[string]string{"NCCL_IB_HCA": "rxe0"},
		want:  []want{{"nccl.iwarp", "rxe0", Fail, "cannot connect over it without rdma_cm"}},
		fails: []string{"nccl.iwarp rxe0"},
	},
	{
		// node_exporter's capture (corpus/node-exporter-iwarp-bond) has no
		// node_type for its X722 iWARP i40iw0; i40iw's hca_type tells.
		name: "iWARP device without node_type in NCCL_IB_HCA",
		root: func(*testing.T) string {
			return filepath.Join("testdata", "corpus", "node-exporter-iwarp-bond")
		},
		env:    map[string]string{"NCCL_IB_HCA": "i40iw0"},
		want:   []want{{"nccl.iwarp", "i40iw0", Fail, "iWARP device (hca_type I40IW; no node_type in the capture): NCCL's IB transport cannot connect"}},
		fails:  []string{"nccl.iwarp i40iw0"},
		source: "class/infiniband/i40iw0/hca_type",
	},
	{
		name: "iWARP device without node_type, NCCL_IB_HCA unset",
		root: func(*testing.T) string {
			return filepath.Join("testdata", "corpus", "node-exporter-iwarp-bond")
		},
		want: []want{{"nccl.iwarp", "i40iw0", Warn, "iWARP device (hca_type I40IW; no node_type in the capture)"}},
	},
	{
		// The generated real layouts, with what an exporter leaves out
		// taken away: node_type, then hca_type too.
		name:   "Chelsio T6 without node_type",
		root:   treeRoot(hosttree.ChelsioT6, withoutFiles("cxgb4_0", "node_type")),
		env:    map[string]string{"NCCL_IB_HCA": "cxgb4_0"},
		want:   []want{{"nccl.iwarp", "cxgb4_0", Fail, "iWARP device (hca_type cxgb4; no node_type in the capture)"}},
		fails:  []string{"nccl.iwarp cxgb4_0"},
		source: "class/infiniband/cxgb4_0/hca_type",
	},
	{
		name:   "Chelsio T6 without node_type and hca_type",
		root:   treeRoot(hosttree.ChelsioT6, withoutFiles("cxgb4_0", "node_type", "hca_type")),
		env:    map[string]string{"NCCL_IB_HCA": "cxgb4_0"},
		want:   []want{{"nccl.iwarp", "cxgb4_0", Fail, "iWARP device (driver cxgb4, RDMA by iw_cxgb4; no node_type in the capture)"}},
		fails:  []string{"nccl.iwarp cxgb4_0"},
		source: "class/infiniband/cxgb4_0/device/driver",
	},
	{
		name:   "E810 irdma in iWARP mode without node_type",
		root:   treeRoot(e810("iwarp", false), withoutFiles("irdma0", "node_type")),
		env:    map[string]string{"NCCL_IB_HCA": "irdma0"},
		want:   []want{{"nccl.iwarp", "irdma0", Fail, "iWARP device (parent device ice.iwarp.0; no node_type in the capture)"}},
		fails:  []string{"nccl.iwarp irdma0"},
		source: "class/infiniband/irdma0/device",
	},
	{
		name:   "E810 irdma in iWARP mode on an older kernel, without node_type",
		root:   treeRoot(e810("iwarp", true), withoutFiles("irdma0", "node_type")),
		env:    map[string]string{"NCCL_IB_HCA": "irdma0"},
		want:   []want{{"nccl.iwarp", "irdma0", Fail, "iWARP device (irdma with iWARP GIDs and no RoCE v2 one: port 1 gid 0 IB/RoCE v1; no node_type in the capture)"}},
		fails:  []string{"nccl.iwarp irdma0"},
		source: "class/infiniband/irdma0/ports/1/gid_attrs/types/0",
	},
	{
		// The same NIC in RoCE mode is not iWARP, told either way: no FAIL.
		name: "E810 irdma in RoCE mode without node_type",
		root: treeRoot(e810("roce", false), withoutFiles("irdma0", "node_type")),
		env:  map[string]string{"NCCL_IB_HCA": "irdma0"},
		want: []want{{"gid.roce_v2", "irdma0:1", Pass, "gid 1: RoCE v2"}},
	},
	{
		name: "E810 irdma in RoCE mode on an older kernel, without node_type",
		root: treeRoot(e810("roce", true), withoutFiles("irdma0", "node_type")),
		env:  map[string]string{"NCCL_IB_HCA": "irdma0"},
		want: []want{{"gid.roce_v2", "irdma0:1", Pass, "gid 1: RoCE v2"}},
	},
	{
		name: "bonding_masters in class/net",
		root: rxeWith(map[string]string{"sys/class/net/bonding_masters": "bond0"}),
		env:  map[string]string{"NCCL_SOCKET_IFNAME": "^veth1,lo,bond"},
		want: []want{{"nccl.socket_ifname", "NCCL_SOCKET_IFNAME", Info, "^bond excludes nothing"}},
	},
}

// podCases run on the pod's view captured on the rxe target
// (corpus/rxe-pod-shared): GID entries whose interface is the node's.
var podCases = []classCase{
	{
		name: "NCCL_IB_GID_INDEX names the node's entry, not the pod's",
		root: func(*testing.T) string { return filepath.Join("testdata", "corpus", "rxe-pod-shared") },
		env:  map[string]string{"NCCL_IB_GID_INDEX": "1"},
		want: []want{{"nccl.gid_index", "rxe0:1", Warn, "gid 1: RoCE v2 ::ffff:198.18.0.1 on veth0, whose interface is not in this network namespace"}},
	},
	{
		name: "NCCL_IB_GID_INDEX names the pod's own entry",
		root: func(*testing.T) string { return filepath.Join("testdata", "corpus", "rxe-pod-shared") },
		env:  map[string]string{"NCCL_IB_GID_INDEX": "2"},
		want: []want{{"nccl.gid_index", "rxe0:1", Pass, "gid 2: RoCE v2 ::ffff:198.18.0.12 on net1 (the lowest RoCE v2 IPv4 entry, 1, is on veth0, not in this network namespace: this one is right)"}},
	},
}

func TestRealTreeClasses(t *testing.T) {
	for _, c := range append(classCases, podCases...) {
		t.Run(c.name, func(t *testing.T) {
			root := c.root(t)
			r, err := Run(Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"),
				DevRoot: filepath.Join(root, "dev"), Env: c.env})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				found := false
				for _, f := range r.Find(w.check, w.subject) {
					found = found || (f.Status == w.status && strings.Contains(f.Value, w.value))
				}
				if !found {
					t.Errorf("want %s %s %s %q; got %+v", w.check, w.subject, w.status, w.value, r.Find(w.check, w.subject))
				}
			}
			if got := strings.Join(fails(r), "; "); got != strings.Join(c.fails, "; ") {
				t.Errorf("FAILs %q, want %q", got, strings.Join(c.fails, "; "))
			}
			if c.source != "" {
				w := c.want[0]
				for _, f := range r.Find(w.check, w.subject) {
					if f.Source != filepath.Join(root, "sys", c.source) {
						t.Errorf("%s %s: source %s, want sys/%s", w.check, w.subject, f.Source, c.source)
					}
				}
			}
		})
	}
}
