package doctor

import (
	"github.com/rdmabench/rdmabench/rdmasys"

	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fixtureWith materializes a fixture and applies edits: path → content, or
// path → "" to remove the path.
func fixtureWith(t *testing.T, fixture string, edits map[string]string) string {
	t.Helper()
	root := materialize(t, fixture)
	for p, content := range edits {
		full := filepath.Join(root, p)
		if content == "" {
			if err := os.RemoveAll(full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// runCheck runs one check over root/{sys,proc,dev}.
func runCheck(t *testing.T, root string, env map[string]string, check func(*host) []Finding) []Finding {
	t.Helper()
	opts := Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"),
		DevRoot: filepath.Join(root, "dev"), Env: env}
	opts.defaults()
	h, err := loadHost(opts)
	if err != nil {
		t.Fatal(err)
	}
	return check(h)
}

// expectOne asserts a single finding with the status and value substring.
func expectOne(t *testing.T, got []Finding, status Status, value string) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("got %d findings, want 1: %+v", len(got), got)
	}
	f := got[0]
	if f.Status != status || !strings.Contains(f.Value, value) {
		t.Errorf("got %s %q, want %s containing %q", f.Status, f.Value, status, value)
	}
	if (f.Status == Warn || f.Status == Fail) && f.Remedy == "" {
		t.Errorf("%s without a remedy", f.Status)
	}
}

func TestParseNCCLList(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    ncclList
		wantErr bool
	}{
		{in: "mlx5_0", want: ncclList{items: []ncclItem{{"mlx5_0", 0}}}},
		{in: "=mlx5_0:1,mlx5_1:2", want: ncclList{exact: true, items: []ncclItem{{"mlx5_0", 1}, {"mlx5_1", 2}}}},
		{in: "^=mlx5_2", want: ncclList{exclude: true, exact: true, items: []ncclItem{{"mlx5_2", 0}}}},
		{in: "=^mlx5_2", want: ncclList{exclude: true, exact: true, items: []ncclItem{{"mlx5_2", 0}}}},
		{in: " mlx5_0 , ,mlx5_1", want: ncclList{items: []ncclItem{{"mlx5_0", 0}, {"mlx5_1", 0}}}},
		{in: "mlx5_0:x", wantErr: true},
		{in: "mlx5_0:0", wantErr: true},
		{in: "^", wantErr: true},
		{in: "", wantErr: true},
	} {
		got, err := parseNCCLList(c.in, true)
		if (err != nil) != c.wantErr {
			t.Errorf("%q: err = %v, want error %v", c.in, err, c.wantErr)
			continue
		}
		if !c.wantErr && !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: got %+v, want %+v", c.in, got, c.want)
		}
	}
}

func TestNCCLHCA(t *testing.T) {
	root := sharedFixture(t, "degraded-link") // mlx5_0..2 ACTIVE, mlx5_3 DOWN
	for _, c := range []struct {
		val    string
		status Status
		value  string
	}{
		{"=mlx5_0:1", Pass, "mlx5_0:1 → mlx5_0:1 ACTIVE"},
		{"mlx5_9", Fail, "mlx5_9: no such RDMA device (have mlx5_0, mlx5_1, mlx5_2, mlx5_3)"},
		{"mlx5_3:1", Fail, "mlx5_3:1 selects mlx5_3:1 DOWN"},
		{"mlx5_0:2", Fail, "mlx5_0:2: no such port"},
		{"^mlx5_9", Warn, "^mlx5_9 excludes no device"},
		{"^mlx5_3", Info, "^mlx5_3 excludes mlx5_3"},
		{"mlx5_0:x", Fail, `NCCL_IB_HCA="mlx5_0:x": bad port`},
	} {
		t.Run(c.val, func(t *testing.T) {
			expectOne(t, runCheck(t, root, map[string]string{"NCCL_IB_HCA": c.val}, checkNCCLHCA), c.status, c.value)
		})
	}
	if got := runCheck(t, root, nil, checkNCCLHCA); len(got) != 0 {
		t.Errorf("unset NCCL_IB_HCA: %+v, want no findings", got)
	}
}

