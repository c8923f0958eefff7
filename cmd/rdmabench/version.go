package main

import (
	"encoding/json"
	"io"
	"sync"

	"github.com/rdmabench/rdmabench/internal/version"
)

func init() {
	register("version", "print the version, the Go that built it, and the libibverbs built against and loaded", runVersion)
}

// toolInfo is what every JSON document says of the binary that wrote it.
var toolInfo = sync.OnceValue(func() *version.Info {
	in := version.Get("rdmabench", true)
	return &in
})

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version", stderr)
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return fail(stderr, "version: takes no arguments (got %q)", fs.Arg(0))
	}
	var err error
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(toolInfo())
	} else {
		err = toolInfo().WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "version: %v", err)
	}
	return 0
}
