package doctor

import (
	"path/filepath"
	"testing"

	"github.com/rdmabench/rdmabench/doctor/internal/hosttree"
)

// runTree writes a generated host and runs doctor over it.
func runTree(t *testing.T, tree *hosttree.Tree, opts Options) *Report {
	t.Helper()
	root := t.TempDir()
	if err := tree.Write(root); err != nil {
		t.Fatal(err)
	}
	opts.SysRoot, opts.ProcRoot, opts.DevRoot = filepath.Join(root, "sys"), filepath.Join(root, "proc"), filepath.Join(root, "dev")
	r, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestScratch(t *testing.T) {
	r := runTree(t, hosttree.HGX("node01"), Options{Env: hosttree.HGXEnv(), ExpectRateGbps: 400})
	logReport(t, r)
}
