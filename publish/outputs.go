package publish

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Output is a file a command will write, named by the flag that asked for
// it (--save, --metrics, -o ...), so that an error names what the user typed.
type Output struct {
	Flag string
	Path string
}

// ErrOutput marks an output that cannot be written; errors.Is tells a
// caller to exit as for bad input, before anything was measured.
var ErrOutput = errors.New("output cannot be written")

type outputError struct {
	out    Output
	reason string
}

func (e *outputError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.out.Flag, e.out.Path, e.reason)
}

func (e *outputError) Is(target error) bool { return target == ErrOutput }

// CheckOutputs tells, before any work, whether each output can be written:
// not a directory, in a directory that exists and takes a new file, not one
// of the inputs, and no two outputs the same file. A long run must not end
// by losing its results to a typo in a path. Empty paths and "-" (standard
// output) are skipped. The check leaves nothing behind.
func CheckOutputs(outs []Output, inputs []string) error {
	seen := map[string]Output{}
	for _, o := range outs {
		if o.Path == "" || o.Path == "-" {
			continue
		}
		if err := checkOutput(o, inputs); err != nil {
			return err
		}
		key := sameFileKey(o.Path)
		if prev, dup := seen[key]; dup {
			return &outputError{o, "the same file as " + prev.Flag}
		}
		seen[key] = o
	}
	return nil
}

func checkOutput(o Output, inputs []string) error {
	if st, err := os.Stat(o.Path); err == nil {
		if st.IsDir() {
			return &outputError{o, "is a directory; give a file name"}
		}
		for _, in := range inputs {
			if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
				return &outputError{o, "is also an input; writing it would replace what is read"}
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return &outputError{o, errText(err)}
	}
	dir := filepath.Dir(o.Path)
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &outputError{o, "directory " + dir + " does not exist"}
	case err != nil:
		return &outputError{o, errText(err)}
	case !st.IsDir():
		return &outputError{o, dir + " is not a directory"}
	}
	// The only sure test of writing is to write: permissions, a read-only
	// mount, ACLs and quotas all answer here.
	probe, err := os.CreateTemp(dir, "."+filepath.Base(o.Path)+".*.probe")
	if err != nil {
		return &outputError{o, "cannot create a file in " + dir + ": " + errText(err)}
	}
	probe.Close()
	os.Remove(probe.Name())
	return nil
}

// sameFileKey names a path's file for the duplicate check: the absolute,
// cleaned path with its directory's links resolved.
func sameFileKey(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// errText is an error without the path os puts before it: the caller names
// the path once, as the user typed it.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err.Error()
	}
	return strings.TrimSpace(err.Error())
}
