package docgen

import (
	"path/filepath"
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
)

// RunReferenceTest is a binary's reference test: docs/reference is what
// its flag sets make, and every flag has its help text. A flag added
// without updating the committed pages, or without a usage, fails (-update
// or make docs rewrites the pages); hint says where a missing usage goes.
// split is CheckReference's.
func RunReferenceTest(t testing.TB, tool Tool, split bool, hint string) {
	t.Helper()
	m, err := NewModel(tool)
	if err != nil {
		t.Fatalf("%v\n(%s)", err, hint)
	}
	if err := CheckReference(filepath.Join("..", "..", "docs", "reference"), m, split, golden.Update()); err != nil {
		t.Error(err)
	}
}
