package main

import (
	"testing"

	"github.com/rdmabench/rdmabench/internal/docgen"
)

// docs/reference is what this binary's flag sets make, a page a command,
// and every flag has its help text.
func TestReference(t *testing.T) {
	docgen.RunReferenceTest(t, tool(), true,
		"give each flag its usage in its definition, and a description in help/COMMAND.md only the flags its command has: the man pages and docs/reference show them")
}
