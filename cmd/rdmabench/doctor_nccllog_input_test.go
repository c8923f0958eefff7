package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// doctor --nccl-log reads a log with a line over the old 4 MiB bound
// (it stopped with "bufio.Scanner: token too long"), and refuses input
// that is no NCCL log in one line, exit 2.
func TestDoctorNCCLLogInput(t *testing.T) {
	dir := t.TempDir()
	for name, gen := range badInputFixtures {
		if strings.HasPrefix(name, "an-") {
			if err := gen(filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, stdout, stderr := runDoctorTest(t, nil, rxeArgs("--nccl-log", filepath.Join(dir, "an-5mib-line.log"))...)
	if code == 2 || stderr != "" || !strings.Contains(stdout, "IB") {
		t.Errorf("5 MiB line: exit %d, stderr %q\n%s", code, stderr, stdout)
	}
	jsonDoc := writeFile(t, "run.json", `{"schema": 1}`)
	for _, c := range []struct{ log, want string }{
		{os.DevNull, "is empty"},
		{filepath.Join(dir, "an-binary.bin"), "binary data"},
		{jsonDoc, "is a JSON document"},
		{dir, "is a directory"},
	} {
		code, stdout, stderr := runDoctorTest(t, nil, rxeArgs("--nccl-log", c.log)...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%s: exit %d, stderr %q, want 2 and one line with %q", c.log, code, stderr, c.want)
		}
	}
}
