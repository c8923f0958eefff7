package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/exitcode"
)

// Every output flag is checked before NCCL is loaded (here: a library
// that does not exist, which would fail with 3 if reached): exit 2 and one
// line naming the flag. Only -J's name was checked before.
func TestOutputsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noLib := filepath.Join(dir, "none", "libnccl.so.2")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--save", filepath.Join(dir, "nodir", "x.json")}, "--save " + filepath.Join(dir, "nodir", "x.json") + ": directory"},
		{[]string{"--save", dir}, "is a directory"},
		{[]string{"-J", filepath.Join(dir, "nodir", "x.json")}, "-J "},
		{[]string{"--metrics", filepath.Join(dir, "nodir", "m.prom")}, "--metrics "},
		{[]string{"--nccl-log", filepath.Join(dir, "nodir", "nccl.log")}, "--nccl-log "},
		{[]string{"--save", filepath.Join(dir, "a.json"), "--metrics", filepath.Join(dir, "a.json")}, "the same file as --save"},
		{[]string{"--token-file", token, "--nccl-log", token}, "is also an input"},
	} {
		var out, errOut bytes.Buffer
		args := append([]string{"ncclbench", "all_reduce", "--nccl-lib", noLib, "--cudart-lib", noLib}, c.args...)
		code := run(args, &out, &errOut)
		if code != exitcode.BadInput || strings.Count(errOut.String(), "\n") != 1 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q, want 2 and one line with %q", c.args, code, errOut.String(), c.want)
		}
	}
}
