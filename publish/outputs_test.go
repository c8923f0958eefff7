package publish

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckOutputs(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "base.json")
	if err := os.WriteFile(in, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := filepath.Join(dir, "ro")
	if err := os.Mkdir(ro, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "old.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(in, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		outs []Output
		want string // "" = accepted
	}{
		{"new file", []Output{{"--save", filepath.Join(dir, "new.json")}}, ""},
		{"existing file replaced", []Output{{"--save", filepath.Join(dir, "old.json")}}, ""},
		{"empty and stdout skipped", []Output{{"--save", ""}, {"-J", "-"}}, ""},
		{"missing directory", []Output{{"--save", "/nonexistent/x.json"}}, "--save /nonexistent/x.json: directory /nonexistent does not exist"},
		{"a directory", []Output{{"-o", dir}}, "is a directory; give a file name"},
		{"parent a file", []Output{{"--hgrm", filepath.Join(in, "x")}}, "not a directory"},
		{"an input", []Output{{"-o", in}}, "is also an input"},
		{"an input through a link", []Output{{"-o", link}}, "is also an input"},
		{"two outputs one file", []Output{{"--save", filepath.Join(dir, "a")}, {"--metrics", filepath.Join(dir, ".", "a")}}, "--metrics " + filepath.Join(dir, ".", "a") + ": the same file as --save"},
	} {
		err := CheckOutputs(tc.outs, []string{in})
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrOutput)):
			t.Errorf("%s: %v, want ErrOutput with %q", tc.name, err, tc.want)
		}
	}
	if os.Geteuid() != 0 { // root writes anywhere
		if err := CheckOutputs([]Output{{"--save", filepath.Join(ro, "x")}}, nil); err == nil || !strings.Contains(err.Error(), "cannot create a file in") {
			t.Errorf("read-only directory: %v", err)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "probe") {
			t.Errorf("the check left %s behind", e.Name())
		}
	}
}

// WriteFileAtomic's errors name the file asked for, never its hidden
// temporary file; a directory is refused before anything is written.
func TestWriteFileAtomicErrorsNameThePath(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{"/nonexistent/x.json", dir} {
		err := WriteFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err })
		if err == nil || strings.Contains(err.Error(), ".tmp") || !strings.Contains(err.Error(), path) {
			t.Errorf("WriteFileAtomic(%s): %v; want an error naming %s and no temporary file", path, err, path)
		}
	}
}
