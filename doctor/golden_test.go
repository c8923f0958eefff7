package doctor

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/golden"
)

// shared holds fixtures materialized once for tests that only read them.
var shared struct {
	sync.Mutex
	dir   string
	roots map[string]string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// sharedFixture is materialize for tests that do not modify the tree.
func sharedFixture(t *testing.T, name string) string {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if root, ok := shared.roots[name]; ok {
		return root
	}
	if shared.dir == "" {
		dir, err := os.MkdirTemp("", "doctor-fixtures-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir, shared.roots = dir, map[string]string{}
	}
	root := filepath.Join(shared.dir, name)
	if err := copyTree(filepath.Join("testdata", name), root); err != nil {
		t.Fatalf("materialize %s: %v", name, err)
	}
	shared.roots[name] = root
	return root
}

// escapedColon stands for ':' in fixture file names: Go module zips reject
// ':' in paths, and PCI addresses (0000:3b:00.0) are full of them.
const escapedColon = "%3A"

// materialize copies testdata/<name> into a temporary directory, turning
// %3A back into ':' in names and symlink targets, and returns its root.
func materialize(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", name)
	dst := t.TempDir()
	if err := copyTree(src, dst); err != nil {
		t.Fatalf("materialize %s: %v", name, err)
	}
	return dst
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, strings.ReplaceAll(rel, escapedColon, ":"))
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			os.Remove(out) // an overlay may replace a link
			return os.Symlink(strings.ReplaceAll(target, escapedColon, ":"), out)
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		default:
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			return os.WriteFile(out, b, 0o644)
		}
	})
}

// goldenCase is one doctor run over a fixture.
type goldenCase struct {
	name    string // golden file testdata/<name>.golden
	fixture string // testdata/<fixture>/{sys,proc,dev}
	env     map[string]string
	expect  float64
	watch   time.Duration
	devinfo bool   // use testdata/<fixture>/ibv_devinfo.txt as the PortQuerier
	ncclLog string // testdata/nccl/<ncclLog>, analysed with --nccl-log
	// want lists findings that must appear (check, subject, status, and a
	// substring of the value), so a golden update cannot silently drop them.
	want []want
}

type want struct {
	check, subject string
	status         Status
	value          string
}

