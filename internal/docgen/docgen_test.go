package docgen

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/expect"
)

func sample() Tool {
	fs := pflag.NewFlagSet("write-bw", pflag.ContinueOnError)
	fs.StringP("size", "s", "64K", "message size, 4 µs × 2")
	fs.Bool("json", false, "write one JSON document [for scripts]: it's stable")
	fs.Duration("timeout", 2*time.Minute, `deadline of each step (a \ in it)`)
	fs.String("hidden", "", "not shown")
	fs.MarkHidden("hidden")
	dev := pflag.NewFlagSet("devices", pflag.ContinueOnError)
	dev.StringP("ib-dev", "d", "", ".show only this `DEV`")
	return Tool{Name: "rdmabench", Summary: "measure RDMA devices", Version: "1.2.3-dirty", Commands: []Command{
		{Name: "write-bw", Summary: "RDMA write bandwidth", Flags: fs, Description: sampleDescription},
		{Name: "devices", Summary: "list the devices: names, ports", Flags: dev}}}
}

// sampleDescription has each kind of block, code spans, an item starting
// with a dot (which roff would read as a request), a command line over two
// lines, and a section.
const sampleDescription = `Writes to the peer's memory, as
ib_write_bw does: ` + "`-s 64K`" + ` a message.

- one item
  that goes on;
- .dot first, ` + "`.dot`" + ` and µs.

    rdmabench write-bw -s 1M \
      --timeout 1m --json

## Files

` + "`/etc/rdmabench`" + ` holds nothing yet.
`

// model is sample's Model: every writer takes one.
func model(t *testing.T) Model {
	t.Helper()
	m, err := NewModel(sample())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A flag without help text or a command without a summary is refused,
// each named; hidden flags are not looked at.
func TestNewModelWantsHelpText(t *testing.T) {
	tl := sample()
	tl.Commands[0].Flags.Int("bare", 0, "")
	tl.Commands[0].Flags.Int("secret", 0, "")
	tl.Commands[0].Flags.MarkHidden("secret")
	tl.Commands = append(tl.Commands, Command{Name: "plot", Flags: pflag.NewFlagSet("plot", pflag.ContinueOnError)})
	_, err := NewModel(tl)
	if err == nil {
		t.Fatal("no error for a flag without help text")
	}
	for _, want := range []string{"rdmabench write-bw: --bare has no help text", "rdmabench plot has no summary"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q names a hidden flag", err)
	}
}

func TestMan(t *testing.T) {
	var b bytes.Buffer
	if err := Man(&b, model(t), false); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	expect.Contains(t, "page", page,
		".TH RDMABENCH 1 \"\" \"rdmabench 1.2.3\\-dirty\"",
		".SS rdmabench write\\-bw\nRDMA write bandwidth\n",
		"\\fB\\-s\\fR, \\fB\\-\\-size\\fR \\fIstring\\fR\nmessage size, 4 \\[u00B5]s \\[u00D7] 2 (default 64K)\n",
		".TP\n\\fB\\-\\-json\\fR\nwrite one JSON document",
		"(a \\e in it) (default 2m0s)",
		"\\fB\\-d\\fR, \\fB\\-\\-ib\\-dev\\fR \\fIDEV\\fR\n\\&.show only this DEV\n",
	)
	if strings.Contains(page, "hidden") {
		t.Error("a hidden flag is on the page")
	}
	// The page as man reads it: groff must render it without warnings.
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff not installed (apt-get install groff-base; ci/deps.sh installs it): page not rendered")
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = &b
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff: %v: %s", err, out)
	}
}

// The completions are valid shell, offer the commands and each command's
// flags (and not hidden ones).
func TestCompletions(t *testing.T) {
	dir := t.TempDir()
	for _, sh := range []struct {
		name  string
		write func(*bytes.Buffer, Model) error
	}{
		{"bash", func(b *bytes.Buffer, m Model) error { return Bash(b, m) }},
		{"zsh", func(b *bytes.Buffer, m Model) error { return Zsh(b, m) }},
	} {
		var b bytes.Buffer
		if err := sh.write(&b, model(t)); err != nil {
			t.Fatal(err)
		}
		s := b.String()
		for _, want := range []string{"write-bw", "devices", "--size", "-s", "--ib-dev", "--timeout"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s completion lacks %q:\n%s", sh.name, want, s)
			}
		}
		if strings.Contains(s, "--hidden") {
			t.Errorf("%s completion offers a hidden flag", sh.name)
		}
		path, err := exec.LookPath(sh.name)
		if err != nil {
			t.Logf("%s not installed: syntax not checked", sh.name)
			continue
		}
		f := filepath.Join(dir, sh.name)
		if err := os.WriteFile(f, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "-n", f).CombinedOutput(); err != nil {
			t.Errorf("%s -n: %v: %s\n%s", sh.name, err, out, s)
		}
	}
}

