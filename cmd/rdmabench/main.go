// Command rdmabench measures RDMA devices: what they are (devices), whether
// they are configured well (doctor), and how fast they move data.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"

	"github.com/rdmabench/rdmabench/internal/suggest"
	"github.com/rdmabench/rdmabench/results"
)

// command is one subcommand. Each lives in its own file and registers itself
// in init, so adding a subcommand touches no shared code.
type command struct {
	summary string
	// run parses args (without the subcommand name) and returns the exit status.
	run func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(name, summary string, run func(args []string, stdout, stderr io.Writer) int) {
	if _, dup := commands[name]; dup {
		panic("rdmabench: subcommand registered twice: " + name)
	}
	commands[name] = command{summary: summary, run: run}
}

func main() {
	// One P. The measurement loops run in C and hold no P, so any number of
	// them still run at once; but the runtime's idle Ps wake threads that
	// steal CPU from busy-polling loops: on 2 vCPUs that tripled p99 latency
	// against perftest. A user's own GOMAXPROCS wins.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	// The main goroutine keeps the main thread, so that no loop goroutine
	// is ever scheduled on it: a loop pins its thread and ends without
	// unlocking, so that the runtime discards the thread, and the runtime
	// cannot discard the main thread.
	runtime.LockOSThread()
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == docsCommand {
		return runDocs(args[1:], stdout, stderr)
	}
	if args[0] == "--version" || args[0] == "-V" {
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintln(stderr, unknownCommand(args[0]))
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

// unknownCommand is the one line for a command that does not exist: the
// nearest one when it looks like a typo of it, else where the list is.
func unknownCommand(name string) string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	// perftest's users type its binaries' names: ib_write_bw is write-bw.
	perftest := func(s string) string { return results.CommandSpelling(strings.ToLower(s)) }
	if near := suggest.Nearest(name, names, perftest); near != nil {
		return fmt.Sprintf("rdmabench: unknown command %q%s", name, suggest.Phrase(near))
	}
	return fmt.Sprintf("rdmabench: unknown command %q (run 'rdmabench help' for the list)", name)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: rdmabench COMMAND [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nrun 'rdmabench COMMAND --help' for a command's flags")
}
