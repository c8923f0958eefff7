package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/doctor/internal/hosttree"
	"github.com/rdmabench/rdmabench/internal/expect"
)

// writeReport runs doctor over a generated host and saves its --json
// output as dir/<host>.json, as `rdmabench doctor --json > $(hostname).json`
// does on every node.
func writeReport(t *testing.T, dir string, tree *hosttree.Tree, env map[string]string) {
	t.Helper()
	root := t.TempDir()
	if err := tree.Write(root); err != nil {
		t.Fatal(err)
	}
	r, err := doctor.Run(doctor.Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"),
		DevRoot: filepath.Join(root, "dev"), Env: env, ToolVersion: "test", RDMACoreVersion: "50.0"})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, r.Facts.Hostname+".json"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// odd are the three nodes that are not like the others, and how.
var odd = map[string]struct {
	fact, value string
	change      func(*hosttree.Tree, map[string]string)
}{
	"node04": {"hca/mlx5_2/fw", "28.36.1010", func(t *hosttree.Tree, _ map[string]string) {
		t.File(hosttree.DevDir("mlx5_2")+"/fw_ver", "28.36.1010")
	}},
	"node09": {"port/mlx5_6:1/rate", "200 Gb/sec (4X HDR)", func(t *hosttree.Tree, _ map[string]string) {
		t.File(t.PortDir("mlx5_6", 1)+"/rate", "200 Gb/sec (4X HDR)")
	}},
	"node13": {"nccl_env/NCCL_NET_GDR_LEVEL", "2", func(_ *hosttree.Tree, env map[string]string) {
		env["NCCL_NET_GDR_LEVEL"] = "2"
	}},
}

// generateFleet writes n HGX nodes' reports; the odd ones get their change.
func generateFleet(t *testing.T, n int, odd map[string]struct {
	fact, value string
	change      func(*hosttree.Tree, map[string]string)
}) string {
	dir := t.TempDir()
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("node%02d", i)
		tree, env := hosttree.HGX(name), hosttree.HGXEnv()
		if o, ok := odd[name]; ok {
			o.change(tree, env)
		}
		writeReport(t, dir, tree, env)
	}
	return dir
}

func TestFleetNamesTheOddOnesOut(t *testing.T) {
	dir := generateFleet(t, 16, odd)
	hosts, err := Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if len(hosts) != 16 {
		t.Fatalf("%d hosts, want 16", len(hosts))
	}
	// rpdcp's names (doctor.json.node16) are read too.
	if err := os.Rename(filepath.Join(dir, "node16.json"), filepath.Join(dir, "doctor.json.node16")); err != nil {
		t.Fatal(err)
	}
	if hosts, err = Load([]string{dir}); err != nil || len(hosts) != 16 || hosts[15].Name != "node16" {
		t.Fatalf("with doctor.json.node16: %d hosts, %v", len(hosts), err)
	}
	r := Compare(hosts)
	if !r.Failed() {
		t.Error("a fleet with a different firmware, rate and NCCL env does not fail")
	}
	for _, h := range r.Hosts {
		o, isOdd := odd[h.Host]
		switch {
		case isOdd && !slices.Equal(h.Differ, []string{o.fact}):
			t.Errorf("%s differs on %v, want exactly [%s]", h.Host, h.Differ, o.fact)
		case !isOdd && len(h.Differ) > 0:
			t.Errorf("%s differs on %v, want nothing", h.Host, h.Differ)
		}
		if h.Fail != 0 {
			t.Errorf("%s has %d FAILs", h.Host, h.Fail)
		}
	}
	for _, f := range r.Facts {
		var want []HostValue
		for host, o := range odd {
			if o.fact == f.Fact {
				want = append(want, HostValue{host, o.value})
			}
		}
		if !slices.Equal(f.Differ, want) && !(len(want) == 0 && len(f.Differ) == 0) {
			t.Errorf("%s: differ %v, want %v", f.Fact, f.Differ, want)
		}
		if len(want) > 0 && (f.Count != 15 || !f.Matters) {
			t.Errorf("%s: majority %q count %d matters %v", f.Fact, f.Majority, f.Count, f.Matters)
		}
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	expect.Contains(t, "text", text.String(),
		"! hca/mlx5_2/fw", "28.39.1002 (15 of 16)", "node04=28.36.1010",
		"! port/mlx5_6:1/rate", "400 Gb/sec (4X NDR) (15 of 16)", "node09=200 Gb/sec (4X HDR)",
		"! nccl_env/NCCL_NET_GDR_LEVEL", "(absent) (15 of 16)", "node13=2",
		"node13  0     0     nccl_env/NCCL_NET_GDR_LEVEL",
		"node01  0     0     -",
	)
	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Failed bool
		Hosts  []HostLine
		Facts  []Fact
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || !doc.Failed || len(doc.Hosts) != 16 || len(doc.Facts) != len(r.Facts) {
		t.Errorf("JSON: %v failed=%v %d hosts", err, doc.Failed, len(doc.Hosts))
	}
}

func TestFleetAlike(t *testing.T) {
	// A sysctl that differs is shown but does not fail the fleet.
	dir := generateFleet(t, 4, map[string]struct {
		fact, value string
		change      func(*hosttree.Tree, map[string]string)
	}{"node02": {change: func(t *hosttree.Tree, _ map[string]string) {
		t.File("proc/sys/net/core/rmem_max", "212992")
	}}})
	hosts, err := Load([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	r := Compare(hosts)
	if r.Failed() {
		t.Errorf("failed on a sysctl: %+v", r.Hosts)
	}
	if !slices.Equal(r.Hosts[1].Differ, []string{"sysctl/net.core.rmem_max"}) {
		t.Errorf("node02 differs on %v", r.Hosts[1].Differ)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := generateFleet(t, 2, nil)
	write := func(name, content string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	node01 := filepath.Join(dir, "node01.json")
	b, err := os.ReadFile(node01)
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		paths []string
		want  string
	}{
		"duplicate host": {[]string{dir, write("copy.json", string(b))}, "host node01 has two reports"},
		"not JSON":       {[]string{write("x.json", "PASS rdma.devices")}, "not rdmabench doctor --json output"},
		"other JSON":     {[]string{write("x.json", `{"foo": 1}`)}, "not a doctor report"},
		// Other rdmabench documents are named by their kind, not blamed
		// on a schema number that is not a doctor report's.
		"a mesh":    {[]string{write("m.json", `{"schema": 2, "kind": "rdmabench-mesh", "ranks": []}`)}, "m.json is a mesh document (rdmabench mesh --save); fleet reads doctor --json reports"},
		"a run":     {[]string{write("r.json", `{"schema": 2, "test": "write_bw", "results": []}`)}, "r.json is a run document"},
		"a health":  {[]string{write("h.json", `{"schema": 1, "status": "healthy", "exit": 0, "faults": []}`)}, "h.json is a health document (rdmabench health --json)"},
		"no facts":  {[]string{write("x.json", `{"schema": 1, "findings": []}`)}, "no host facts"},
		"empty dir": {[]string{t.TempDir()}, "no doctor reports"},
		"missing":   {[]string{filepath.Join(dir, "nope.json")}, "no such file"},
	} {
		if _, err := Load(c.paths); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", name, err, c.want)
		}
	}
}
