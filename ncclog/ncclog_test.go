package ncclog

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
)

func parseFile(t *testing.T, name string) *Report {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParse(t *testing.T) {
	tests := []struct {
		file           string
		version, cuda  string
		network        Network
		nics           []string // name:port/link
		gid            int
		gdr, fallback  bool
		kinds          map[string]int
		hosts          []string
		nnodes         int
		warnSubstrings []string
		ncclWarns      int
	}{
		{
			file: "nccl-2.12-ib.log", version: "2.12.12", cuda: "11.7", network: "IB",
			nics: []string{"mlx5_0:1/IB", "mlx5_1:1/IB", "mlx5_2:1/IB", "mlx5_3:1/IB"},
			gid:  -1, gdr: true, kinds: map[string]int{"NET-IB": 4, "P2P": 2}, hosts: []string{"gpu-a01"},
		},
		{
			file: "nccl-2.18-roce-gid.log", version: "2.18.3", cuda: "12.2", network: "IB",
			nics: []string{"mlx5_0:1/RoCE", "mlx5_1:1/RoCE"}, gid: 3, gdr: true,
			kinds: map[string]int{"NET-IB": 4, "SHM": 2}, hosts: []string{"node-17"}, nnodes: 2,
		},
		{
			file: "nccl-2.19-socket-fallback.log", version: "2.19.3", cuda: "12.3", network: "Socket",
			gid: -1, fallback: true, kinds: map[string]int{"NET-Socket": 4}, hosts: []string{"trainer-0"}, nnodes: 2,
			warnSubstrings: []string{"TCP sockets"},
		},
		{
			file: "nccl-2.22-roce-nogdr.log", version: "2.22.3", cuda: "12.5", network: "IB",
			nics: []string{"mlx5_0:1/RoCE", "mlx5_1:1/RoCE", "mlx5_2:1/RoCE", "mlx5_3:1/RoCE"}, gid: -1,
			kinds: map[string]int{"NET-IB": 2, "P2P": 2}, hosts: []string{"worker-0"}, nnodes: 2,
			warnSubstrings: []string{"without GDRDMA"}, ncclWarns: 1,
		},
		{
			file: "nccl-2.27-plugin.log", version: "2.27.5", cuda: "12.9", network: "Libfabric",
			gid: -1, gdr: true, kinds: map[string]int{"NET-Libfabric": 3, "P2P": 1}, hosts: []string{"ip-10-0-1-23"}, nnodes: 2,
		},
		{
			file: "nccl-2.30-ib-gdr.log", version: "2.30.3", cuda: "13.0", network: "IB",
			nics: []string{"mlx5_0:1/IB", "mlx5_3:1/IB", "mlx5_4:1/IB", "mlx5_5:1/IB"}, gid: 0, gdr: true,
			kinds: map[string]int{"NET-IB": 3, "P2P": 1}, hosts: []string{"h100-n3"}, nnodes: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			r := parseFile(t, tc.file)
			if r.Version != tc.version || r.CUDA != tc.cuda {
				t.Errorf("version %q cuda %q, want %q %q", r.Version, r.CUDA, tc.version, tc.cuda)
			}
			if r.Network != tc.network {
				t.Errorf("network %q, want %q", r.Network, tc.network)
			}
			var nics []string
			for _, n := range r.NICs {
				nics = append(nics, n.Name+":"+itoa(n.Port)+"/"+n.LinkLayer)
			}
			if strings.Join(nics, ",") != strings.Join(tc.nics, ",") {
				t.Errorf("nics %v, want %v", nics, tc.nics)
			}
			if r.GIDIndex != tc.gid {
				t.Errorf("gid %d, want %d", r.GIDIndex, tc.gid)
			}
			if r.GDRDMA != tc.gdr || r.SocketFallback != tc.fallback {
				t.Errorf("gdr %v fallback %v, want %v %v", r.GDRDMA, r.SocketFallback, tc.gdr, tc.fallback)
			}
			kinds := r.KindCounts()
			if len(kinds) != len(tc.kinds) {
				t.Errorf("kinds %v, want %v", kinds, tc.kinds)
			}
			for k, n := range tc.kinds {
				if kinds[k] != n {
					t.Errorf("kind %s: %d channels, want %d (all: %v)", k, kinds[k], n, kinds)
				}
			}
			if strings.Join(r.Hosts, ",") != strings.Join(tc.hosts, ",") {
				t.Errorf("hosts %v, want %v", r.Hosts, tc.hosts)
			}
			if r.NNodes != tc.nnodes {
				t.Errorf("nnodes %d, want %d", r.NNodes, tc.nnodes)
			}
			all := strings.Join(r.Warnings, "\n")
			for _, w := range tc.warnSubstrings {
				if !strings.Contains(all, w) {
					t.Errorf("warnings %q lack %q", all, w)
				}
			}
			if len(tc.warnSubstrings) == 0 && len(r.Warnings) != 0 {
				t.Errorf("unexpected warnings %q", r.Warnings)
			}
			if len(r.NCCLWarnings) != tc.ncclWarns {
				t.Errorf("NCCL WARN lines %q", r.NCCLWarnings)
			}
			var b bytes.Buffer
			if err := r.WriteText(&b); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, "golden/"+strings.TrimSuffix(tc.file, ".log")+".txt", b.Bytes())
		})
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// Channel fields are kept as printed.
func TestChannelFields(t *testing.T) {
	r, _ := Parse(strings.NewReader(
		"h:1:2 [0] NCCL INFO Channel 03/1 : 15[bd000] -> 0[7000] [receive] via NET/IB/1(0)/GDRDMA/Shared\n" +
			"h:1:2 [0] NCCL INFO Ring 00 : 43 -> 44 [receive] via NET/Socket/0\n" +
			"h:1:2 [0] NCCL INFO Channel 00 : 2[1] -> 0[0] via SHM/direct/direct\n" +
			"h:1:2 [0] NCCL INFO Channel 00/0 : 2[1] -> 3[2] via P2P/direct pointer\n"))
	want := []Channel{
		{Channel: 3, From: "15[bd000]", To: "0[7000]", Dir: "receive", Transport: "NET/IB/1(0)/GDRDMA/Shared", Kind: "NET-IB", Host: "h"},
		{Channel: 0, From: "43", To: "44", Dir: "receive", Transport: "NET/Socket/0", Kind: "NET-Socket", Host: "h"},
		{Channel: 0, From: "2[1]", To: "0[0]", Transport: "SHM/direct/direct", Kind: "SHM", Host: "h"},
		{Channel: 0, From: "2[1]", To: "3[2]", Transport: "P2P/direct pointer", Kind: "P2P", Host: "h"},
	}
	if len(r.Channels) != len(want) {
		t.Fatalf("channels %+v", r.Channels)
	}
	for i := range want {
		if r.Channels[i] != want[i] {
			t.Errorf("channel %d: %+v, want %+v", i, r.Channels[i], want[i])
		}
	}
	if !r.SocketFallback {
		t.Error("NET/Socket channel is a socket fallback")
	}
}

func TestEmptyAndSingleNode(t *testing.T) {
	r, err := Parse(strings.NewReader("hello\nworld\n"))
	if err != nil || r.Lines != 0 || r.GIDIndex != -1 || len(r.Notes) == 0 {
		t.Errorf("non-NCCL text: %+v %v", r, err)
	}
	// One node with network Socket and only SHM/P2P channels is fine.
	r, _ = Parse(strings.NewReader("h:1:2 [0] NCCL INFO Using network Socket\nh:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0\nh:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"))
	if r.SocketFallback || len(r.Warnings) != 0 {
		t.Errorf("single node flagged: %+v", r.Warnings)
	}
}

func parseAnalysis(t *testing.T, name string) *Analysis {
	t.Helper()
	r := parseFile(t, name)
	if r.Analysis == nil {
		t.Fatal("no analysis")
	}
	return r.Analysis
}

func hostOf(t *testing.T, a *Analysis, name string) Summary {
	t.Helper()
	for _, h := range a.Hosts {
		if h.Host == name {
			return h.Summary
		}
	}
	t.Fatalf("no host %q in %+v", name, a.Hosts)
	return Summary{}
}

func TestAnalysisPerHost(t *testing.T) {
	a := parseAnalysis(t, "job-4hosts.log")
	for _, c := range []struct {
		host, versions       string
		network              Network
		transport, gdr       string
		fallback, ibDisabled bool
		incomplete, errors   int
		finding              string
	}{
		{"node-a", "2.18.3", "IB", "ib", "yes", false, false, 0, 0, ""},
		{"node-b", "2.18.3", "Socket", "socket", "no", true, true, 0, 0, "falls back to TCP sockets between nodes: NCCL_IB_DISABLE=1 from the environment is the cause"},
		{"node-c", "2.19.3", "IB", "ib", "unknown", false, false, 1, 2, "no Init COMPLETE line in this log for 1 communicator rank(s) that logged Init START (comm 0x77f3 rank 2): a hang or crash during init, unless the log was cut short"},
		{"node-d", "2.18.3", "IB", "ib", "partial", false, false, 0, 1, "GPUDirect RDMA for some GPUs only (1 on, 1 off): NCCL_NET_GDR_LEVEL decides by GPU-NIC PCIe distance; off for GPU c1000 / HCA 1: disabled (distance 3 > 2)"},
	} {
		h := hostOf(t, a, c.host)
		if got := strings.Join(h.NCCLVersions, ","); got != c.versions || h.Network != c.network || h.Transport != c.transport || h.GDR != c.gdr ||
			h.SocketFallback != c.fallback || h.IBDisabledByEnv != c.ibDisabled || len(h.InitIncomplete) != c.incomplete || len(h.Errors) != c.errors {
			t.Errorf("%s: %+v", c.host, h)
		}
		if c.finding != "" && !slices.Contains(h.Findings, c.finding) {
			t.Errorf("%s findings %q lack %q", c.host, h.Findings, c.finding)
		}
	}
	// The watchdog line names a rank, not a host.
	w := hostOf(t, a, "rank 3")
	if len(w.Errors) != 1 || w.Errors[0].Kind != ErrWatchdogTimeout || w.Errors[0].Status != "600014 ms" || !strings.Contains(w.Errors[0].Meaning, "WorkNCCL(SeqNum=12, OpType=ALLREDUCE") {
		t.Errorf("watchdog: %+v", w.Errors)
	}
	// Overall.
	if got := strings.Join(a.NCCLVersions, ","); got != "2.18.3,2.19.3" || a.Transport != "socket" || !a.SocketFallback || !a.IBDisabledByEnv || a.GDR != "partial" || a.Network != "IB,Socket" {
		t.Errorf("overall: %+v", a.Summary)
	}
	if !slices.Contains(a.Findings, "mixed NCCL versions: 2.18.3 on node-a, node-b, node-d; 2.19.3 on node-c") {
		t.Errorf("overall findings %q", a.Findings)
	}
	// Errors, classified, with where they were logged.
	c := hostOf(t, a, "node-c").Errors
	if c[0].Kind != ErrCompletion || c[0].Status != "12" || c[0].Line != "27" || !strings.Contains(c[0].Meaning, "IBV_WC_RETRY_EXC_ERR: transport retries exceeded") ||
		!strings.Contains(c[0].Meaning, "PFC") || !strings.Contains(c[0].Meaning, "peer 10.1.0.4<51732>") {
		t.Errorf("completion error: %+v", c[0])
	}
	if c[1].Kind != ErrVerbsCall || c[1].Status != "Cannot allocate memory" || !strings.Contains(c[1].Meaning, "ibv_reg_mr failed: out of locked memory: raise the memlock limit") {
		t.Errorf("reg_mr error: %+v", c[1])
	}
	d := hostOf(t, a, "node-d").Errors
	if d[0].Kind != ErrVerbsCall || !strings.Contains(d[0].Meaning, "ibv_modify_qp failed: connecting the queue pair failed: on RoCE usually an NCCL_IB_GID_INDEX") {
		t.Errorf("modify_qp error: %+v", d[0])
	}
	if len(a.Errors) != 4 {
		t.Errorf("overall errors: %d, want 4", len(a.Errors))
	}
}

func TestAnalysisFormats(t *testing.T) {
	old := parseAnalysis(t, "nccl-2.4-docker.log")
	h := hostOf(t, old, "gpu7")
	// No "Using network": inferred from NET/IB : Using.
	if h.Network != "IB" || h.Transport != "ib" || h.GDR != "no" || strings.Join(h.NCCLVersions, ",") != "2.4.8" || len(old.Hosts) != 1 {
		t.Errorf("2.4: %+v", h)
	}
	if !slices.Contains(h.GDRDetail, "HCA mlx5_0: disabled (no module: nvidia_peermem not loaded)") {
		t.Errorf("2.4 GDR detail %q", h.GDRDetail)
	}
	if len(h.Errors) != 1 || h.Errors[0].Status != "13" || !strings.Contains(h.Errors[0].Meaning, "IBV_WC_RNR_RETRY_EXC_ERR") {
		t.Errorf("2.4 errors %+v", h.Errors)
	}
	if !slices.ContainsFunc(h.Findings, func(f string) bool {
		return strings.HasPrefix(f, "bootstraps over docker0:172.17.0.2<0>, which other nodes cannot reach")
	}) {
		t.Errorf("2.4 findings %q", h.Findings)
	}

	ext := hostOf(t, parseAnalysis(t, "nccl-2.28-ibext.log"), "h1")
	if ext.Network != "IB" || ext.Transport != "roce" || ext.GDR != "yes" || len(ext.InitIncomplete) != 0 {
		t.Errorf("2.28: %+v", ext)
	}
	if len(ext.Errors) != 1 || ext.Errors[0].Status != "4" || !strings.Contains(ext.Errors[0].Meaning, "IBV_WC_LOC_PROT_ERR: local protection error") {
		t.Errorf("2.28 errors %+v", ext.Errors)
	}
	// Every older fixture still reads: 2.19's socket fallback, 2.22's RoCE
	// without GDR, the OFI plugin's network.
	for file, want := range map[string][3]string{
		"nccl-2.19-socket-fallback.log": {"socket", "no", "Socket"},
		"nccl-2.22-roce-nogdr.log":      {"roce", "no", "IB"},
		"nccl-2.27-plugin.log":          {"unknown", "unknown", "Libfabric"},
		"nccl-2.12-ib.log":              {"ib", "yes", "IB"},
	} {
		a := parseAnalysis(t, file)
		if a.Transport != want[0] || a.GDR != want[1] || string(a.Network) != want[2] {
			t.Errorf("%s: transport %s gdr %s network %s, want %v", file, a.Transport, a.GDR, a.Network, want)
		}
	}
}

// TestParseFilesCitesFiles: errors name the file and line they came from.
func TestParseFilesCitesFiles(t *testing.T) {
	r, err := ParseFiles([]Named{
		{Name: "a.log", R: strings.NewReader("x:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")},
		{Name: "b.log", R: strings.NewReader("junk\ny:2:2 [0] NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with error 5, opcode 0, len 0, vendor err 249\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	e := r.Analysis.Errors
	if len(e) != 1 || e[0].Line != "b.log:2" || e[0].Host != "y" || !strings.Contains(e[0].Meaning, "IBV_WC_WR_FLUSH_ERR") {
		t.Errorf("errors %+v", e)
	}
}

func TestKind(t *testing.T) {
	for in, want := range map[string]string{
		"NET/IB/0/GDRDMA": "NET-IB", "NET/IBext_v8/0": "NET-IB", "NET/IBext/0/GDRDMA": "NET-IB",
		"NET/Socket/0": "NET-Socket", "NET/Socketext_v7/0": "NET-Socket",
		"NET/AWS Libfabric/0": "NET-AWS Libfabric", "P2P/CUMEM/read": "P2P", "SHM/direct/direct": "SHM",
		"NVLS": "NVLS", "COLLNET": "CollNet", "CollNetDirect": "CollNet", "ring": "other",
	} {
		if got := Kind(in); got != want {
			t.Errorf("Kind(%q) = %q, want %q", in, got, want)
		}
	}
}
