// Package ntanalyzer finds and runs nccl-tests' own reader of its JSON
// files (tools/analyze_perf_json.py of nccl-tests 2.19.6), for the tests
// that check that ncclbench's -J file is one nccl-tests' tools read. The
// script is NVIDIA's, not ours, so it is not in the repository:
// ci/deps.sh fetches it, pinned by its SHA-256, into DefaultPath;
// NCCL_TESTS_ANALYZER names another copy.
package ntanalyzer

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// DefaultPath is where ci/deps.sh puts the script.
func DefaultPath() string {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "rdmabench", "nccl-tests-2.19.6", "analyze_perf_json.py")
}

// Path is the analyzer, or skips t with how to get it.
func Path(t testing.TB) string {
	t.Helper()
	p := os.Getenv("NCCL_TESTS_ANALYZER")
	if p == "" {
		p = DefaultPath()
	}
	if _, err := os.Stat(p); err != nil {
		t.Skipf("nccl-tests' analyze_perf_json.py not found at %s (ci/deps.sh fetches it; or set NCCL_TESTS_ANALYZER)", p)
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: nccl-tests' analyzer is a Python script")
	}
	return p
}

// Run runs the analyzer on file with args and returns its output; a
// failure (a Python exception on our file) fails t.
func Run(t testing.TB, file string, args ...string) string {
	t.Helper()
	p := Path(t)
	cmd := exec.Command("python3", append([]string{p, file}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 %s %s %v: %v\n%s", p, file, args, err, out)
	}
	return string(out)
}
