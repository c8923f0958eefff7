package doctor

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/doctor/internal/hosttree"
)

func TestFacts(t *testing.T) {
	tree := hosttree.HGX("gpu-a17")
	tree.File(tree.PortDir("mlx5_3", 1)+"/rate", "200 Gb/sec (4X HDR)")
	env := hosttree.HGXEnv()
	env["NCCL_IB_GID_INDEX"] = "5"
	when := time.Date(2026, 11, 30, 12, 0, 0, 0, time.FixedZone("CET", 3600))
	r := runTree(t, tree, Options{Env: env, ToolVersion: "v1.2.3", RDMACoreVersion: "50.0", Now: func() time.Time { return when }})
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc JSONReport
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	f := doc.Host
	if f == nil {
		t.Fatalf("no host facts in %s", buf.String())
	}
	for _, c := range []struct{ name, got, want string }{
		{"hostname", f.Hostname, "gpu-a17"},
		{"kernel", f.Kernel, "5.15.0-105-generic"},
		{"rdma_core", f.RDMACore, "50.0"},
		{"mlx5_core", f.Drivers["mlx5_core"], "23.10-1.1.9"},
		{"gpu driver", f.GPUDriver, "535.161.08"},
		{"time", f.Time, "2026-11-30T11:00:00Z"},
		{"tool", f.Tool, "v1.2.3"},
		{"NCCL_IB_HCA", f.NCCLEnv["NCCL_IB_HCA"], env["NCCL_IB_HCA"]},
		{"sysctl", f.Sysctls["net.ipv4.tcp_rmem"], "4096 87380 268435456"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if !f.Peermem || len(f.HCAs) != 10 {
		t.Fatalf("peermem %v, %d HCAs", f.Peermem, len(f.HCAs))
	}
	h3, h8 := f.HCAs[3], f.HCAs[8]
	if h3.Name != "mlx5_3" || h3.FW != "28.39.1002" || h3.PSID != "MT_0000000838" || h3.Model != "MT4129" ||
		h3.Ports[0].RateGbps != 200 || !h3.Ports[0].Used || h3.Ports[0].GIDIndex != nil {
		t.Errorf("mlx5_3 = %+v", h3)
	}
	// The storage NIC is RoCE, outside NCCL_IB_HCA, MTU derived from 9000.
	p8 := h8.Ports[0]
	if p8.Used || p8.MTU != 4096 || p8.GIDIndex == nil || *p8.GIDIndex != 5 || p8.LinkLayer != "Ethernet" {
		t.Errorf("mlx5_8 port = %+v", p8)
	}
	// Without NCCL_IB_GID_INDEX the index is the one NCCL picks.
	r = runTree(t, tree, Options{})
	if g := r.Facts.HCAs[8].Ports[0].GIDIndex; g == nil || *g != 3 || r.Facts.Time != "" {
		t.Errorf("picked GID index %v, time %q", g, r.Facts.Time)
	}
}

func TestRDMACoreVersion(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"libibverbs.so", "libibverbs.so.1", "libibverbs.so.1.14.50.0", "libibverbs.so.1.14.50.0.debug"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := RDMACoreVersion([]string{filepath.Join(dir, "none"), dir}); got != "50.0" {
		t.Errorf("RDMACoreVersion = %q, want 50.0", got)
	}
	if got := RDMACoreVersion([]string{t.TempDir()}); got != "" {
		t.Errorf("no library: %q", got)
	}
}

// TestNCCLLogAnalysis: doctor --nccl-log reports the log's classified
// errors and carries the per-host analysis in its JSON.
func TestNCCLLogAnalysis(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "ncclog", "testdata", "job-4hosts.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := runTree(t, hosttree.HGX("node-a"), Options{Env: hosttree.HGXEnv(), NCCLLog: f, NCCLLogName: "job.log"})
	for _, w := range []want{
		{"nccl.log.error", "completion", Warn, "node-c line 27: NET/IB : Got completion from peer 10.1.0.4<51732> with error 12"},
		{"nccl.log.error", "verbs_call", Warn, "node-c line 28: Call to ibv_reg_mr failed with error Cannot allocate memory"},
		{"nccl.log.error", "watchdog_timeout", Warn, "rank 3 line 34"},
		{"nccl.log.init", "nccl", Warn, "node-c: comm 0x77f3 rank 2"},
		{"nccl.log.versions", "nccl", Warn, "mixed NCCL versions: 2.18.3, 2.19.3"},
		{"nccl.log.transport", "nccl", Fail, "(NCCL_IB_DISABLE=1 was set in the job's environment)"},
	} {
		assertFinding(t, r, w)
	}
	if e := r.Find("nccl.log.error", "verbs_call"); len(e) != 2 || !strings.Contains(e[0].Remedy, "raise the memlock limit") {
		t.Errorf("verbs errors %+v", e)
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		NCCLLog struct {
			Transport string
			Hosts     []struct{ Host, GDR string }
		} `json:"nccl_log"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc.NCCLLog.Transport != "socket" || len(doc.NCCLLog.Hosts) != 5 {
		t.Errorf("JSON nccl_log: %v %+v", err, doc.NCCLLog)
	}
}