// TestNCCLHCAPrefix: without "=", mlx5_1 also selects mlx5_10 and up.
func TestNCCLHCAPrefix(t *testing.T) {
	edits := map[string]string{}
	for _, f := range []string{"state", "phys_state", "rate", "link_layer"} {
		b, err := os.ReadFile(filepath.Join("testdata", "degraded-link", "sys", "class", "infiniband", "mlx5_1", "ports", "1", f))
		if err != nil {
			t.Fatal(err)
		}
		edits["sys/class/infiniband/mlx5_10/ports/1/"+f] = strings.TrimSpace(string(b))
	}
	root := fixtureWith(t, "degraded-link", edits)
	expectOne(t, runCheck(t, root, map[string]string{"NCCL_IB_HCA": "mlx5_1"}, checkNCCLHCA), Warn, "mlx5_1 also matches mlx5_10 (prefix match)")
	expectOne(t, runCheck(t, root, map[string]string{"NCCL_IB_HCA": "=mlx5_1"}, checkNCCLHCA), Pass, "mlx5_1 → mlx5_1:1 ACTIVE")
}

func TestNCCLSocketIfname(t *testing.T) {
	root := fixtureWith(t, "rxe", map[string]string{
		"sys/class/net/eth9/operstate": "down", "sys/class/net/eth9/flags": "0x1002", "sys/class/net/eth9/mtu": "1500",
	})
	for _, c := range []struct {
		val    string
		status Status
		value  string
	}{
		{"veth0", Pass, "veth0 → veth0 up, MTU 1500"},
		{"lo", Pass, "lo → lo up, MTU 65536"}, // operstate unknown, IFF_UP set
		{"=veth", Fail, "veth: no such interface (have eth9, lo, veth0, veth1)"},
		{"ib", Fail, "ib: no such interface"},
		{"eth9", Fail, "eth9 → eth9 down"},
		// NCCL uses every match: one up interface is enough.
		{"eth9,veth0", Pass, "veth0 up, MTU 1500"},
		{"ib,veth", Pass, "veth1 up, MTU 1500 (no ib here)"},
		{"=ib,veth", Fail, "ib, veth: no such interface"},
		{"^lo", Info, "^lo excludes lo"},
	} {
		t.Run(c.val, func(t *testing.T) {
			expectOne(t, runCheck(t, root, map[string]string{"NCCL_SOCKET_IFNAME": c.val}, checkNCCLSocketIfname), c.status, c.value)
		})
	}
}

