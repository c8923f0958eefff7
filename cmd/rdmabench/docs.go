package main

import (
	"embed"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/docgen"
)

// docsCommand writes the man page and completions (make dist), or the
// Markdown reference (make docs); it is not in the usage, being for
// packaging.
const docsCommand = "__docs"

// help holds the longer descriptions of commands, help/COMMAND.md each,
// in docgen's small Markdown: the text of the command's man page
// (rdmabench-COMMAND.1) and reference page beyond its flags. Files beside
// the code rather than strings in each command's file, so that prose is
// edited as prose, and the flags it names are checked against the
// command's own (docgen.NewModel).
//
//go:embed help/*.md
var help embed.FS

// description is the command's help/COMMAND.md, "" when it has none.
func description(name string) string {
	b, err := help.ReadFile("help/" + name + ".md")
	if err != nil {
		return ""
	}
	return string(b)
}

// helpFiles are the commands help/ has a description for.
func helpFiles() []string {
	entries, _ := fs.ReadDir(help, "help")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".md"))
	}
	return names
}

// tool is rdmabench as docgen sees it: each command's flags, collected by
// running the command's --help with flagSetMade set.
func tool() docgen.Tool {
	t := docgen.Tool{Name: "rdmabench", Summary: "measure RDMA devices: what they are, whether they are configured well, how fast they move data",
		Version: toolInfo().Version}
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	defer func() { flagSetMade = nil }()
	for _, n := range names {
		var first *pflag.FlagSet
		flagSetMade = func(fs *pflag.FlagSet) {
			if first == nil { // a --load SPEC's own set comes later
				first = fs
			}
		}
		commands[n].run([]string{"--help"}, io.Discard, io.Discard)
		if first == nil {
			first = pflag.NewFlagSet(n, pflag.ContinueOnError)
		}
		t.Commands = append(t.Commands, docgen.Command{Name: n, Summary: commands[n].summary, Flags: first, Description: description(n)})
	}
	return t
}

// runDocs writes DIR/rdmabench.1, DIR/rdmabench-COMMAND.1 for each
// command, DIR/rdmabench.bash and DIR/_rdmabench (make dist), or with
// --reference DIR the Markdown reference, a page a command (make docs:
// docs/reference).
func runDocs(args []string, stdout, stderr io.Writer) int {
	reference := len(args) == 2 && args[0] == "--reference"
	if len(args) != 1 && !reference {
		return fail(stderr, "%s: want the directory to write to, or --reference DIR", docsCommand)
	}
	m, err := docgen.NewModel(tool())
	if err != nil {
		return fail(stderr, "%s: %v", docsCommand, err)
	}
	if reference {
		err = docgen.WriteReference(args[1], m, true)
	} else {
		err = docgen.WriteFiles(args[0], m, true)
	}
	if err != nil {
		return fail(stderr, "%s: %v", docsCommand, err)
	}
	return 0
}
