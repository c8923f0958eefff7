package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/docgen"
	"github.com/rdmabench/rdmabench/nccl/bench"
)

// docsCommand writes the man page and completions (make dist), or the
// Markdown reference (make docs); it is not in the usage, being for
// packaging.
const docsCommand = "__docs"

// flagSetMade, when set, is told of each flag set a command makes: the
// docs command collects them.
var flagSetMade func(*pflag.FlagSet)

func newFlagSet(name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	if flagSetMade != nil {
		flagSetMade(fs)
	}
	return fs
}

// tool is ncclbench as docgen sees it: every collective (they share their
// flags), analyze and version, each with the flag set its --help parses.
func tool() docgen.Tool {
	t := docgen.Tool{Name: "ncclbench", Summary: "benchmark NCCL collectives with nccl-tests' flags and table, and read NCCL's log",
		Version: toolInfo(nil, nil).Version}
	defer func() { flagSetMade = nil }()
	collect := func(name, summary string, help func()) {
		var fs *pflag.FlagSet
		flagSetMade = func(f *pflag.FlagSet) { fs = f }
		help()
		t.Commands = append(t.Commands, docgen.Command{Name: name, Summary: summary, Flags: fs})
	}
	for _, c := range bench.Collectives {
		collect(c.Name, "time "+c.NCCL+" over a range of sizes (as "+c.Name+"_perf)", func() { parseFlags(c, []string{"--help"}, io.Discard) })
	}
	collect("analyze", "read NCCL_DEBUG=INFO logs: the network and transports NCCL used", func() { analyze([]string{"--help"}, io.Discard, io.Discard) })
	collect("version", "print the version, and the NCCL and CUDA runtime found", func() { runVersion([]string{"--help"}, io.Discard, io.Discard) })
	return t
}

// runDocs writes DIR/ncclbench.1, DIR/ncclbench.bash and DIR/_ncclbench
// (make dist), or with --reference DIR the Markdown reference, one page
// (make docs: docs/reference/ncclbench.md).
func runDocs(args []string, stderr io.Writer) int {
	reference := len(args) == 2 && args[0] == "--reference"
	if len(args) != 1 && !reference {
		fmt.Fprintf(stderr, "ncclbench %s: want the directory to write to, or --reference DIR\n", docsCommand)
		return exitUsage
	}
	m, err := docgen.NewModel(tool())
	if err == nil && reference {
		err = docgen.WriteReference(args[1], m, false)
	} else if err == nil {
		err = docgen.WriteFiles(args[0], m, false)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ncclbench %s: %v\n", docsCommand, err)
		return exitFail
	}
	return 0
}