// TestNCCLScalarVars covers the variables judged by value alone.
func TestNCCLScalarVars(t *testing.T) {
	root := sharedFixture(t, "rxe")
	for _, c := range []struct {
		name, val string
		check     func(*host) []Finding
		status    Status
	}{
		{"NCCL_IB_DISABLE", "1", checkNCCLIBDisable, Warn},
		{"NCCL_IB_DISABLE", "0", checkNCCLIBDisable, Pass},
		// NCCL reads it with strtoll(s, NULL, 0): no digits is 0, IB stays on.
		{"NCCL_IB_DISABLE", "maybe", checkNCCLIBDisable, Pass},
		{"NCCL_IB_DISABLE", "00", checkNCCLIBDisable, Pass},
		{"NCCL_IB_DISABLE", "0x0", checkNCCLIBDisable, Pass},
		{"NCCL_IB_DISABLE", "2abc", checkNCCLIBDisable, Warn},
		{"NCCL_IB_DISABLE", "0x10", checkNCCLIBDisable, Warn},
		{"NCCL_IB_DISABLE", "-1", checkNCCLIBDisable, Warn},
		{"NCCL_DEBUG", "INFO", checkNCCLDebug, Warn},
		{"NCCL_DEBUG", "trace", checkNCCLDebug, Warn},
		{"NCCL_DEBUG", "WARN", checkNCCLDebug, Pass},
		{"NCCL_DEBUG", "LOUD", checkNCCLDebug, Warn},
		{"NCCL_NET_GDR_LEVEL", "PHB", checkNCCLGDRLevel, Pass},
		{"NCCL_NET_GDR_LEVEL", "sys", checkNCCLGDRLevel, Pass},
		{"NCCL_NET_GDR_LEVEL", "2", checkNCCLGDRLevel, Pass},
		{"NCCL_NET_GDR_LEVEL", "LOC", checkNCCLGDRLevel, Warn},
		{"NCCL_NET_GDR_LEVEL", "0", checkNCCLGDRLevel, Warn},
		{"NCCL_NET_GDR_LEVEL", "NEAR", checkNCCLGDRLevel, Fail},
		{"NCCL_NET_GDR_LEVEL", "9", checkNCCLGDRLevel, Fail},
		{"NCCL_IB_TC", "106", checkNCCLIBTC, Pass},
		{"NCCL_IB_TC", "0", checkNCCLIBTC, Pass},
		{"NCCL_IB_TC", "256", checkNCCLIBTC, Fail},
		{"NCCL_IB_TC", "-1", checkNCCLIBTC, Fail},
		{"NCCL_IB_TC", "af41", checkNCCLIBTC, Fail},
	} {
		t.Run(c.name+"="+c.val, func(t *testing.T) {
			expectOne(t, runCheck(t, root, map[string]string{c.name: c.val}, c.check), c.status, c.name+"="+c.val)
			if got := runCheck(t, root, nil, c.check); len(got) != 0 {
				t.Errorf("unset: %+v, want nothing", got)
			}
		})
	}
}

