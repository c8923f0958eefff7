package docgen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
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
		{"write-bw", "RDMA write bandwidth", fs}, {"devices", "list the devices: names, ports", dev}}}
}

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
	if err := Man(&b, model(t)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		".TH RDMABENCH 1 \"\" \"rdmabench 1.2.3\\-dirty\"",
		".SS rdmabench write\\-bw\nRDMA write bandwidth\n",
		"\\fB\\-s\\fR, \\fB\\-\\-size\\fR \\fIstring\\fR\nmessage size, 4 \\[u00B5]s \\[u00D7] 2 (default 64K)\n",
		".TP\n\\fB\\-\\-json\\fR\nwrite one JSON document",
		"(a \\e in it) (default 2m0s)",
		"\\fB\\-d\\fR, \\fB\\-\\-ib\\-dev\\fR \\fIDEV\\fR\n\\&.show only this DEV\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
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
