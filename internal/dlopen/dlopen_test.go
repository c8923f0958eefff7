package dlopen

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenHasClose(t *testing.T) {
	h, why := Open("libc.so.6")
	if h == nil {
		t.Fatalf("libc.so.6: %s", why)
	}
	defer Close(h)
	if !Has(h, "malloc") || Has(h, "rdmabench_no_such_symbol") {
		t.Error("Has: malloc missing or a made-up symbol found")
	}
	Close(nil) // ignored
}

func TestFirst(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "libbad.so")
	if err := os.WriteFile(bad, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		paths      []string
		wantPath   string
		wantDetail string
	}{
		{"missing files are skipped", []string{"/nonexistent/libx.so", "libc.so.6"}, "libc.so.6", ""},
		{"a bare name not found says nothing", []string{"librdmabench_none.so.9"}, "", ""},
		{"a file that fails to load says why", []string{bad, "librdmabench_none.so.9"}, "", "libbad.so"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, p, err := First(tc.paths)
			detail := Detail(err)
			if h != nil {
				defer Close(h)
			}
			if p != tc.wantPath || (h == nil) != (tc.wantPath == "") {
				t.Errorf("path %q (handle %v), want %q", p, h != nil, tc.wantPath)
			}
			if tc.wantDetail == "" && detail != "" || !strings.Contains(detail, tc.wantDetail) {
				t.Errorf("detail %q, want %q", detail, tc.wantDetail)
			}
			// What the caller tests: a handle, ErrNotFound, or why one file failed.
			var oe *Error
			switch {
			case h != nil && err != nil:
				t.Errorf("a handle and %v", err)
			case h == nil && tc.wantDetail == "" && !errors.Is(err, ErrNotFound):
				t.Errorf("error %v, want ErrNotFound", err)
			case tc.wantDetail != "" && (!errors.As(err, &oe) || oe.Path != bad):
				t.Errorf("error %#v, want an *Error for %s", err, bad)
			}
		})
	}
}

func TestMissingSymbolError(t *testing.T) {
	var err error = &MissingSymbolError{Lib: "/x/libcudart.so.12", Symbol: "cudaMemset"}
	if got, want := err.Error(), "cannot use /x/libcudart.so.12: symbol cudaMemset missing"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if Detail(err) != err.Error() || Detail(nil) != "" || Detail(ErrNotFound) != "" {
		t.Error("Detail: want the text of anything but nil and ErrNotFound")
	}
}
