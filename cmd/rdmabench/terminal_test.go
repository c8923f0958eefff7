package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A file, a pipe or a buffer never gets the progress line.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"file": f, "pipe": w, "buffer": &bytes.Buffer{}} {
		if isTerminal(out) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}
