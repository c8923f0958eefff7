package kubetest

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLayer: each file under its path in the image with its host mode,
// after its parent directories, each once; a relative path refused.
func TestLayer(t *testing.T) {
	dir := t.TempDir()
	bin, lib := filepath.Join(dir, "bin"), filepath.Join(dir, "lib")
	if err := os.WriteFile(bin, []byte("#!"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, []byte("ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		files map[string]string
		want  []string // name mode
		err   bool
	}{
		{map[string]string{"/usr/bin/x": bin, "/usr/lib/y.so.1": lib},
			[]string{"usr/ 755", "usr/bin/ 755", "usr/bin/x 755", "usr/lib/ 755", "usr/lib/y.so.1 644"}, false},
		{map[string]string{"/x": bin}, []string{"x 755"}, false},
		{map[string]string{"x": bin}, nil, true},
	}
	for _, tc := range cases {
		b, err := layer(tc.files)
		if (err != nil) != tc.err {
			t.Errorf("%v: error %v, want one: %v", tc.files, err, tc.err)
			continue
		}
		var got []string
		tr := tar.NewReader(bytes.NewReader(b))
		for h, err := tr.Next(); !errors.Is(err, io.EOF) && err == nil; h, err = tr.Next() {
			got = append(got, fmt.Sprintf("%s %o", h.Name, h.Mode))
		}
		if !tc.err && !slices.Equal(got, tc.want) {
			t.Errorf("%v: entries %q, want %q", tc.files, got, tc.want)
		}
	}
	if got, want := LibraryPath(map[string]string{"/usr/bin/x": bin, "/lib/a/y.so.1": lib, "/lib64/ld-linux-x86-64.so.2": lib}),
		"LD_LIBRARY_PATH=/lib/a:/lib64"; got != want {
		t.Errorf("LibraryPath: %q, want %q", got, want)
	}
}
