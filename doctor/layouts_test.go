package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/doctor/internal/hosttree"
)

// runTree writes a generated host and runs doctor over it.
func runTree(t *testing.T, tree *hosttree.Tree, opts Options) *Report {
	t.Helper()
	root := t.TempDir()
	if err := tree.Write(root); err != nil {
		t.Fatal(err)
	}
	opts.SysRoot, opts.ProcRoot, opts.DevRoot = filepath.Join(root, "sys"), filepath.Join(root, "proc"), filepath.Join(root, "dev")
	r, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// fails lists a report's FAILs as "check subject", sorted.
func fails(r *Report) []string {
	var out []string
	for _, f := range r.Findings {
		if f.Status == Fail {
			out = append(out, f.Check+" "+f.Subject)
		}
	}
	slices.Sort(out)
	return out
}

// layoutCase is a real host layout that must give no FAIL, and its broken
// twin (one thing broken) that must give exactly the listed FAILs.
type layoutCase struct {
	name    string
	tree    func(string) *hosttree.Tree
	opts    Options
	breakIt func(*hosttree.Tree, *Options)
	fails   []string
	// want are findings the healthy host must show (the scope at work).
	want []want
}

func withEnv(env map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

var layoutCases = []layoutCase{
	{
		name: "hgx 8 rails + 2 storage NICs", tree: hosttree.HGX,
		opts: Options{Env: hosttree.HGXEnv(), ExpectRateGbps: 400},
		breakIt: func(t *hosttree.Tree, _ *Options) {
			t.File(t.PortDir("mlx5_3", 1)+"/rate", "200 Gb/sec (4X HDR)")
		},
		fails: []string{"port.rate mlx5_3:1"},
		want: []want{
			{"port.rate", "mlx5_8:1", Info, "100 Gb/sec (2X HDR), expected 400 Gb/sec (not used by NCCL: not in NCCL_IB_HCA)"},
			{"port.rate", "mlx5_7:1", Pass, "400 Gb/sec (4X NDR), expected 400 Gb/sec"},
			{"pci.link", "mlx5_0", Pass, "0000:13:00.0 32.0 GT/s x16, max 32.0 GT/s x16, slot (0000:12:00.0) max 32.0 GT/s x16"},
		},
	},
	{
		name: "hgx without NCCL_IB_HCA", tree: hosttree.HGX,
		// A container started without --device=/dev/infiniband: NCCL can
		// open nothing, so every device's missing node counts.
		breakIt: func(t *hosttree.Tree, _ *Options) {
			t.Remove("dev/infiniband")
			t.File("dev/null", "") // the container's /dev has its other nodes
		},
		fails: []string{"rdma.uverbs mlx5_0", "rdma.uverbs mlx5_1", "rdma.uverbs mlx5_2", "rdma.uverbs mlx5_3", "rdma.uverbs mlx5_4",
			"rdma.uverbs mlx5_5", "rdma.uverbs mlx5_6", "rdma.uverbs mlx5_7", "rdma.uverbs mlx5_8", "rdma.uverbs mlx5_9"},
		want: []want{
			{"port.rate", "mlx5_8:1", Info, "no --expect-rate to compare with"},
			{"nccl.gid_index", "mlx5_9:1", Info, "index 3 is right here"},
		},
	},
	{
		name: "dual-port ConnectX-6, second port unplugged", tree: hosttree.DualPortUnplugged,
		breakIt: func(_ *hosttree.Tree, o *Options) {
			o.Env = map[string]string{"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1"}
		},
		fails: []string{"nccl.ib_hca NCCL_IB_HCA", "port.state mlx5_1:1"},
		want: []want{
			{"port.state", "mlx5_1:1", Info, "DOWN, Polling (not used by NCCL: inactive; NCCL_IB_HCA is unset, so NCCL uses the ACTIVE ports)"},
			{"port.state", "mlx5_0:1", Pass, "ACTIVE, LinkUp"},
		},
	},
	{
		name: "two-port device, port 2 unplugged", tree: hosttree.TwoPortDevice,
		opts: Options{Env: map[string]string{"NCCL_IB_HCA": "mlx4_0"}},
		breakIt: func(_ *hosttree.Tree, o *Options) {
			o.Env = map[string]string{"NCCL_IB_HCA": "mlx4_0:2"}
		},
		fails: []string{"nccl.ib_hca NCCL_IB_HCA", "port.state mlx4_0:2"},
		want: []want{
			{"nccl.ib_hca", "NCCL_IB_HCA", Pass, "mlx4_0 → mlx4_0:1 ACTIVE (mlx4_0:2 DOWN not used)"},
			{"port.state", "mlx4_0:2", Info, "not used by NCCL: inactive; NCCL uses the ACTIVE ports of mlx4_0"},
		},
	},
	{
		name: "RoCE LAG bond", tree: hosttree.RoCEBond,
		opts: Options{Env: map[string]string{"NCCL_IB_HCA": "mlx5_bond_0", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "bond0"}},
		breakIt: func(t *hosttree.Tree, _ *Options) { // the bond lost its address
			for _, idx := range []string{"2", "3"} {
				for _, f := range []string{"gids/", "gid_attrs/types/", "gid_attrs/ndevs/"} {
					t.Remove(t.PortDir("mlx5_bond_0", 1) + "/" + f + idx)
				}
			}
		},
		fails: []string{"gid.roce_v2 mlx5_bond_0:1", "nccl.gid_index mlx5_bond_0:1"},
		want: []want{
			{"nccl.gid_index", "mlx5_bond_0:1", Pass, "gid 3: RoCE v2 ::ffff:10.10.1.5 on bond0"},
			{"port.mtu", "mlx5_bond_0:1", Pass, "active 4096 (derived from netdev bond0 MTU 9000)"},
		},
	},
	{
		name: "RoCE on a VLAN, secondary address", tree: hosttree.RoCEVLAN,
		opts: Options{Env: map[string]string{"NCCL_IB_GID_INDEX": "7", "NCCL_SOCKET_IFNAME": "ens1f0np0.100,ib"}},
		breakIt: func(t *hosttree.Tree, _ *Options) { // DHCP dropped the secondary address
			for _, f := range []string{"gids/", "gid_attrs/types/", "gid_attrs/ndevs/"} {
				t.Remove(t.PortDir("mlx5_0", 1) + "/" + f + "6")
				t.Remove(t.PortDir("mlx5_0", 1) + "/" + f + "7")
			}
		},
		fails: []string{"nccl.gid_index mlx5_0:1"},
		want: []want{
			{"nccl.gid_index", "mlx5_0:1", Pass, "gid 7: RoCE v2 ::ffff:10.20.0.105 on ens1f0np0.100 (the lowest RoCE v2 IPv4 entry is 5; either works)"},
			{"nccl.socket_ifname", "NCCL_SOCKET_IFNAME", Pass, "ens1f0np0.100 up, MTU 9000 (no ib here)"},
		},
	},
	{
		name: "SR-IOV VF in a pod", tree: hosttree.VFPod,
		opts: Options{Env: map[string]string{"NCCL_IB_GID_INDEX": "-1", "NCCL_SOCKET_IFNAME": "eth0"}},
		breakIt: func(t *hosttree.Tree, _ *Options) { // the PF trained at x8
			t.File(hosttree.PCIDir("pci0000:3a/0000:3a:01.0/0000:3b:00.0")+"/current_link_width", "8")
		},
		fails: []string{"pci.link mlx5_4"},
		want: []want{
			{"pci.link", "mlx5_4", Pass, "0000:3b:00.2 VF of 0000:3b:00.0 16.0 GT/s x16"},
			{"nccl.gid_index", "mlx5_4:1", Pass, "NCCL_IB_GID_INDEX=-1: NCCL ≥ 2.21 chooses the entry itself; here gid 3"},
		},
	},
	{
		name: "container with only its own uverbs node", tree: hosttree.ContainerOwnUverbs,
		breakIt: func(_ *hosttree.Tree, o *Options) {
			o.Env = map[string]string{"NCCL_IB_HCA": "=mlx5_2,mlx5_3"}
		},
		fails: []string{"rdma.uverbs mlx5_3"},
		want: []want{
			{"rdma.uverbs", "mlx5_2", Pass, "uverbs2 read-write"},
			{"rdma.uverbs", "mlx5_5", Info, "uverbs5 missing (not used by NCCL: no /dev/infiniband node here, so NCCL cannot open it)"},
		},
	},
	{
		name: "Gen5 card in a Gen4 slot", tree: hosttree.Gen5CardGen4Slot,
		opts: Options{ExpectRateGbps: 400},
		breakIt: func(t *hosttree.Tree, _ *Options) {
			t.File(hosttree.PCIDir("pci0000:3a/0000:3a:01.0/0000:3b:00.0")+"/current_link_width", "8")
		},
		fails: []string{"pci.link mlx5_0"},
		want: []want{
			{"pci.link", "mlx5_0", Pass, "0000:3b:00.0 16.0 GT/s x16, max 32.0 GT/s x16, slot (0000:3a:01.0) max 16.0 GT/s x16"},
		},
	},
}

func TestLayouts(t *testing.T) {
	for _, c := range layoutCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			healthy := c.tree("node01")
			r := runTree(t, healthy, c.opts)
			if got := fails(r); len(got) > 0 {
				logReport(t, r)
				t.Errorf("healthy host FAILs: %s", strings.Join(got, "; "))
			}
			for _, w := range c.want {
				assertFinding(t, r, w)
			}
			twin, opts := healthy.Clone(), c.opts
			c.breakIt(twin, &opts)
			r = runTree(t, twin, opts)
			if got := fails(r); !slices.Equal(got, c.fails) {
				logReport(t, r)
				t.Errorf("broken twin FAILs:\n  %s\nwant exactly\n  %s", strings.Join(got, "\n  "), strings.Join(c.fails, "\n  "))
			}
		})
	}
}

