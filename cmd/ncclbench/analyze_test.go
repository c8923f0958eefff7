package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func runAnalyze(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(append([]string{"ncclbench", "analyze"}, args...), &out, &errOut)
	return code, out.String(), errOut.String()
}

func ncclogFixture(name string) string { return filepath.Join("..", "..", "ncclog", "testdata", name) }

func TestAnalyzeHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		code, out, errOut := runAnalyze(arg)
		if code != 0 || !strings.HasPrefix(out, "usage: ncclbench analyze [--json] NCCL_LOG_FILE...") || !strings.Contains(out, "--json") || errOut != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q", arg, code, out, errOut)
		}
	}
	for _, args := range [][]string{{}, {"--bogus", "x.log"}} {
		if code, _, errOut := runAnalyze(args...); code != exitUsage || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
	if code, _, errOut := runAnalyze(filepath.Join(t.TempDir(), "none.log")); code != exitFail || strings.Count(errOut, "\n") != 1 {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

func TestAnalyzeJSON(t *testing.T) {
	code, out, errOut := runAnalyze("--json", ncclogFixture("job-4hosts.log"), ncclogFixture("nccl-2.28-ibext.log"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var doc struct {
		NCCLVersions    []string `json:"nccl_versions"`
		Network         string   `json:"network"`
		Transport       string   `json:"transport"`
		SocketFallback  bool     `json:"socket_fallback"`
		IBDisabledByEnv bool     `json:"ib_disabled_by_env"`
		GDR             string   `json:"gdr"`
		Errors          []struct {
			Kind, Status, Meaning, Host, Line string
		} `json:"errors"`
		Hosts []struct {
			Host      string `json:"host"`
			Transport string `json:"transport"`
			GDR       string `json:"gdr"`
		} `json:"hosts"`
		Log struct {
			Version string `json:"version"`
		} `json:"log"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if strings.Join(doc.NCCLVersions, ",") != "2.18.3,2.19.3,2.28.9" || doc.Transport != "socket" || !doc.SocketFallback || !doc.IBDisabledByEnv || doc.GDR != "partial" {
		t.Errorf("overall %+v", doc)
	}
	if len(doc.Hosts) != 6 || doc.Hosts[0].Host != "h1" || doc.Hosts[0].Transport != "roce" || doc.Hosts[2].Host != "node-b" || doc.Hosts[2].Transport != "socket" {
		t.Errorf("hosts %+v", doc.Hosts)
	}
	// Two files: errors cite FILE:LINE.
	var cited bool
	for _, e := range doc.Errors {
		cited = cited || (e.Kind == "completion" && e.Status == "4" && e.Host == "h1" && strings.HasSuffix(e.Line, "nccl-2.28-ibext.log:10"))
	}
	if !cited || len(doc.Errors) != 5 {
		t.Errorf("errors %+v", doc.Errors)
	}
	if doc.Log.Version == "" {
		t.Error("the parsed log is missing")
	}
}

func TestAnalyzeText(t *testing.T) {
	code, out, _ := runAnalyze(ncclogFixture("job-4hosts.log"))
	for _, want := range []string{
		"Host node-b:    NCCL 2.18.3, network Socket, transport socket, GPUDirect RDMA no, bootstrap eth0:10.0.0.2<0>",
		"FINDING:        node-b: falls back to TCP sockets between nodes: NCCL_IB_DISABLE=1 from the environment is the cause",
		"FINDING:        mixed NCCL versions: 2.18.3 on node-a, node-b, node-d; 2.19.3 on node-c",
		"ERROR:          [node-c completion line 27] IBV_WC_RETRY_EXC_ERR",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}
