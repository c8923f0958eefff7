package main

import (
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/doctor/fleet"
)

func init() {
	register("fleet", "compare many nodes' doctor --json reports: which node is not like the others", runFleet)
}

// runFleet: exit 0 when every host agrees on the facts that matter and none
// has a FAIL, 1 otherwise, 2 on bad input.
func runFleet(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("fleet", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rdmabench fleet [--json] FILE.json|DIR ...")
		fmt.Fprintln(stderr, "  reads the reports of 'rdmabench doctor --json' from many nodes (every *.json and *.json.NODE in a DIR)")
		fs.PrintDefaults()
	}
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "rdmabench fleet: no reports given (FILE.json ... or a directory of them)")
		return 2
	}
	hosts, err := fleet.Load(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench fleet: %v\n", err)
		return 2
	}
	r := fleet.Compare(hosts)
	if *asJSON {
		r.Version = toolInfo()
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "fleet: %v", err)
	}
	if r.Failed() {
		return 1
	}
	return 0
}
