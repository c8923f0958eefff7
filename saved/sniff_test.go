package saved

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestSniff: kinds told by the first bytes. Anything not JSON was read as
// an .hgrm ("line 1: 1 fields, want 4" for a PNG or an NCCL log).
func TestSniff(t *testing.T) {
	tests := []struct {
		name, head string
		format     format
		what       string // NotSavedError's What; "-" for another error
		ours       bool
	}{
		{"run", "\n  {\"schema\": 2}", jsonFormat, "", false},
		{"hgrm", "       Value     Percentile TotalCount 1/(1-Percentile)\n\n 1.0 0.0 1 1.00\n", hgrmFormat, "", false},
		{"hgrm after comments", "# written by x\n\n Value\tPercentile\tTotalCount\t1/(1-Percentile)\n", hgrmFormat, "", false},
		{"png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 0, "a PNG image", true},
		{"svg", "<svg xmlns=\"http://www.w3.org/2000/svg\">", 0, "an SVG image", true},
		{"xml svg", "<?xml version=\"1.0\"?>\n<svg>", 0, "an SVG image", true},
		{"html", "<!DOCTYPE html>\n<html>", 0, "an HTML page", true},
		{"binary", "ELF\x00\x01", 0, "a binary file", false},
		{"nccl log", "node1:123:123 [0] NCCL INFO Bootstrap : Using eth0\n", 0, "", false},
		{"percentiles without header", " 1.0 0.5 10 2.0\n", 0, "", false},
		{"comments only", "# nothing\n", 0, "", false},
		{"empty", " \n", 0, "-", false},
		{"array", "[{}]", 0, "-", false},
	}
	for _, tc := range tests {
		f, err := sniff([]byte(tc.head))
		var ns *NotSavedError
		switch {
		case tc.format != 0:
			if f != tc.format || err != nil {
				t.Errorf("%s: %v, %v; want format %d", tc.name, f, err, tc.format)
			}
		case tc.what == "-":
			if err == nil || errors.As(err, &ns) {
				t.Errorf("%s: %v; want another error", tc.name, err)
			}
		case !errors.As(err, &ns) || ns.What != tc.what || ns.Ours != tc.ours || !errors.Is(err, ErrNotSaved):
			t.Errorf("%s: %#v; want What %q, Ours %v", tc.name, err, tc.what, tc.ours)
		}
	}
}

// TestReadFileBounded: a large file of no known kind is refused after its
// first bytes. 100 MB of garbage was read whole as an .hgrm (272 MB
// resident).
func TestReadFileBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "garbage")
	line := bytes.Repeat([]byte("garbage "), 16)
	line[len(line)-1] = '\n'
	if err := os.WriteFile(p, bytes.Repeat(line, (64<<20)/len(line)), 0o644); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := ReadFile(p)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrNotSaved) || !strings.HasPrefix(err.Error(), p+": a file of no kind rdmabench reads") {
		t.Errorf("error %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("allocated %d bytes reading 64 MiB of garbage; want under 1 MiB", got)
	}
	if err := Peek(p); !errors.Is(err, ErrNotSaved) {
		t.Errorf("Peek: %v", err)
	}
}
