package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/version"
)

// version reports the NCCL the run's own loader finds (the test library
// here, NCCL 2.29.1) and, without one, why not, still exiting 0.
func TestVersionCommand(t *testing.T) {
	p := runOne(t, nil, "version", "--json", "--nccl-lib", fakeLib)
	var in version.Info
	if err := json.Unmarshal(p.stdout.Bytes(), &in); p.code != 0 || err != nil {
		t.Fatalf("exit %d, %v: %s %s", p.code, err, p.stdout.String(), p.stderr.String())
	}
	abs, _ := filepath.Abs(fakeLib)
	if in.Tool != "ncclbench" || in.Version == "" || !strings.HasPrefix(in.Go, "go") || in.VerbsBuilt != "" {
		t.Errorf("version = %+v", in)
	}
	if in.NCCL == nil || in.NCCL.Version != "2.29.1" || in.NCCL.Path != abs || in.CUDART == nil || in.CUDART.Path != abs {
		t.Errorf("nccl %+v cudart %+v, want 2.29.1 and both at %s", in.NCCL, in.CUDART, abs)
	}
	p = runOne(t, nil, "--version", "--nccl-lib", filepath.Join(t.TempDir(), "none"))
	if out := p.stdout.String(); p.code != 0 || !strings.HasPrefix(out, "ncclbench ") || !strings.Contains(out, "NCCL:              cannot load NCCL") {
		t.Errorf("exit %d:\n%s%s", p.code, out, p.stderr.String())
	}
	if p := runOne(t, nil, "version", "extra"); p.code != exitUsage || strings.Count(p.stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q: want %d and one line", p.code, p.stderr.String(), exitUsage)
	}
}

// The run's JSON carries the same version object, with the NCCL it ran on.
func TestJSONCarriesVersion(t *testing.T) {
	p := runRanks(t, 1, nil, "all_reduce", "-b", "8", "-e", "8", "-n", "1", "-w", "0", "--json")[0]
	r := jsonRun(t, p)
	if v := r.Version; v == nil || v.Tool != "ncclbench" || v.NCCL == nil || v.NCCL.Version != r.NCCLVersion || v.NCCL.Path != r.NCCLLibrary {
		t.Errorf("version %+v; run nccl %s at %s", v, r.NCCLVersion, r.NCCLLibrary)
	}
}
