package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rxeFixture is doctor's soft-RoCE fixture; it has no ':' in its names, so
// it can be read in place.
var rxeFixture = filepath.Join("..", "..", "doctor", "testdata", "rxe")

func rxeArgs(extra ...string) []string {
	return append([]string{
		"--sysfs-root", filepath.Join(rxeFixture, "sys"),
		"--proc-root", filepath.Join(rxeFixture, "proc"),
		"--dev-root", filepath.Join(rxeFixture, "dev"),
	}, extra...)
}

func runDoctorTest(t *testing.T, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return runWithEnviron(t, runDoctor, environ, args...)
}

// runWithEnviron runs a command that reads NCCL_* from doctorEnviron with
// environ in its place.
func runWithEnviron(t *testing.T, cmd func([]string, io.Writer, io.Writer) int, environ []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	old := doctorEnviron
	doctorEnviron = func() []string { return environ }
	defer func() { doctorEnviron = old }()
	var out, errOut bytes.Buffer
	code = cmd(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDoctorUsageErrors(t *testing.T) {
	badDevinfo := writeFile(t, "devinfo.txt", "nothing here\n")
	for name, args := range map[string][]string{
		"unknown flag":     {"--bogus"},
		"extra argument":   rxeArgs("extra"),
		"missing sysfs":    {"--sysfs-root", filepath.Join(t.TempDir(), "nope")},
		"unreadable log":   rxeArgs("--nccl-log", filepath.Join(t.TempDir(), "nope.log")),
		"missing env file": rxeArgs("--env-file", filepath.Join(t.TempDir(), "nope.env")),
		"bad devinfo":      rxeArgs("--ibv-devinfo", badDevinfo),
		"negative watch":   rxeArgs("--watch", "-1"),
		"bad rate":         rxeArgs("--expect-rate", "fast"),
		"unknown -d":       rxeArgs("-d", "mlx5_9"),
		"bad -d port":      rxeArgs("-d", "rxe0:x"),
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runDoctorTest(t, nil, args...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if lines := strings.Count(stderr, "\n"); lines != 1 || !strings.HasPrefix(stderr, "rdmabench doctor: ") {
				t.Errorf("stderr = %q, want one 'rdmabench doctor:' line", stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
		})
	}
}

func TestDoctorRxeHealthy(t *testing.T) {
	code, stdout, stderr := runDoctorTest(t, nil, rxeArgs()...)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{"PASS  rdma.devices", "PASS  gid.roce_v2", "index 1 (gid 1: RoCE v2 ::ffff:198.18.0.1 on veth0)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestDoctorWrongGIDFromEnvFile: the Done-when case on the rxe fixture,
// with the env file overriding the process environment.
func TestDoctorWrongGIDFromEnvFile(t *testing.T) {
	env := writeFile(t, "job.sh", "#!/bin/bash\nexport NCCL_IB_GID_INDEX=0\nsrun python train.py\n")
	code, stdout, _ := runDoctorTest(t, []string{"NCCL_IB_GID_INDEX=1", "PATH=/bin"}, rxeArgs("--env-file", env)...)
	if code != 1 {
		t.Errorf("exit %d, want 1 (a FAIL)", code)
	}
	if !strings.Contains(stdout, "FAIL  nccl.gid_index") || !strings.Contains(stdout, "→ set NCCL_IB_GID_INDEX=1 (") {
		t.Errorf("no FAIL naming index 1:\n%s", stdout)
	}
}

func TestDoctorEnvFromProcess(t *testing.T) {
	code, stdout, _ := runDoctorTest(t, []string{"NCCL_IB_GID_INDEX=1", "NCCL_IB_DISABLE=1"}, rxeArgs()...)
	if code != 0 {
		t.Errorf("exit %d, want 0 (WARNs only)", code)
	}
	if !strings.Contains(stdout, "PASS  nccl.gid_index") || !strings.Contains(stdout, "WARN  nccl.ib_disable") {
		t.Errorf("environment not used:\n%s", stdout)
	}
}

func TestDoctorJSON(t *testing.T) {
	code, stdout, _ := runDoctorTest(t, []string{"NCCL_IB_GID_INDEX=0"}, rxeArgs("--json")...)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	var doc struct {
		Schema   int `json:"schema"`
		Findings []struct {
			Check, Status, Subject, Value, Source, Remedy string
		} `json:"findings"`
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if doc.Schema != 1 || doc.Summary["fail"] != 1 || len(doc.Findings) == 0 {
		t.Errorf("schema %d summary %v findings %d", doc.Schema, doc.Summary, len(doc.Findings))
	}
}

// TestFleetCommand: doctor --json from two nodes (the rxe fixture, once
// with a wrong GID index), then fleet over the directory.
func TestFleetCommand(t *testing.T) {
	dir := t.TempDir()
	for name, environ := range map[string][]string{"a": {"NCCL_IB_GID_INDEX=1"}, "b": {"NCCL_IB_GID_INDEX=0"}} {
		_, stdout, _ := runDoctorTest(t, environ, rxeArgs("--json")...)
		if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out, errOut bytes.Buffer
	code := runFleet([]string{dir}, &out, &errOut)
	if code != 1 || errOut.Len() != 0 {
		t.Errorf("exit %d, stderr %q; want 1", code, errOut.String())
	}
	// The fixture has no hostname: the file names stand in.
	// One against one: no majority; the smaller value stands first.
	for _, want := range []string{"2 hosts", "! nccl_env/NCCL_IB_GID_INDEX", "0 (1 of 2, no majority)  a=1", "b     1     8     -"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := runFleet([]string{"--json", filepath.Join(dir, "a.json")}, &out, &errOut); code != 0 {
		t.Errorf("one host: exit %d", code)
	}
	var doc struct{ Hosts []struct{ Host string } }
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.Hosts) != 1 || doc.Hosts[0].Host != "a" {
		t.Errorf("--json: %v %+v", err, doc)
	}
	for _, args := range [][]string{{}, {filepath.Join(dir, "nope.json")}, {"--bogus", dir}} {
		errOut.Reset()
		if code := runFleet(args, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, errOut.String())
		}
	}
}