var goldenCases = []goldenCase{
	{
		name: "rxe", fixture: "rxe",
		want: []want{
			{"rdma.devices", "host", Pass, "rxe0"},
			{"rdma.uverbs", "rxe0", Pass, "uverbs0 read-write"},
			{"port.state", "rxe0:1", Pass, "ACTIVE, LinkUp"},
			{"port.mtu", "rxe0:1", Warn, "active 1024 (derived from netdev veth0 MTU 1500)"},
			{"gid.roce_v2", "rxe0:1", Pass, "index 1 (gid 1: RoCE v2 ::ffff:198.18.0.1 on veth0)"},
			{"nccl.gid_index", "rxe0:1", Info, "index 1 is right here"},
			{"host.memlock", "host", Pass, "soft unlimited"},
			{"pci.link", "rxe0", Skip, "software RDMA device"},
			{"port.counters", "rxe0:1", Pass, "all zero"},
		},
	},
	{
		name: "rxe-wrong-gid", fixture: "rxe", devinfo: true,
		env: map[string]string{"NCCL_IB_GID_INDEX": "0", "NCCL_SOCKET_IFNAME": "veth"},
		want: []want{
			{"nccl.gid_index", "rxe0:1", Fail, "NCCL_IB_GID_INDEX=0: gid 0 is link-local fe80::6442:5cff:fe1a:56dc (RoCE v2)"},
			{"port.mtu", "rxe0:1", Warn, "active 1024, max 4096, netdev veth0 MTU 1500"},
			{"nccl.socket_ifname", "NCCL_SOCKET_IFNAME", Pass, "veth → veth0 up, MTU 1500"},
		},
	},
	{
		name: "mlx5-hdr", fixture: "mlx5-hdr", expect: 200, devinfo: true,
		env: map[string]string{
			"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_SOCKET_IFNAME": "=eth0",
			"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_DEBUG": "WARN",
		},
		want: []want{
			{"port.rate", "mlx5_0:1", Pass, "200 Gb/sec (4X HDR), expected 200 Gb/sec"},
			{"port.mtu", "mlx5_1:1", Pass, "active 4096, max 4096"},
			{"nccl.ib_hca", "NCCL_IB_HCA", Pass, "mlx5_1:1 → mlx5_1:1 ACTIVE"},
			{"pci.link", "mlx5_0", Pass, "0000:3b:00.0 16.0 GT/s x16, max 16.0 GT/s x16"},
			{"pci.numa", "gpu 0000:b1:00.0", Pass, "NUMA 1, with mlx5_1"},
			{"host.irq", "host", Pass, "irqbalance running"},
			{"host.sysctl", "net.ipv4.tcp_congestion_control", Pass, "bbr"},
		},
	},
	{
		name: "roce-wrong-gid", fixture: "roce-wrong-gid",
		env: map[string]string{
			"NCCL_IB_GID_INDEX": "2", "NCCL_IB_HCA": "mlx5_0", "NCCL_SOCKET_IFNAME": "ens1f0np0",
			"NCCL_IB_TC": "106", "NCCL_DEBUG": "INFO",
		},
		want: []want{
			{"gid.roce_v2", "mlx5_0:1", Pass, "index 3 (gid 3: RoCE v2 ::ffff:10.10.1.5 on ens1f0np0)"},
			{"nccl.gid_index", "mlx5_0:1", Fail, "NCCL_IB_GID_INDEX=2: gid 2 is RoCE v1 (::ffff:10.10.1.5)"},
			{"port.mtu", "mlx5_0:1", Pass, "active 4096 (derived from netdev ens1f0np0 MTU 9000)"},
			{"nccl.debug", "NCCL_DEBUG", Warn, "NCCL_DEBUG=INFO"},
			{"nccl.ib_tc", "NCCL_IB_TC", Pass, "DSCP 26"},
			{"host.sysctl", "net.core.rmem_max", Warn, "212992, guides use 134217728"},
			{"host.irq", "mlx5_0", Pass, "4 IRQs on CPU(s) 16-19"},
			{"pci.numa", "host", Skip, "no NVIDIA GPUs"},
		},
	},
	{
		name: "degraded-link", fixture: "degraded-link", expect: 200, devinfo: true,
		env: map[string]string{"NCCL_IB_HCA": "mlx5"},
		want: []want{
			{"port.rate", "mlx5_2:1", Fail, "100 Gb/sec (4X EDR), expected 200 Gb/sec"},
			{"port.rate", "mlx5_0:1", Pass, "200 Gb/sec (4X HDR)"},
			{"port.rate", "mlx5_3:1", Skip, "port not active"},
			{"port.state", "mlx5_3:1", Fail, "DOWN, Polling"},
			{"port.mtu", "mlx5_1:1", Warn, "active 2048, max 4096"},
			{"nccl.ib_hca", "NCCL_IB_HCA", Warn, "mlx5 selects mlx5_3:1 DOWN"},
		},
	},
	{
		name: "nccl-socket-fallback", fixture: "mlx5-hdr", devinfo: true, ncclLog: "socket-fallback.log",
		want: []want{
			{"nccl.log.transport", "nccl", Fail, "NET/Socket (NCCL 2.18.3): inter-node traffic over TCP sockets"},
			{"nccl.log.gdr", "nccl", Skip, "moot while NCCL uses TCP sockets"},
		},
	},
	{
		name: "nccl-ib-gdr", fixture: "mlx5-hdr", devinfo: true, ncclLog: "ib-gdr.log",
		want: []want{
			{"nccl.log.transport", "nccl", Pass, "NET/IB (NCCL 2.21.5)"},
			{"nccl.log.gdr", "nccl", Pass, "GPUDirect RDMA in use"},
		},
	},
	{
		name: "nccl-roce-gid", fixture: "roce-wrong-gid", ncclLog: "roce-gid2.log",
		env: map[string]string{"NCCL_IB_GID_INDEX": "2"},
		want: []want{
			{"nccl.log.transport", "nccl", Pass, "NET/IB (NCCL 2.19.3)"},
			{"nccl.log.gid_index", "nccl", Warn, "NCCL used GID index 2; mlx5_0:1 uses 3"},
			{"nccl.log.gdr", "nccl", Warn, "no GPUDirect RDMA"},
			{"nccl.log.warning", "nccl", Warn, "GID table change"},
		},
	},
	{
		name: "counters-static", fixture: "counters",
		want: []want{
			{"port.counters", "mlx5_0:1", Warn, "port_rcv_errors=5, symbol_error=100"},
			{"port.counters", "mlx5_1:1", Warn, "link_downed=1, link_error_recovery=2"},
			{"port.transport", "mlx5_1:1", Info, "out_of_sequence=7 (transport counters grow under normal load)"},
		},
	},
	{
		name: "counters-growing", fixture: "counters", watch: 10 * time.Second,
		want: []want{
			{"port.counters", "mlx5_0:1", Fail, "growing over 10s: port_rcv_errors +4, symbol_error +60"},
			{"port.counters", "mlx5_1:1", Warn, "(steady over 10s)"},
		},
	},
	{
		name: "pcie-downgrade", fixture: "pcie-downgrade", devinfo: true,
		want: []want{
			{"pci.link", "mlx5_0", Fail, "0000:3b:00.0 8.0 GT/s x8, max 16.0 GT/s x16"},
			{"pci.link", "mlx5_1", Pass, "16.0 GT/s x16"},
			{"pci.numa", "gpu 0000:17:00.0", Pass, "NUMA 0, with mlx5_0, mlx5_1"},
			{"pci.numa", "gpu 0000:b1:00.0", Warn, "NUMA 1 has no RDMA NIC (mlx5_0, mlx5_1 on NUMA 0)"},
			{"host.irq", "mlx5_0", Warn, "4 IRQs on CPU(s) 0"},
			{"host.irq", "mlx5_1", Pass, "4 IRQs on CPU(s) 0-3"},
			{"host.memlock", "host", Fail, "soft 64 KiB, hard 64 KiB"},
		},
	},
}

