package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A report of a capture must not pass this machine's rdma-core off as the
// captured host's, and must name the values that are this machine's.
func TestDoctorCaptureJSON(t *testing.T) {
	here := t.TempDir() // this machine has rdma-core 50.0
	if err := os.WriteFile(filepath.Join(here, "libibverbs.so.1.14.50.0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old := libDirs
	libDirs = []string{here}
	defer func() { libDirs = old }()
	_, stdout, stderr := runDoctorTest(t, []string{"NCCL_DEBUG=WARN"}, rxeArgs("--json")...)
	var doc struct {
		Host struct {
			RDMACore       string            `json:"rdma_core"`
			Capture        bool              `json:"capture"`
			NotFromCapture map[string]string `json:"not_from_capture"`
		} `json:"host"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("%v\n%s%s", err, stdout, stderr)
	}
	h := doc.Host
	if h.RDMACore != "" || !h.Capture {
		t.Errorf("rdma_core %q capture %v, want no rdma_core (the capture has none) and capture true", h.RDMACore, h.Capture)
	}
	for _, k := range []string{"nccl_env", "time", "tool_version"} {
		if h.NotFromCapture[k] == "" {
			t.Errorf("not_from_capture lacks %s: %v", k, h.NotFromCapture)
		}
	}
}

func TestDevicesSysfsRoot(t *testing.T) {
	sys := filepath.Join(rxeFixture, "sys")
	var out, errOut bytes.Buffer
	if code := runDevices([]string{"--sysfs-root", sys, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var doc struct {
		Devices []struct {
			Name         string   `json:"name"`
			Capture      string   `json:"capture"`
			NotInCapture []string `json:"not_in_capture"`
			Ports        []struct {
				State        string `json:"state"`
				NCCLGIDIndex int    `json:"nccl_gid_index"`
				Netdev       string `json:"netdev"`
			} `json:"ports"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Devices) != 1 || len(doc.Devices[0].Ports) != 1 {
		t.Fatalf("got %s", out.String())
	}
	d := doc.Devices[0]
	p := d.Ports[0]
	if d.Name != "rxe0" || d.Capture != sys || strings.Join(d.NotInCapture, ",") != "active_mtu,max_mtu" ||
		p.State != "ACTIVE" || p.NCCLGIDIndex != 1 || p.Netdev != "veth0" {
		t.Errorf("got %s", out.String())
	}
	out.Reset()
	if code := runDevices([]string{"--sysfs-root", sys}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "MTU not in sysfs") ||
		!strings.Contains(out.String(), "<- NCCL_IB_GID_INDEX=1") {
		t.Errorf("text: exit %d\n%s", code, out.String())
	}
	for _, args := range [][]string{{"--sysfs-root", filepath.Join(t.TempDir(), "nope")}, {"--sysfs-root", sys, "-d", "mlx5_0"}, {"--sysfs-root", t.TempDir()}} {
		errOut.Reset()
		if code := runDevices(args, &out, &errOut); code == 0 || strings.Count(strings.TrimSpace(errOut.String()), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q: want one line and a failure", args, code, errOut.String())
		}
	}
}

// A capture without node_type (node_exporter's, in doctor's corpus) still
// says which device is iWARP, and how it was told, in text and JSON; the
// other device, an InfiniBand mlx4, says nothing of the kind.
func TestDevicesSysfsRootIWARPWithoutNodeType(t *testing.T) {
	sys := filepath.Join("..", "..", "doctor", "testdata", "corpus", "node-exporter-iwarp-bond", "sys")
	const how = "hca_type I40IW; no node_type in the capture"
	var out, errOut bytes.Buffer
	if code := runDevices([]string{"--sysfs-root", sys}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(lines[0], "i40iw0  iWARP ("+how+")  fw 0.2") || strings.Count(out.String(), "iWARP") != 1 {
		t.Errorf("text:\n%s", out.String())
	}
	out.Reset()
	if code := runDevices([]string{"--sysfs-root", sys, "--json"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var doc struct {
		Devices []struct {
			Name     string `json:"name"`
			NodeType string `json:"node_type"`
			IWARP    string `json:"iwarp"`
		} `json:"devices"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range doc.Devices {
		got[d.Name] = d.NodeType + "|" + d.IWARP
	}
	if len(got) != 2 || got["i40iw0"] != "|"+how || got["mlx4_0"] != "|" {
		t.Errorf("devices %v", got)
	}
}
