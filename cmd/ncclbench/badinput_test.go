package main

import (
	"testing"

	"github.com/rdmabench/rdmabench/internal/badinput"
)

// badInputFixtures are the table's generated files ($G), by name; each
// part's test file adds its own in an init.
var badInputFixtures = map[string]func(path string) error{}

// TestBadInput runs testdata/badinput/*.txt: every bad input a user can
// type, the exit status it must give (docs/exit-codes.md) and the one line
// it must print, each row a process of its own (this test binary as
// ncclbench); $N is the stand-in NCCL library.
func TestBadInput(t *testing.T) {
	badinput.Table{
		Dir:      "testdata/badinput",
		Generate: badInputFixtures,
		Env:      []string{"NCCLBENCH_TEST_MAIN=1"},
		Extra:    map[string]string{"$N": fakeLib},
	}.Run(t, 25)
}
