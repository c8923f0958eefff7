package badinput

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
)

// RowTimeout bounds a row: a bad input that hangs fails as a hang, never
// holds up the suite.
const RowTimeout = 30 * time.Second

// Table is a package's bad-input table and how to run its command.
type Table struct {
	Dir      string                             // testdata/badinput
	Generate map[string]func(path string) error // $G's files, made once
	// Command is the command line for args, with Env added to the
	// process's environment; nil: the test binary itself (run as its main
	// by an Env variable), as every table here wants.
	Command func(ctx context.Context, args []string) *exec.Cmd
	// Env is added to every row's environment (the zero-cost NIC's path).
	Env []string
	// Extra are placeholders of the package's own ("$N": a library path).
	Extra map[string]string
}

// Run runs every row as a subtest and fails each whose answer is wrong,
// naming the file and line of the row.
func (tb Table) Run(t *testing.T, minRows int) {
	rows, err := ReadDir(tb.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < minRows {
		t.Fatalf("%d rows in %s, want at least %d", len(rows), tb.Dir, minRows)
	}
	files, err := filepath.Abs(filepath.Join(tb.Dir, "files"))
	if err != nil {
		t.Fatal(err)
	}
	dirs := Dirs{Files: files, Generated: t.TempDir(), Extra: tb.Extra}
	names := make([]string, 0, len(tb.Generate))
	for n := range tb.Generate {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tb.Generate[n](filepath.Join(dirs.Generated, n)); err != nil {
			t.Fatalf("generating %s: %v", n, err)
		}
	}
	for _, row := range rows {
		t.Run(row.Where, func(t *testing.T) {
			t.Parallel()
			d := dirs
			if row.usesPort() {
				// $P: a rendezvous address of the row's own, held for
				// it alone (internal/testport), never a fixed port two
				// rows running at once could share.
				d.Extra = map[string]string{"$P": testport.Addr(t)}
				for k, v := range dirs.Extra {
					d.Extra[k] = v
				}
			}
			env, args, want := row.Expand(d, t.TempDir())
			row.Want = want
			ctx, cancel := context.WithTimeout(context.Background(), RowTimeout)
			defer cancel()
			var cmd *exec.Cmd
			if tb.Command != nil {
				cmd = tb.Command(ctx, args)
			} else {
				cmd = exec.CommandContext(ctx, os.Args[0], args...)
			}
			cmd.Env = append(append(os.Environ(), tb.Env...), env...)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			switch {
			case ctx.Err() != nil:
				t.Fatalf("%s: %s hung: killed after %v\nstderr: %s", row.Where, strings.Join(args, " "), RowTimeout, e.String())
			case errors.As(err, &ee):
				code = ee.ExitCode()
			case err != nil:
				t.Fatalf("%s: %v", row.Where, err)
			}
			if msg := row.Check(code, o.String(), e.String()); msg != "" {
				t.Errorf("%s: %s: %s\nstdout: %s\nstderr: %s", row.Where, strings.Join(args, " "), msg, clip(o.String()), clip(e.String()))
			}
		})
	}
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}
