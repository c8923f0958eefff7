package main

import (
	"path/filepath"
	"testing"

	"github.com/rdmabench/rdmabench/internal/docgen"
	"github.com/rdmabench/rdmabench/internal/golden"
)

// docs/reference is what this binary's flag sets make, and every flag has
// its help text: a flag added without updating the committed pages, or
// without a usage, fails here (-update or make docs rewrites the pages).
func TestReference(t *testing.T) {
	m, err := docgen.NewModel(tool())
	if err != nil {
		t.Fatalf("%v\n(give each flag its usage in its definition, and a description in help/COMMAND.md only the flags its command has: the man pages and docs/reference show them)", err)
	}
	if err := docgen.CheckReference(filepath.Join("..", "..", "docs", "reference"), m, true, golden.Update()); err != nil {
		t.Error(err)
	}
}
