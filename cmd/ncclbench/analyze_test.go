package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/exitcode"
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
	if code, _, errOut := runAnalyze(filepath.Join(t.TempDir(), "none.log")); code != exitcode.BadInput || strings.Count(errOut, "\n") != 1 {
		t.Errorf("missing file: exit %d, stderr %q", code, errOut)
	}
}

func TestAnalyzeJSON(t *testing.T) {
	code, out, errOut := runAnalyze("--json", ncclogFixture("job-4hosts.log"), ncclogFixture("nccl-2.28-ibext.log"))
	if code != exitcode.Findings {
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
		if code != exitcode.Findings || !strings.Contains(out, want) {
			t.Errorf("exit %d, output lacks %q:\n%s", code, want, out)
		}
	}
}

// analyze's exit status gates CI: 0 a log with nothing wrong, 1 findings,
// 2 input that is no NCCL log. It exited 0 for all of these.
func TestAnalyzeExitCodes(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	data, err := os.ReadFile(ncclogFixture("nccl-2.19-socket-fallback.log"))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(data)
	zw.Close()
	long := append(bytes.Repeat([]byte("x"), 5<<20), '\n')
	clean, err := os.ReadFile(ncclogFixture("nccl-2.30-ib-gdr.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string // in stderr for 2, in stdout for 0 and 1
	}{
		{[]string{"/dev/null"}, exitcode.BadInput, "/dev/null is empty"},
		{[]string{write("a.bin", []byte("\x7fELF\x02\x01\x01\x00\x00"))}, exitcode.BadInput, "binary data"},
		{[]string{write("run.json", []byte(`{"schema": 1, "results": []}`))}, exitcode.BadInput, "is a JSON document"},
		{[]string{write("app.txt", []byte("epoch 1 loss 0.3\n"))}, exitcode.BadInput, "no NCCL line"},
		{[]string{dir}, exitcode.BadInput, "is a directory"},
		{[]string{ncclogFixture("nccl-2.30-ib-gdr.log"), write("empty.log", nil)}, exitcode.BadInput, "empty.log is empty"},
		{[]string{ncclogFixture("nccl-2.30-ib-gdr.log")}, exitcode.OK, "Verdict:        OK"},
		{[]string{write("long.log", append(long, clean...))}, exitcode.OK, "1 line(s) over 1 MiB skipped"},
		{[]string{ncclogFixture("nccl-2.19-socket-fallback.log")}, exitcode.Findings, "falls back to TCP sockets"},
		{[]string{write("fallback.log.gz", gz.Bytes())}, exitcode.Findings, "falls back to TCP sockets"},
		{[]string{ncclogFixture("nccl-2.28-ibext.log")}, exitcode.Findings, "1 problem(s) found (exit 1): completion error at line 10"},
	} {
		code, out, errOut := runAnalyze(c.args...)
		text := out
		if c.code == exitcode.BadInput {
			text = errOut
			if strings.Count(errOut, "\n") != 1 {
				t.Errorf("%q: stderr is not one line: %q", c.args, errOut)
			}
		}
		if code != c.code || !strings.Contains(text, c.want) {
			t.Errorf("%q: exit %d, want %d and %q in:\n%s%s", c.args, code, c.code, c.want, out, errOut)
		}
	}
	// --json carries the reasons of exit 1.
	code, out, _ := runAnalyze("--json", ncclogFixture("nccl-2.19-socket-fallback.log"))
	var doc struct{ Problems []string }
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitcode.Findings || len(doc.Problems) != 1 {
		t.Errorf("--json: exit %d, %v, problems %q", code, err, doc.Problems)
	}
}
