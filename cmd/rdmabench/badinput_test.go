package main

import (
	"os"
	"testing"

	"github.com/rdmabench/rdmabench/internal/badinput"
	"github.com/rdmabench/rdmabench/internal/testenv"
)

// badInputFixtures are the table's generated files ($G), by name; each
// part's test file adds its own in an init.
var badInputFixtures = map[string]func(path string) error{}

// TestBadInput runs testdata/badinput/*.txt: every bad input a user can
// type, the exit status it must give (docs/exit-codes.md) and the one line
// it must print. Each row is a process of its own (this test binary as
// rdmabench) on the zero-cost NIC, so that the rows that reach a device
// find fake0 here as on any host.
func TestBadInput(t *testing.T) {
	if os.Getenv("RDMABENCH_REQUIRE_HW") == "1" {
		t.Skip("the bad-input table runs on the host's zero-cost NIC (make unit); here the device is rxe0")
	}
	lib := testenv.FakeVerbsDir(t)
	badinput.Table{
		Dir:      "testdata/badinput",
		Generate: badInputFixtures,
		Env:      []string{"RDMABENCH_RUN_MAIN=1", "LD_LIBRARY_PATH=" + lib},
	}.Run(t, 100)
}