// healthyCases have no FAIL.
var healthyCases = map[string]bool{"mlx5-hdr": true, "rxe": true, "counters-static": true, "nccl-ib-gdr": true}

// runCase runs doctor over a materialized fixture and returns the report
// and its text with the temporary root shown as /.
func runCase(t *testing.T, c goldenCase) (*Report, string) {
	t.Helper()
	root := sharedFixture(t, c.fixture)
	if c.watch > 0 { // the watch rewrites counters
		root = materialize(t, c.fixture)
	}
	opts := Options{
		SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"), DevRoot: filepath.Join(root, "dev"),
		Env: c.env, ExpectRateGbps: c.expect, Watch: c.watch,
		// The second counter read sees the fixture's after/ overlay.
		Wait: func(time.Duration) {
			if err := copyTree(filepath.Join("testdata", c.fixture, "after"), root); err != nil && !os.IsNotExist(err) {
				t.Errorf("apply after/: %v", err)
			}
		},
	}
	if c.ncclLog != "" {
		f, err := os.Open(filepath.Join("testdata", "nccl", c.ncclLog))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		opts.NCCLLog, opts.NCCLLogName = f, c.ncclLog
	}
	if c.devinfo {
		f, err := os.Open(filepath.Join(root, "ibv_devinfo.txt"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		q, err := ParseDevinfo(f)
		if err != nil {
			t.Fatal(err)
		}
		opts.Querier = q
	}
	r, err := Run(opts)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var buf bytes.Buffer
	if err := r.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	return r, strings.ReplaceAll(buf.String(), root, "")
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, text := runCase(t, c)
			for _, f := range r.Findings {
				if !slices.Contains(CheckNames, f.Check) && !strings.HasPrefix(f.Check, "nccl.log.") {
					t.Errorf("check %q is not in CheckNames", f.Check)
				}
			}
			assertRegistryOrder(t, r.Findings)
			for _, w := range c.want {
				assertFinding(t, r, w)
			}
			// Fixtures with a FAIL make rdmabench exit 1; healthy ones 0.
			if r.Failed() == healthyCases[c.name] {
				t.Errorf("Failed() = %v", r.Failed())
			}
			golden.Check(t, c.name+".golden", []byte(text))
		})
	}
}

func assertFinding(t *testing.T, r *Report, w want) {
	t.Helper()
	for _, f := range r.Find(w.check, w.subject) {
		if f.Status == w.status && strings.Contains(f.Value, w.value) {
			if (f.Status == Warn || f.Status == Fail) && f.Remedy == "" {
				t.Errorf("%s %s %s has no remedy", f.Status, f.Check, f.Subject)
			}
			return
		}
	}
	t.Errorf("no %s %s %s containing %q; have %+v", w.status, w.check, w.subject, w.value, r.Find(w.check, ""))
}

func TestJSONIsValid(t *testing.T) {
	r, _ := runCase(t, goldenCases[1])
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Schema   int
		Findings []Finding
		Summary  map[string]int
	}
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, buf.String())
	}
	if got.Schema != 1 || len(got.Findings) != len(r.Findings) || got.Summary["fail"] != r.Summary().Fail {
		t.Errorf("round trip: schema %d, %d findings, summary %v", got.Schema, len(got.Findings), got.Summary)
	}
}

// assertRegistryOrder checks that findings come in the registry's order:
// each one's check is named by an entry at or after the previous one's (the
// entry without names is the NCCL log's nccl.log.*).
func assertRegistryOrder(t *testing.T, findings []Finding) {
	t.Helper()
	entry := func(name string) int {
		return slices.IndexFunc(registry, func(c check) bool {
			if c.names == nil {
				return strings.HasPrefix(name, "nccl.log.")
			}
			return slices.Contains(c.names, name)
		})
	}
	last := 0
	for _, f := range findings {
		i := entry(f.Check)
		if i < last {
			t.Errorf("%s %s comes after %s's entry in the registry's order", f.Check, f.Subject, registry[last].names)
		}
		last = max(last, i)
	}
}