// TestDeviceArg: -d narrows the judged ports and names them explicitly.
func TestDeviceArg(t *testing.T) {
	tree := hosttree.DualPortUnplugged("node01")
	r := runTree(t, tree, Options{Devices: []string{"mlx5_1:1"}})
	if got := fails(r); !slices.Equal(got, []string{"port.state mlx5_1:1"}) {
		t.Errorf("-d mlx5_1:1 FAILs %v, want the DOWN port only", got)
	}
	assertFinding(t, r, want{"port.state", "mlx5_0:1", Info, "not used by NCCL: not selected by -d"})
	for _, bad := range []string{"mlx5_7", "mlx5_0:2", "mlx5_0:x", ":1"} {
		root := t.TempDir()
		if err := tree.Write(root); err != nil {
			t.Fatal(err)
		}
		_, err := Run(Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"), DevRoot: filepath.Join(root, "dev"),
			Devices: []string{bad}})
		if err == nil || !strings.Contains(err.Error(), "-d") {
			t.Errorf("-d %s: err %v, want a -d error", bad, err)
		}
	}
}

func ExampleParseDeviceArg() {
	dev, port, err := ParseDeviceArg("mlx5_0:1")
	fmt.Println(dev, port, err)
	// Output: mlx5_0 1 <nil>
}

