package main

import (
	"testing"

	"github.com/rdmabench/rdmabench/internal/docgen"
)

// docs/reference is what this binary's flag sets make, and every flag has
// its help text.
func TestReference(t *testing.T) {
	docgen.RunReferenceTest(t, tool(), false,
		"give each its usage in the flag's definition: the man page and docs/reference show it")
}
