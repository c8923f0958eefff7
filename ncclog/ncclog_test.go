package ncclog

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

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
		network        string
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
			golden(t, strings.TrimSuffix(tc.file, ".log")+".txt", b.Bytes())
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

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}