func TestNCCLGIDIndex(t *testing.T) {
	// roce-wrong-gid: 0 fe80 v1, 1 fe80 v2, 2 IPv4 v1, 3 IPv4 v2; add an IPv6 v2.
	p := "sys/class/infiniband/mlx5_0/ports/1/"
	root := fixtureWith(t, "roce-wrong-gid", map[string]string{
		p + "gids/4":            "2001:0db8:0000:0000:0000:0000:0000:0005",
		p + "gid_attrs/types/4": "RoCE v2",
		p + "gid_attrs/ndevs/4": "ens1f0np0",
	})
	for _, c := range []struct {
		val    string
		status Status
		value  string
	}{
		{"3", Pass, "NCCL_IB_GID_INDEX=3: gid 3: RoCE v2 ::ffff:10.10.1.5 on ens1f0np0"},
		{"0", Fail, "gid 0 is RoCE v1 (fe80::e42:a1ff:fe9c:1e40)"},
		{"1", Fail, "gid 1 is link-local fe80::e42:a1ff:fe9c:1e40 (RoCE v2)"},
		{"2", Fail, "gid 2 is RoCE v1 (::ffff:10.10.1.5)"},
		{"4", Warn, "gid 4: RoCE v2 2001:db8::5 on ens1f0np0 is IPv6"},
		{"9", Fail, "gid 9 is not populated"},
		{"-1", Pass, "NCCL_IB_GID_INDEX=-1: NCCL ≥ 2.21 chooses the entry itself; here gid 3: RoCE v2 ::ffff:10.10.1.5"},
		{"-2", Fail, `NCCL_IB_GID_INDEX="-2" is not an index`},
		{"three", Fail, `NCCL_IB_GID_INDEX="three" is not an index`},
	} {
		t.Run(c.val, func(t *testing.T) {
			got := runCheck(t, root, map[string]string{"NCCL_IB_GID_INDEX": c.val}, checkNCCLGIDIndex)
			expectOne(t, got, c.status, c.value)
			if c.status == Fail && !strings.Contains(got[0].Remedy, "set NCCL_IB_GID_INDEX=3 (gid 3: RoCE v2") {
				t.Errorf("remedy %q does not name index 3", got[0].Remedy)
			}
		})
	}
	expectOne(t, runCheck(t, root, nil, checkNCCLGIDIndex), Info, "index 3 is right here")
	// A routable IPv6 entry is right when every node uses IPv6.
	expectOne(t, runCheck(t, root, map[string]string{"NCCL_IB_GID_INDEX": "4", "NCCL_IB_ADDR_FAMILY": "AF_INET6"}, checkNCCLGIDIndex), Pass, "gid 4: RoCE v2 2001:db8::5")
	// An entry on an interface that is down does not route.
	down := fixtureWith(t, "roce-wrong-gid", map[string]string{"sys/class/net/ens1f0np0/operstate": "down", "sys/class/net/ens1f0np0/flags": "0x1002"})
	expectOne(t, runCheck(t, down, map[string]string{"NCCL_IB_GID_INDEX": "3"}, checkNCCLGIDIndex), Fail, "on ens1f0np0, which is not up")
	// Without an IPv4 address there is no right index to name.
	noV4 := fixtureWith(t, "rxe", map[string]string{"sys/class/infiniband/rxe0/ports/1/gids/1": ""})
	expectOne(t, runCheck(t, noV4, nil, checkRoCEGID), Fail, "no RoCE v2 IPv4 GID")
	got := runCheck(t, noV4, map[string]string{"NCCL_IB_GID_INDEX": "0"}, checkNCCLGIDIndex)
	expectOne(t, got, Fail, "link-local")
	if !strings.Contains(got[0].Remedy, "assign an IPv4 address to veth0") {
		t.Errorf("remedy = %q", got[0].Remedy)
	}
	// InfiniBand ports ignore the variable.
	ib := sharedFixture(t, "mlx5-hdr")
	expectOne(t, runCheck(t, ib, map[string]string{"NCCL_IB_GID_INDEX": "3"}, checkNCCLGIDIndex), Info, "has no effect without RoCE ports")
}

func TestRDMAPresence(t *testing.T) {
	t.Run("container without /dev/infiniband", func(t *testing.T) {
		root := fixtureWith(t, "rxe", map[string]string{"dev/infiniband": ""})
		got := runCheck(t, root, nil, checkUverbs)
		expectOne(t, got, Fail, "uverbs0 missing")
		if !strings.Contains(got[0].Remedy, "--device=/dev/infiniband") {
			t.Errorf("remedy %q lacks the container hint", got[0].Remedy)
		}
		// The module is loaded but rdma_cm has no node: still loaded.
		for _, f := range runCheck(t, root, nil, checkModules) {
			if f.Status != Pass {
				t.Errorf("modules: %+v", f)
			}
		}
	})
	t.Run("ib_uverbs not bound", func(t *testing.T) {
		root := fixtureWith(t, "rxe", map[string]string{"sys/class/infiniband_verbs": ""})
		expectOne(t, runCheck(t, root, nil, checkUverbs), Fail, "no uverbs device bound")
	})
	t.Run("unreadable uverbs", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root can open anything")
		}
		root := materialize(t, "rxe")
		if err := os.Chmod(filepath.Join(root, "dev", "infiniband", "uverbs0"), 0o000); err != nil {
			t.Fatal(err)
		}
		expectOne(t, runCheck(t, root, nil, checkUverbs), Fail, "not readable and writable")
	})
	t.Run("built-in modules", func(t *testing.T) {
		root := fixtureWith(t, "rxe", map[string]string{"sys/module/ib_uverbs": "", "sys/module/rdma_ucm": ""})
		for _, f := range runCheck(t, root, nil, checkModules) {
			if f.Status != Pass || !strings.Contains(f.Value, "built in") {
				t.Errorf("%+v, want PASS built in", f)
			}
		}
	})
	t.Run("no modules", func(t *testing.T) {
		root := fixtureWith(t, "rxe", map[string]string{"sys/module/ib_uverbs": "", "sys/module/rdma_ucm": "", "dev/infiniband": ""})
		got := runCheck(t, root, nil, checkModules)
		if len(got) != 2 || got[0].Status != Fail || got[1].Status != Warn {
			t.Errorf("got %+v, want ib_uverbs FAIL, rdma_ucm WARN", got)
		}
	})
	t.Run("no devices", func(t *testing.T) {
		root := fixtureWith(t, "rxe", map[string]string{"sys/class/infiniband": ""})
		expectOne(t, runCheck(t, root, nil, checkDevices), Fail, "no RDMA devices")
		expectOne(t, runCheck(t, root, nil, checkUverbs), Skip, "no RDMA devices")
	})
}

