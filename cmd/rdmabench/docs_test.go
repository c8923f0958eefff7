package main

import (
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/docgen"
)

// The docs cover every command with the flags its own parser takes.
func TestDocsCoverEveryCommand(t *testing.T) {
	tl := tool()
	if len(tl.Commands) != len(commands) {
		t.Fatalf("%d commands documented, %d registered", len(tl.Commands), len(commands))
	}
	for _, c := range tl.Commands {
		if c.Name == "write-bw" && (c.Flags.Lookup("timeout") == nil || c.Flags.Lookup("load") == nil || c.Flags.Lookup("push-timeout") == nil) {
			t.Errorf("write-bw's documented flags lack --timeout, --load or --push-timeout")
		}
		if c.Name == "version" && c.Flags.Lookup("json") == nil {
			t.Errorf("version's documented flags lack --json")
		}
	}
	if flagSetMade != nil {
		t.Error("tool left the flag-set hook set")
	}
}

// Every description in help/ is a command's (a file misnamed, or left
// behind by a command removed, would never be shown), and the agent, whose
// page is its manual, has one with its sections.
func TestDocsDescriptions(t *testing.T) {
	files := helpFiles()
	if len(files) == 0 {
		t.Fatal("help/ embeds no description")
	}
	for _, n := range files {
		if _, ok := commands[n]; !ok {
			t.Errorf("help/%s.md describes no command", n)
		}
	}
	m, err := docgen.NewModel(tool())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Commands {
		if p.Name != "agent" {
			continue
		}
		var titles []string
		for _, s := range p.Sections {
			titles = append(titles, s.Title)
		}
		if len(p.Intro) < 3 || !slices.Contains(titles, "Files") || !slices.Contains(titles, "Running it as a service") {
			t.Errorf("the agent's description has %d paragraphs and sections %q; want several, Files and Running it as a service", len(p.Intro), titles)
		}
		return
	}
	t.Error("no agent command")
}

// What make dist packages: __docs writes rdmabench.1 and a page a command,
// each one groff renders without a warning and whose NAME mandb can read
// (lintian checks the same on the .deb, later); the agent's has its
// description and every one of its flags.
func TestDocsManPages(t *testing.T) {
	dir := t.TempDir()
	var stderr strings.Builder
	if code := runMain([]string{docsCommand, dir}, io.Discard, &stderr); code != 0 {
		t.Fatalf("%s %s: exit %d: %s", docsCommand, dir, code, stderr.String())
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Log("groff not installed (ci/deps.sh installs it): the pages are not rendered")
	}
	lexgrog, _ := exec.LookPath("lexgrog")
	pages := append([]string{"rdmabench"}, slices.Sorted(maps.Keys(commands))...)
	for i, n := range pages {
		name := n
		if i > 0 {
			name = "rdmabench-" + n
		}
		f := filepath.Join(dir, name+".1")
		page, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("no page for %s: %v", n, err)
			continue
		}
		if groff != "" {
			cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z", f)
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff on %s.1: %v: %s", name, err, out)
			}
		}
		if lexgrog != "" {
			summary := "measure RDMA devices"
			if i > 0 {
				summary = commands[n].summary
			}
			out, err := exec.Command(lexgrog, f).CombinedOutput()
			if err != nil || !strings.HasPrefix(string(out), f+`: "`+name+" - "+summary[:20]) {
				t.Errorf("lexgrog on %s.1 (mandb's whatis): %v: %s", name, err, out)
			}
		}
		if n != "agent" {
			continue
		}
		text := string(page)
		for _, want := range []string{".SH DESCRIPTION\n", "\\fB/rdmabench/address\\fR", ".SH RUNNING IT AS A SERVICE\n", ".SH FILES\n", "/etc/default/rdmabench\\-agent"} {
			if !strings.Contains(text, want) {
				t.Errorf("rdmabench-agent.1 lacks %q", want)
			}
		}
		var fs *pflag.FlagSet
		for _, c := range tool().Commands {
			if c.Name == "agent" {
				fs = c.Flags
			}
		}
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden && !strings.Contains(text, "\\fB\\-\\-"+strings.ReplaceAll(f.Name, "-", "\\-")+"\\fR") {
				t.Errorf("rdmabench-agent.1 lacks --%s", f.Name)
			}
		})
	}
}
