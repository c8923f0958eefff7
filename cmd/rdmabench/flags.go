package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// flagSetMade, when set, is told of each flag set a command makes: the
// docs command collects them to write the man page and completions.
var flagSetMade func(*pflag.FlagSet)

// newFlagSet makes a flag set that reports errors itself, in one line.
func newFlagSet(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	if flagSetMade != nil {
		flagSetMade(fs)
	}
	fs.SetOutput(stderr)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: rdmabench %s [flags]\n", name)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args; done is true when the command should exit with code
// (help was asked for, or the flags were bad).
func parseFlags(fs *pflag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	fs.SetOutput(io.Discard) // pflag would print usage on every error; we print one line
	// pflag also calls Usage itself on --help, and ours write to stderr
	// directly: usage came out twice. We call it once, below.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	if errors.Is(err, pflag.ErrHelp) {
		fs.SetOutput(stderr)
		fs.Usage()
		return 0, true
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v (see --help)\n", fs.Name(), err)
		return 2, true
	}
	return 0, false
}

func fail(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, "rdmabench "+format+"\n", args...)
	return 1
}