func TestRunErrors(t *testing.T) {
	if _, err := Run(Options{SysRoot: filepath.Join(t.TempDir(), "missing")}); err == nil {
		t.Error("Run on a missing sysfs root succeeded")
	}
	// An empty (but present) tree is a host without RDMA, not an error.
	empty := t.TempDir()
	r, err := Run(Options{SysRoot: empty, ProcRoot: empty, DevRoot: empty})
	if err != nil || !r.Failed() {
		t.Errorf("empty tree: err %v, failed %v", err, r != nil && r.Failed())
	}
}

func TestPortStateRemedies(t *testing.T) {
	for _, c := range []struct{ state, phys, remedy string }{
		{"4: ACTIVE", "5: LinkUp", ""},
		{"1: DOWN", "2: Polling", "no link partner"},
		{"1: DOWN", "3: Disabled", "ip link set dev veth0 up"},
		{"2: INIT", "5: LinkUp", "no subnet manager"},
		{"1: DOWN", "7: PhyTest", "bring the link up"},
	} {
		p := "sys/class/infiniband/rxe0/ports/1/"
		root := fixtureWith(t, "rxe", map[string]string{p + "state": c.state, p + "phys_state": c.phys})
		got := runCheck(t, root, nil, checkPortState)
		if len(got) != 1 || !strings.Contains(got[0].Remedy, c.remedy) || (c.remedy == "") != (got[0].Status == Pass) {
			t.Errorf("%s/%s: %+v, want remedy %q", c.state, c.phys, got, c.remedy)
		}
	}
}

func TestRoCEMTU(t *testing.T) {
	for netdev, want := range map[int]int{1500: 1024, 9000: 4096, 4200: 4096, 4150: 2048, 2200: 2048, 1280: 1024, 576: 256} {
		if got := roceMTU(netdev); got != want {
			t.Errorf("roceMTU(%d) = %d, want %d", netdev, got, want)
		}
	}
}

// fakeQuerier answers PortMTU from a table.
type fakeQuerier map[string][2]int

func (q fakeQuerier) PortMTU(dev string, port int) (int, int, error) {
	return DevinfoMTUs(q).PortMTU(dev, port)
}

func TestPortMTUWithQuerier(t *testing.T) {
	root := materialize(t, "rxe")
	opts := Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"), DevRoot: filepath.Join(root, "dev"),
		Querier: fakeQuerier{"rxe0:1": {1024, 4096}}}
	opts.defaults()
	h, err := loadHost(opts)
	if err != nil {
		t.Fatal(err)
	}
	expectOne(t, checkPortMTU(h), Warn, "active 1024, max 4096, netdev veth0 MTU 1500")
	// A querier that cannot answer falls back to the derived value.
	h.opts.Querier = fakeQuerier{}
	expectOne(t, checkPortMTU(h), Warn, "active 1024 (derived from netdev veth0 MTU 1500)")
}