// bash completes for real: the commands, then a command's flags.
func TestBashCompletes(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash not installed")
	}
	var b bytes.Buffer
	if err := Bash(&b, model(t)); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ words, want string }{
		{"rdmabench wr", "write-bw"},
		{"rdmabench write-bw --si", "--size"},
		{"rdmabench devices --ib", "--ib-dev"},
	} {
		words := strings.Fields(tc.words)
		script := b.String() + "\nCOMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" + strconv.Itoa(len(words)-1) + "; _rdmabench; echo \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command(bash, "-c", script).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != tc.want {
			t.Errorf("%q: %v %q, want %q", tc.words, err, out, tc.want)
		}
	}
}

// groffClean fails the test when groff warns about a page (man reads it
// so), and lexgrog, which mandb runs to make man -k's index, when it
// cannot read the page's NAME as want.
func groffClean(t *testing.T, page []byte, whatis string) {
	t.Helper()
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff not installed (apt-get install groff-base; ci/deps.sh installs it): page not rendered")
	}
	cmd := exec.Command(groff, "-man", "-Tutf8", "-ww", "-z")
	cmd.Stdin = bytes.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("groff: %v: %s\n%s", err, out, page)
	}
	lexgrog, err := exec.LookPath("lexgrog")
	if err != nil {
		t.Log("lexgrog not installed (man-db): the NAME line not checked as mandb reads it")
		return
	}
	f := filepath.Join(t.TempDir(), "page.1")
	if err := os.WriteFile(f, page, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(lexgrog, f).CombinedOutput()
	if want := f + `: "` + whatis + `"`; err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("lexgrog: %v: %q, want %q", err, out, want)
	}
}

// A command's own page: NAME as NAME-COMMAND, its summary and description
// (paragraphs joined, items bulleted, the code block unfilled, code spans
// bold), OPTIONS, the description's section after them, and SEE ALSO the
// tool's page; man renders it without a warning.
func TestManPage(t *testing.T) {
	m := model(t)
	var b bytes.Buffer
	if err := ManPage(&b, m, m.Commands[0]); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	order := []string{
		".TH RDMABENCH\\-WRITE\\-BW 1 \"\" \"rdmabench 1.2.3\\-dirty\" \"User Commands\"\n",
		".SH NAME\nrdmabench\\-write\\-bw \\- RDMA write bandwidth\n",
		".SH SYNOPSIS\n.B rdmabench write\\-bw\n",
		".SH DESCRIPTION\nRDMA write bandwidth.\n",
		".PP\nWrites to the peer's memory, as ib_write_bw does: \\fB\\-s 64K\\fR a message.\n",
		".IP \\(bu 2\none item that goes on;\n",
		".IP \\(bu 2\n\\&.dot first, \\fB.dot\\fR and \\[u00B5]s.\n",
		".PP\n.RS 4\n.nf\nrdmabench write\\-bw \\-s 1M \\e\n  \\-\\-timeout 1m \\-\\-json\n.fi\n.RE\n",
		".SH OPTIONS\n.TP\n\\fB\\-\\-json\\fR\n",
		".TP\n\\fB\\-s\\fR, \\fB\\-\\-size\\fR \\fIstring\\fR\n",
		".SH FILES\n.PP\n\\fB/etc/rdmabench\\fR holds nothing yet.\n",
		".SH SEE ALSO\n\\fBrdmabench\\fR(1)\n",
	}
	at := 0
	for _, want := range order {
		i := strings.Index(page[at:], want)
		if i < 0 {
			t.Fatalf("page lacks, after byte %d, %q:\n%s", at, want, page)
		}
		at += i + len(want)
	}
	groffClean(t, b.Bytes(), "rdmabench-write-bw - RDMA write bandwidth")

	// A command with no description has the same page, its summary alone.
	b.Reset()
	if err := ManPage(&b, m, m.Commands[1]); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), ".SH DESCRIPTION\nList the devices: names, ports.\n.SH OPTIONS\n") {
		t.Errorf("the page of a command without a description:\n%s", &b)
	}
	groffClean(t, b.Bytes(), "rdmabench-devices - list the devices: names, ports")
}

