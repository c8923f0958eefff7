package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/expect"
)

const pairsIn = "write_bw -u 18 -t 8 65536\thigher\tMiB/s\t30,31,29,30,32,28,30,31,29,30,31\t30,30,29,31,31,29,30,30,29,31,x\n" +
	"send_lat 8\tlower\tus\t15,15,16,15,15,16,15,15,16,15,15\t10,10,11,10,10,11,10,10,11,10,10\n"

func TestTableAndJSON(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bench.json")
	var out, errOut bytes.Buffer
	code := run([]string{"--json", file}, strings.NewReader(pairsIn), &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	text := out.String()
	expect.Contains(t, "table", text,
		"2 cases at 95% family-wise (Bonferroni: each interval at 97.50%",
		"write_bw -u 18 -t 8 65536  10 (1 lost)  ", "level within ±",
		"send_lat 8", "faster (lower is better)",
	)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var d doc
	if err := json.Unmarshal(b, &d); err != nil || d.Schema != 1 || len(d.Cases) != 2 {
		t.Fatalf("JSON %v:\n%s", err, b)
	}
	if c := d.Cases[0]; c.Pairs != 10 || c.Rdmabench[10] != nil || c.Verdict != "level" || c.Better != "higher" {
		t.Errorf("case 0: %+v", c)
	}
	if c := d.Cases[1]; c.Verdict != "faster" || c.Interval[1] >= 1 {
		t.Errorf("case 1: %+v", c)
	}

	// Pooling two benches doubles each case's pairs; a case slower by a
	// third makes the exit 1.
	var pooled bytes.Buffer
	if code := run([]string{"--pool", file, file}, nil, &pooled, &errOut); code != 0 {
		t.Fatalf("--pool: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(pooled.String(), "write_bw -u 18 -t 8 65536  20 (2 lost)  ") {
		t.Errorf("pooled:\n%s", pooled.String())
	}
	slow := "read_bw 65536\thigher\tMiB/s\t30,30,30,30,30,30,30,30\t20,20,20,21,20,19,20,20\n"
	out.Reset()
	if code := run(nil, strings.NewReader(slow), &out, &errOut); code != 1 || !strings.Contains(out.String(), "slower (higher is better)") {
		t.Errorf("slower case: exit %d\n%s", code, out.String())
	}
	few := "read_bw 65536\thigher\tMiB/s\t30,30,30\t30,31,29\n"
	out.Reset()
	if code := run(nil, strings.NewReader(few), &out, &errOut); code != 1 || !strings.Contains(out.String(), "too few pairs (3;") {
		t.Errorf("three pairs: exit %d\n%s", code, out.String())
	}
}

// A case held to a target other than 1 (bench-overhead's): rdmabench's
// cost against the bare loop's, at most 1.25 times, and two threads' rate
// against one's, at least 1.8 times.
func TestTarget(t *testing.T) {
	in := "write_bw 2 B: rdmabench/bare loop\tlower\tns/msg\t20,20,20,20,20,20,20,20,20,20\t23,24,23,22,24,23,23,24,22,23\t1.25\n" +
		"send_bw 2 B: rdmabench/bare loop\tlower\tns/msg\t20,20,20,20,20,20,20,20,20,20\t30,29,31,30,28,30,31,30,29,30\t1.25\n" +
		"write_bw 2 B: 2 threads/1\thigher\tMmsg/s\t40,40,40,40,40,40,40,40,40,40\t71,73,72,74,70,69,72,75,71,72\t1.8\n"
	var out, errOut bytes.Buffer
	code := run(nil, strings.NewReader(in), &out, &errOut)
	if code != 1 {
		t.Errorf("exit %d, want 1 (one case misses its target)", code)
	}
	for _, want := range []string{"better than target 1.25 (lower is better)", "worse than target 1.25 (lower is better)", "level with target 1.8 within ±"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// The target survives --json and --pool; pooling it with another
	// target for the same case is an error.
	file := filepath.Join(t.TempDir(), "bench.json")
	run([]string{"--json", file}, strings.NewReader(in), &out, &errOut)
	out.Reset()
	if code := run([]string{"--pool", file}, nil, &out, &errOut); code != 1 || !strings.Contains(out.String(), "worse than target 1.25") {
		t.Errorf("--pool: exit %d:\n%s", code, out.String())
	}
	other := filepath.Join(t.TempDir(), "other.json")
	run([]string{"--json", other}, strings.NewReader(strings.ReplaceAll(in, "\t1.25\n", "\t1.5\n")), &out, &errOut)
	errOut.Reset()
	if code := run([]string{"--pool", file, other}, nil, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "held to 1.5 here, 1.25 before") {
		t.Errorf("mixed targets: exit %d %q", code, errOut.String())
	}
}

// Bad input: one line, exit 2.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "no cases"},
		{"a\thigher\tu\t1,2\n", "4 fields, want 5"},
		{"a\thigher\tu\t1\t1\t0\n", `target "0": want a ratio above 0`},
		{"a\tfaster\tu\t1\t1\n", `"faster": want higher or lower`},
		{"a\thigher\tu\t1,2\t1\n", "2 perftest runs, 1 rdmabench runs"},
		{"a\thigher\tu\tx\tx\n", "no pair gave both figures"},
	} {
		var out, errOut bytes.Buffer
		code := run(nil, strings.NewReader(tc.in), &out, &errOut)
		if code != 2 || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d %q, want %q", tc.in, code, errOut.String(), tc.want)
		}
	}
}
