package docgen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/expect"
	"github.com/rdmabench/rdmabench/internal/golden"
)

// The pages as they are written, a page a command and in one (testdata/;
// -update rewrites them). The usage below holds what Markdown would read
// as a cell's end, emphasis, code and a tag.
func TestReferenceGolden(t *testing.T) {
	tl := sample()
	tl.Commands[1].Flags.String("format", "", "write `FILE` as text|json, *not* `html`, for <file> names_with_underscores")
	m, err := NewModel(tl)
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range []bool{true, false} {
		files := Reference(m, split)
		names := make([]string, 0, len(files))
		for name := range files {
			names = append(names, name)
		}
		slices.Sort(names)
		want := []string{"rdmabench-devices.md", "rdmabench-write-bw.md", "rdmabench.md"}
		if !split {
			want = []string{"rdmabench.md"}
		}
		if !slices.Equal(names, want) {
			t.Errorf("split %v: files %q, want %q", split, names, want)
		}
		dir := "split"
		if !split {
			dir = "onepage"
		}
		for _, name := range names {
			golden.Check(t, filepath.Join("reference", dir, name), files[name])
		}
	}
	cell := `write FILE as text\|json, \*not\* \` + "`" + `html\` + "`" + `, for &lt;file&gt; names\_with\_underscores`
	if !strings.Contains(string(Reference(m, true)["rdmabench-devices.md"]), "| "+cell+" |") {
		t.Errorf("the usage is not escaped as one cell %q:\n%s", cell, Reference(m, true)["rdmabench-devices.md"])
	}
}

// Commands with the same flags share one heading on a single page, and the
// list links to it by the anchor GitHub makes.
func TestReferenceGroupsSameFlags(t *testing.T) {
	flags := func(name string) *pflag.FlagSet {
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		fs.StringP("minbytes", "b", "32M", "minimum size")
		return fs
	}
	other := pflag.NewFlagSet("analyze", pflag.ContinueOnError)
	other.Bool("json", false, "print JSON")
	m, err := NewModel(Tool{Name: "ncclbench", Summary: "benchmark NCCL", Commands: []Command{
		{Name: "all_reduce", Summary: "time ncclAllReduce", Flags: flags("all_reduce")}, {Name: "analyze", Summary: "read logs", Flags: other},
		{Name: "broadcast", Summary: "time ncclBroadcast", Flags: flags("broadcast")}}})
	if err != nil {
		t.Fatal(err)
	}
	page := string(Reference(m, false)["ncclbench.md"])
	expect.Contains(t, "page", page,
		"| [`all_reduce`](#all_reduce-broadcast) | time ncclAllReduce |\n",
		"| [`broadcast`](#all_reduce-broadcast) | time ncclBroadcast |\n",
		"| [`analyze`](#analyze) | read logs |\n",
		"\n## all_reduce, broadcast\n\nThese commands take the same flags.\n",
		"\n## analyze\n\nRead logs.\n",
	)
	if strings.Count(page, "`--minbytes`") != 1 {
		t.Errorf("the shared flags are not shown once:\n%s", page)
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"all_reduce, all_gather", "all_reduce-all_gather"},
		{"Send-BW (perftest)", "send-bw-perftest"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

// A page that differs, a page missing and a page of a command that is gone
// are each reported; writing brings the directory back to what the flags
// make, and leaves files that are not the tool's alone.
func TestStaleReference(t *testing.T) {
	m := model(t)
	dir := t.TempDir()
	if err := CheckReference(dir, m, true, true); err != nil {
		t.Fatal(err)
	}
	if stale, err := StaleReference(dir, m, true); err != nil || len(stale) != 0 {
		t.Fatalf("fresh pages are stale: %q, %v", stale, err)
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("rdmabench-write-bw.md", "edited by hand\n")
	os.Remove(filepath.Join(dir, "rdmabench-devices.md"))
	write("rdmabench-old-cmd.md", "a command since removed\n")
	write("ncclbench.md", "another tool's page\n")
	stale, err := StaleReference(dir, m, true)
	want := []string{"rdmabench-devices.md: missing", "rdmabench-old-cmd.md: no such command any more", "rdmabench-write-bw.md: differs from the flags or descriptions"}
	if err != nil || !slices.Equal(stale, want) {
		t.Errorf("stale %q, %v; want %q", stale, err, want)
	}
	err = CheckReference(dir, m, true, false)
	if err == nil || !strings.Contains(err.Error(), Regenerate) || !strings.Contains(err.Error(), "rdmabench-old-cmd.md") {
		t.Errorf("CheckReference: %v; want the stale pages and how to regenerate them", err)
	}
	if err := WriteReference(dir, m, true); err != nil {
		t.Fatal(err)
	}
	if stale, err := StaleReference(dir, m, true); err != nil || len(stale) != 0 {
		t.Errorf("after writing: %q, %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "rdmabench-old-cmd.md")); !os.IsNotExist(err) {
		t.Errorf("the page of a removed command is left: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "ncclbench.md")); err != nil || string(b) != "another tool's page\n" {
		t.Errorf("another tool's page was touched: %q, %v", b, err)
	}
}