// With split, WriteFiles writes a page a command beside the tool's, whose
// SEE ALSO names them; without, the tool's page alone.
func TestWriteFilesSplit(t *testing.T) {
	m := model(t)
	for _, split := range []bool{true, false} {
		dir := t.TempDir()
		if err := WriteFiles(dir, m, split); err != nil {
			t.Fatal(err)
		}
		var names []string
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			names = append(names, e.Name())
		}
		want := "_rdmabench rdmabench.1 rdmabench.bash"
		if split {
			want = "_rdmabench rdmabench-devices.1 rdmabench-write-bw.1 rdmabench.1 rdmabench.bash"
		}
		if got := strings.Join(names, " "); got != want {
			t.Errorf("split %v: wrote %s, want %s", split, got, want)
		}
		tool, err := os.ReadFile(filepath.Join(dir, "rdmabench.1"))
		if err != nil {
			t.Fatal(err)
		}
		seeAlso := ".SH SEE ALSO\n\\fBrdmabench\\-write\\-bw\\fR(1),\n\\fBrdmabench\\-devices\\fR(1)\n"
		if got := strings.Contains(string(tool), seeAlso); got != split {
			t.Errorf("split %v: the tool's page has its SEE ALSO of the commands' pages: %v\n%s", split, got, tool)
		}
		groffClean(t, tool, "rdmabench - measure RDMA devices")
	}
}

// What both writers cannot show alike is refused, with its line; a
// well-formed description parses into its blocks and sections.
func TestParseDescription(t *testing.T) {
	intro, sections, err := parseDescription(sampleDescription)
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Kind: Para, Text: "Writes to the peer's memory, as ib_write_bw does: `-s 64K` a message."},
		{Kind: Item, Text: "one item that goes on;"},
		{Kind: Item, Text: ".dot first, `.dot` and µs."},
		{Kind: Code, Lines: []string{`rdmabench write-bw -s 1M \`, "  --timeout 1m --json"}},
	}
	if fmt.Sprint(intro) != fmt.Sprint(want) {
		t.Errorf("intro %+v\nwant %+v", intro, want)
	}
	if len(sections) != 1 || sections[0].Title != "Files" || len(sections[0].Blocks) != 1 {
		t.Errorf("sections %+v", sections)
	}
	for _, tc := range []struct{ text, err string }{
		{"a\ttab", "line 1: a tab"},
		{"# Title", "line 1: a heading must be"},
		{"para\n## Files\n\nx", "line 2: a heading needs a blank line"},
		{"## See also\n\nx", `"See also" is a section the writers make`},
		{"## Files\n", `section "Files" is empty`},
		{"some *emphasis*", "Markdown markup"},
		{"a [link](x.md)", "Markdown markup"},
		{"a <tag>", "Markdown markup"},
		{"_under_ here", `"_under_" would be emphasis`},
		{"an `open span", "a ` without its pair"},
		{"a ` spaced ` span", "an empty code span"},
		{"para\n- item", "line 2: a list needs a blank line"},
		{"- item\npara", "line 2: a paragraph needs a blank line"},
		{"para\n   three", "line 2: an indent"},
	} {
		if _, _, err := parseDescription(tc.text); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.text, err, tc.err)
		}
	}
	// Words inside code spans are code: no markup is looked for there.
	if _, _, err := parseDescription("`*_x_*` and `[a](b)`"); err != nil {
		t.Errorf("markup inside code spans refused: %v", err)
	}
}

// A description that names a flag the command lacks, in a span of its own
// or in a command line of the command, is an error naming it; other
// programs' flags (systemctl's) are not looked at, and one error is given
// once however often the flag is named.
func TestDescriptionNamesItsFlags(t *testing.T) {
	tl := sample()
	tl.Commands[0].Description = "Use `--size 1M`, `-s=2`, `--json` or `--gone`, again `--gone`.\n\n" +
		"    rdmabench write-bw --timeout 1s \\\n      --vanished\n\nNot `systemctl enable --now x` nor `rdmabench devices --other`.\n"
	_, err := NewModel(tl)
	if err == nil {
		t.Fatal("no error for a description naming flags the command lacks")
	}
	for _, want := range []string{
		"rdmabench write-bw's description names --gone, which is not one of its flags",
		"rdmabench write-bw's description names --vanished, which is not one of its flags",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	for _, not := range []string{"--size", "-s", "--json", "--timeout", "--now", "--other"} {
		if strings.Contains(err.Error(), "names "+not+",") {
			t.Errorf("error %q names %s", err, not)
		}
	}
	if strings.Count(err.Error(), "--gone") != 1 {
		t.Errorf("--gone reported more than once: %q", err)
	}
	tl.Commands[0].Description = "a `bad span\n"
	if _, err := NewModel(tl); err == nil || !strings.Contains(err.Error(), "rdmabench write-bw's description: a ` without its pair") {
		t.Errorf("a malformed description: %v", err)
	}
}