// TestCounterClasses: link-layer errors and transport counters are judged
// apart, and a saturated PMA counter is said to be one.
func TestCounterClasses(t *testing.T) {
	tree := hosttree.Gen5CardGen4Slot("node01")
	port := tree.PortDir("mlx5_0", 1)
	tree.File(port+"/hw_counters/out_of_sequence", "40")
	tree.File(port+"/hw_counters/local_ack_timeout_err", "3")
	root := t.TempDir()
	if err := tree.Write(root); err != nil {
		t.Fatal(err)
	}
	opts := Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"), DevRoot: filepath.Join(root, "dev")}
	write := func(rel, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, rel), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func() *Report {
		t.Helper()
		r, err := Run(opts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := run()
	assertFinding(t, r, want{"port.counters", "mlx5_0:1", Pass, "5 counters, all zero"})
	assertFinding(t, r, want{"port.transport", "mlx5_0:1", Info, "local_ack_timeout_err=3, out_of_sequence=40 (transport counters grow under normal load)"})

	// Transport counters growing under --watch: a WARN about congestion,
	// not a FAIL about the cable.
	opts.Watch = 10 * time.Second
	opts.Wait = func(time.Duration) { write(port+"/hw_counters/out_of_sequence", "90") }
	r = run()
	assertFinding(t, r, want{"port.transport", "mlx5_0:1", Warn, "growing over 10s: out_of_sequence +50"})
	assertFinding(t, r, want{"port.counters", "mlx5_0:1", Pass, "all zero over 10s"})
	if f := r.Find("port.transport", "mlx5_0:1"); !strings.Contains(f[0].Remedy, "PFC/ECN") {
		t.Errorf("transport remedy %q does not point at congestion", f[0].Remedy)
	}

	// Link errors growing: the cable.
	opts.Wait = func(time.Duration) { write(port+"/counters/symbol_error", "7") }
	r = run()
	assertFinding(t, r, want{"port.counters", "mlx5_0:1", Fail, "growing over 10s: symbol_error +7"})

	// A 16-bit counter stuck at 65535 cannot show growth.
	opts.Wait = func(time.Duration) {}
	write(port+"/counters/symbol_error", "65535")
	r = run()
	assertFinding(t, r, want{"port.counters", "mlx5_0:1", Warn, "symbol_error=65535 (saturated)"})
	if f := r.Find("port.counters", "mlx5_0:1"); !strings.Contains(f[0].Remedy, "stopped at its maximum") {
		t.Errorf("saturation remedy %q", f[0].Remedy)
	}
}

// TestScopeExclusion: with "^" the excluded ports stay out even when
// nothing else is usable, and a list that does not parse judges the ACTIVE
// ports.
func TestScopeExclusion(t *testing.T) {
	tree := hosttree.DualPortUnplugged("node01")
	tree.File(tree.PortDir("mlx5_0", 1)+"/state", hosttree.Down)
	r := runTree(t, tree, Options{Env: map[string]string{"NCCL_IB_HCA": "^mlx5_1"}})
	if got := fails(r); !slices.Equal(got, []string{"port.state mlx5_0:1"}) {
		t.Errorf("FAILs %v, want mlx5_0's port only", got)
	}
	assertFinding(t, r, want{"port.state", "mlx5_1:1", Info, "not used by NCCL: excluded by NCCL_IB_HCA"})
	r = runTree(t, hosttree.DualPortUnplugged("node01"), Options{Env: map[string]string{"NCCL_IB_HCA": "mlx5_0:x"}})
	assertFinding(t, r, want{"port.state", "mlx5_1:1", Info, "NCCL_IB_HCA does not parse"})
	assertFinding(t, r, want{"nccl.ib_hca", "NCCL_IB_HCA", Fail, "bad port"})
}
