package nvlib

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCandidatesOrder(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name     string
		explicit string
		roots    []string
		want     []string
	}{
		{"file", "/x/libnccl.so.2", []string{"/py"}, []string{"/x/libnccl.so.2"}},
		{"dir", dir, []string{"/py"}, []string{filepath.Join(dir, "libnccl.so.2")}},
		{"search", "", []string{"/py1", "/py2"}, []string{"libnccl.so.2", "/py1/nvidia/nccl/lib/libnccl.so.2", "/py1/nvidia/cu13/lib/libnccl.so.2",
			"/py2/nvidia/nccl/lib/libnccl.so.2", "/py2/nvidia/cu13/lib/libnccl.so.2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Candidates(tc.explicit, []string{"libnccl.so.2"}, tc.roots, NCCLWheelDirs)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// CUDA 13 wheels keep libcudart.so.13 in nvidia/cu13/lib.
func TestCudartWheelDirs(t *testing.T) {
	got := Candidates("", CudartNames[:2], []string{"/py"}, CudartWheelDirs)
	want := []string{"libcudart.so.13", "libcudart.so.12",
		"/py/nvidia/cu13/lib/libcudart.so.13", "/py/nvidia/cu13/lib/libcudart.so.12",
		"/py/nvidia/cuda_runtime/lib/libcudart.so.13", "/py/nvidia/cuda_runtime/lib/libcudart.so.12"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Python 3.10 is newer than 3.9: site-packages are searched newest first.
func TestPythonVersionsNumeric(t *testing.T) {
	venv := t.TempDir()
	for _, v := range []string{"python3.9", "python3.10", "python3.12", "python3.8"} {
		if err := os.MkdirAll(filepath.Join(venv, "lib", v, "site-packages"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("VIRTUAL_ENV", venv)
	var got []string
	for _, d := range PythonSitePackages() {
		if strings.HasPrefix(d, venv) {
			got = append(got, filepath.Base(filepath.Dir(d)))
		}
	}
	if want := "python3.12 python3.10 python3.9 python3.8"; strings.Join(got, " ") != want {
		t.Errorf("order %v, want %s", got, want)
	}
}

// An explicit path: a folder gives each name in it; a file is itself and,
// for the CUDA side (siblings), the names beside it (libcuda.so.1 next to
// the libcudart named).
func TestNamed(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "libcudart.so.12")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	names := []string{"a.so", "b.so"}
	for _, tt := range []struct {
		explicit string
		siblings bool
		want     []string
	}{
		{dir, false, []string{filepath.Join(dir, "a.so"), filepath.Join(dir, "b.so")}},
		{dir, true, []string{filepath.Join(dir, "a.so"), filepath.Join(dir, "b.so")}},
		{file, false, []string{file}},
		{file, true, []string{file, filepath.Join(dir, "a.so"), filepath.Join(dir, "b.so")}},
		{"/nonexistent/lib.so", false, []string{"/nonexistent/lib.so"}},
	} {
		if got := Named(tt.explicit, names, tt.siblings); strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("Named(%q, siblings %v) = %q, want %q", tt.explicit, tt.siblings, got, tt.want)
		}
	}
}