func TestMemlock(t *testing.T) {
	limits := func(soft, hard string) string {
		return "Limit                     Soft Limit           Hard Limit           Units\n" +
			"Max locked memory         " + soft + "              " + hard + "              bytes\n"
	}
	noCap := "CapEff:\t0000000000000000"
	ipcLock := "CapEff:\t0000000000004000"
	for _, c := range []struct {
		name, limits, status string
		want                 Status
		value                string
	}{
		{"unlimited", limits("unlimited", "unlimited"), noCap, Pass, "soft unlimited, hard unlimited"},
		{"docker default", limits("65536", "65536"), noCap, Fail, "soft 64 KiB, hard 64 KiB, too small"},
		{"systemd default", limits("8388608", "8388608"), noCap, Fail, "soft 8 MiB"},
		{"CAP_IPC_LOCK", limits("8388608", "8388608"), ipcLock, Pass, "not enforced: CAP_IPC_LOCK held"},
		{"large but finite", limits("17179869184", "unlimited"), noCap, Warn, "soft 16 GiB, hard unlimited"},
		{"no line", "Max open files 1024 1024 files\n", noCap, Skip, "no \"Max locked memory\" line"},
		{"garbage", limits("lots", "lots"), noCap, Skip, `bad limit "lots"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := fixtureWith(t, "rxe", map[string]string{"proc/self/limits": c.limits, "proc/self/status": c.status})
			expectOne(t, runCheck(t, root, nil, checkMemlock), c.want, c.value)
		})
	}
	root := fixtureWith(t, "rxe", map[string]string{"proc/self/limits": ""})
	expectOne(t, runCheck(t, root, nil, checkMemlock), Skip, "read limits")
}

func TestSysctls(t *testing.T) {
	for _, c := range []struct {
		key, value string
		want       Status
	}{
		{"net/core/rmem_max", "268435456", Pass},
		{"net/core/rmem_max", "212992", Warn},
		{"net/ipv4/tcp_rmem", "4096\t87380\t134217728", Pass},
		{"net/ipv4/tcp_rmem", "4096 131072 6291456", Warn},
		{"net/ipv4/tcp_congestion_control", "htcp", Pass},
		{"net/ipv4/tcp_congestion_control", "reno", Warn},
		{"net/ipv4/tcp_mtu_probing", "2", Pass},
		{"net/ipv4/tcp_mtu_probing", "", Skip}, // unreadable (e.g. another netns)
	} {
		root := fixtureWith(t, "rxe", map[string]string{"proc/sys/" + c.key: c.value})
		key := strings.ReplaceAll(c.key, "/", ".")
		var got []Finding
		for _, f := range runCheck(t, root, nil, checkSysctls) {
			if f.Subject == key {
				got = append(got, f)
			}
		}
		if len(got) != 1 || got[0].Status != c.want {
			t.Errorf("%s=%q: %+v, want %s", key, c.value, got, c.want)
		}
	}
}

func TestCPUList(t *testing.T) {
	for in, want := range map[string][]int{"0-3,8,10-11": {0, 1, 2, 3, 8, 10, 11}, "5": {5}, "": nil} {
		got, err := rdmasys.ParseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("rdmasys.ParseCPUList(%q) = %v %v, want %v", in, got, err, want)
		}
		if in != "" && fmtCPUs(got) != in {
			t.Errorf("fmtCPUs(%v) = %q, want %q", got, fmtCPUs(got), in)
		}
	}
	for _, bad := range []string{"a", "3-1", "1-x"} {
		if _, err := rdmasys.ParseCPUList(bad); err == nil {
			t.Errorf("rdmasys.ParseCPUList(%q) succeeded", bad)
		}
	}
}

func TestClassifyCounter(t *testing.T) {
	for _, c := range []struct {
		dir, name string
		want      counterClass
	}{
		{"counters", "symbol_error", linkCounter},
		{"counters", "port_xmit_discards", linkCounter},
		{"counters", "link_downed", linkCounter},
		{"counters", "port_xmit_data", notAnError},
		{"counters", "port_xmit_wait", notAnError}, // congestion, not an error
		{"hw_counters", "out_of_sequence", transportCounter},
		{"hw_counters", "local_ack_timeout_err", transportCounter},
		{"hw_counters", "rnr_nak_retry_err", transportCounter},
		{"hw_counters", "req_cqe_flush_error", transportCounter},
		{"hw_counters", "rcvd_seq_err", transportCounter},
		{"hw_counters", "duplicate_request", transportCounter},
		{"hw_counters", "link_downed", linkCounter}, // rxe
		{"hw_counters", "rx_icrc_encapsulated", notAnError},
		{"hw_counters", "rx_discards_phy", linkCounter},
		{"hw_counters", "rcvd_pkts", notAnError},
		{"hw_counters", "ack_deferred", notAnError},
		{"hw_counters", "np_cnp_sent", notAnError},
	} {
		if got := classifyCounter(c.dir, c.name); got != c.want {
			t.Errorf("classifyCounter(%s, %s) = %v, want %v", c.dir, c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		key  string
		v    uint64
		want bool
	}{
		{"counters/symbol_error", 65535, true},
		{"counters/symbol_error", 65534, false},
		{"counters/link_downed", 255, true},
		{"counters/local_link_integrity_errors", 15, true},
		{"counters/symbol_error", 1 << 20, false}, // extended 64-bit counters pass the 16-bit maximum
		{"hw_counters/out_of_sequence", 65535, false},
	} {
		if got := saturated(c.key, c.v); got != c.want {
			t.Errorf("saturated(%s, %d) = %v, want %v", c.key, c.v, got, c.want)
		}
	}
}

func TestParseEnvFile(t *testing.T) {
	in := `#!/bin/bash
#SBATCH --nodes=2
export NCCL_IB_HCA="=mlx5_0:1,mlx5_1:1"
NCCL_IB_GID_INDEX=3   # RoCE v2 IPv4
export NCCL_SOCKET_IFNAME='eth0'
NCCL_DEBUG=
srun --mpi=pmix python train.py
if [ "$X" = 1 ]; then
1BAD=x
`
	got, err := ParseEnvFile(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1", "NCCL_IB_GID_INDEX": "3", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_DEBUG": ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if env := NCCLEnv([]string{"PATH=/bin", "NCCL_DEBUG=INFO", "NCCL_X=a=b"}); !reflect.DeepEqual(env, map[string]string{"NCCL_DEBUG": "INFO", "NCCL_X": "a=b"}) {
		t.Errorf("NCCLEnv = %v", env)
	}
}

func TestParseDevinfo(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "degraded-link", "ibv_devinfo.txt"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseDevinfo(strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if a, m, err := q.PortMTU("mlx5_1", 1); a != 2048 || m != 4096 || err != nil {
		t.Errorf("mlx5_1:1 = %d/%d %v", a, m, err)
	}
	if _, _, err := q.PortMTU("mlx5_1", 2); err == nil {
		t.Error("missing port answered")
	}
	for _, bad := range []string{"", "hca_id: x\n\tactive_mtu: 1024 (3)\n", "hca_id: x\nport: 1\nmax_mtu: big\n"} {
		if _, err := ParseDevinfo(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseDevinfo(%q) succeeded", bad)
		}
	}
}

func TestNCCLConf(t *testing.T) {
	root := fixtureWith(t, "rxe", map[string]string{
		"etc/nccl.conf": "# site defaults\nNCCL_IB_GID_INDEX=0\nexport NCCL_DEBUG=INFO\nNCCL_IB_HCA=\"rxe0\"\nNCCL_SOCKET_IFNAME=veth0   \nNCCL_IB_TC=106",
		"job.conf":      "NCCL_IB_TC=96\nNCCL_IB_GID_INDEX=1",
	})
	run := func(env map[string]string) *Report {
		t.Helper()
		r, err := Run(Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"), DevRoot: filepath.Join(root, "dev"), Env: env})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// /etc/nccl.conf's settings are judged like the environment's; the
	// environment wins.
	env := map[string]string{"NCCL_SOCKET_IFNAME": "lo"}
	r := run(env)
	assertFinding(t, r, want{"nccl.gid_index", "rxe0:1", Fail, "NCCL_IB_GID_INDEX=0"})
	assertFinding(t, r, want{"nccl.socket_ifname", "NCCL_SOCKET_IFNAME", Pass, "lo → lo up"})
	assertFinding(t, r, want{"nccl.conf", "nccl.conf", Info, "NCCL reads it: NCCL_IB_GID_INDEX=0, NCCL_IB_TC=106, NCCL_SOCKET_IFNAME (overridden by the environment)"})
	assertFinding(t, r, want{"nccl.conf", "nccl.conf", Warn, "nccl.conf:3: export NCCL_DEBUG=INFO: NCCL takes the name and value literally"})
	assertFinding(t, r, want{"nccl.conf", "nccl.conf", Warn, `nccl.conf:4: NCCL_IB_HCA="rxe0"`})
	if len(env) != 1 {
		t.Errorf("Run changed the caller's environment: %v", env)
	}
	// NCCL_CONF_FILE is read before /etc/nccl.conf and wins over it.
	r = run(map[string]string{"NCCL_CONF_FILE": filepath.Join(root, "job.conf")})
	assertFinding(t, r, want{"nccl.gid_index", "rxe0:1", Pass, "NCCL_IB_GID_INDEX=1"})
	assertFinding(t, r, want{"nccl.ib_tc", "NCCL_IB_TC", Pass, "NCCL_IB_TC=96"})
	assertFinding(t, r, want{"nccl.conf", "job.conf", Info, "NCCL_IB_GID_INDEX=1, NCCL_IB_TC=96"})
}

func TestNCCLNames(t *testing.T) {
	root := sharedFixture(t, "rxe")
	got := runCheck(t, root, map[string]string{"NCCL_IB_GID_IDX": "3", "NCCL_OFI_USE_GDRCOPY": "1", "NCCL_IB_HCA": "rxe0", "NCCL_IB_TIMEOUT": "22"}, checkNCCLNames)
	expectOne(t, got, Warn, "NCCL_IB_GID_IDX is not a variable NCCL reads (did you mean NCCL_IB_GID_INDEX?)")
	expectOne(t, runCheck(t, root, map[string]string{"NCCL_IB_HCA": "rxe0", "NCCL_ALGO": "Ring"}, checkNCCLNames), Pass, "2 NCCL variable(s), all known")
	got = runCheck(t, root, map[string]string{"NCCL_COMPLETELY_MADE_UP": "1"}, checkNCCLNames)
	expectOne(t, got, Warn, "NCCL_COMPLETELY_MADE_UP is not a variable NCCL reads")
	if strings.Contains(got[0].Value, "did you mean") {
		t.Errorf("suggested a far name: %s", got[0].Value)
	}
	if got := runCheck(t, root, nil, checkNCCLNames); len(got) != 0 {
		t.Errorf("no NCCL variables: %+v", got)
	}
}

func TestNCCLParamValue(t *testing.T) {
	for _, c := range []struct {
		in      string
		n       int64
		numeric bool
	}{
		{"maybe", 0, false}, {"", 0, false}, {"1", 1, true}, {" 1", 1, true}, {"012", 10, true},
		{"0x1f", 31, true}, {"0xg", 0, true}, {"-3", -3, true}, {"7up", 7, true}, {"08", 0, true},
	} {
		if n, num := ncclParamValue(c.in); n != c.n || num != c.numeric {
			t.Errorf("%q: %d %v, want %d %v (strtoll)", c.in, n, num, c.n, c.numeric)
		}
	}
}
