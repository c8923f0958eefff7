// Package docgen writes a tool's man page, its Markdown reference and its
// bash and zsh completions from its pflag flag sets, so that what a package
// ships and what docs/reference says cannot drift from what the binary
// takes. The flag sets are read once into a Model; each writer only lays
// the Model out.
package docgen

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/exitcode"
)

// Command is one subcommand: its name, what it does, and its flags.
// Description, where there is one, is the longer text of its own man page
// and reference page, in the Markdown of parseDescription.
type Command struct {
	Name, Summary string
	Flags         *pflag.FlagSet
	Description   string
}

// Tool is a binary and its subcommands, in the order they are shown.
type Tool struct {
	Name, Summary, Version string
	Commands               []Command
}

// Flag is one flag as every writer shows it.
type Flag struct {
	Long, Short string
	// Value names what the flag takes ("string", or the word the usage
	// quotes in backticks); "" for a switch.
	Value string
	Usage string
	// Default is "" when it says nothing a reader needs (false, 0, empty).
	Default string
}

// Page is one command as every writer shows it: Intro is its
// description before the flags, Sections the titled parts after them.
type Page struct {
	Name, Summary string
	Flags         []Flag
	Intro         []Block
	Sections      []Section
}

// described is whether the page has more than its summary and flags.
func (p Page) described() bool { return len(p.Intro) > 0 || len(p.Sections) > 0 }

// Model is what the writers lay out: the tool, its commands and their
// visible flags, in order.
type Model struct {
	Name, Summary, Version string
	Commands               []Page
}

// NewModel reads the tool's flag sets and descriptions. A command without
// a summary, a flag without help text, a description the writers cannot
// show alike, or one that names a flag the command does not have, is an
// error, naming each: the reference would show an empty line where a user
// looks for what the flag does, or prose about a flag that is gone.
func NewModel(t Tool) (Model, error) {
	m := Model{Name: t.Name, Summary: t.Summary, Version: t.Version}
	var errs []error
	for _, c := range t.Commands {
		p := Page{Name: c.Name, Summary: c.Summary}
		if strings.TrimSpace(c.Summary) == "" {
			errs = append(errs, fmt.Errorf("%s %s has no summary", t.Name, c.Name))
		}
		if c.Flags != nil {
			c.Flags.VisitAll(func(f *pflag.Flag) {
				if f.Hidden {
					return
				}
				value, usage := pflag.UnquoteUsage(f)
				if strings.TrimSpace(usage) == "" {
					errs = append(errs, fmt.Errorf("%s %s: --%s has no help text", t.Name, c.Name, f.Name))
				}
				def := f.DefValue
				if def == "false" || def == "0" || def == "[]" {
					def = ""
				}
				p.Flags = append(p.Flags, Flag{Long: f.Name, Short: f.Shorthand, Value: value, Usage: usage, Default: def})
			})
		}
		if c.Description != "" {
			var err error
			if p.Intro, p.Sections, err = parseDescription(c.Description); err != nil {
				errs = append(errs, fmt.Errorf("%s %s's description: %w", t.Name, c.Name, err))
			}
			for _, f := range unknownFlags(p, flagWordsIn(p.Intro, p.Sections, t.Name, c.Name)) {
				errs = append(errs, fmt.Errorf("%s %s's description names %s, which is not one of its flags", t.Name, c.Name, f))
			}
		}
		m.Commands = append(m.Commands, p)
	}
	return m, errors.Join(errs...)
}

// roffChars escapes text for a man page: backslashes, hyphens (which man
// would otherwise hyphenate or render as a dash), and characters beyond
// ASCII (µ, ×: groff reads its input as Latin-1).
func roffChars(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\e`)
		case r == '-':
			b.WriteString(`\-`)
		case r > 127:
			fmt.Fprintf(&b, `\[u%04X]`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// roffLine keeps a line of text from being read as a request: one that
// starts with a dot or an apostrophe.
func roffLine(s string) string {
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roff is text as one line of a man page.
func roff(s string) string { return roffLine(roffChars(s)) }

// roffInline is a paragraph's or item's text as one line, its code spans
// in bold as man pages show literal words.
func roffInline(text string) string {
	var b strings.Builder
	for i, p := range spans(text) {
		if i%2 == 1 {
			b.WriteString(`\fB` + roffChars(p) + `\fR`)
		} else {
			b.WriteString(roffChars(p))
		}
	}
	return roffLine(b.String())
}

// manBlocks lays out description blocks: paragraphs, items bulleted as
// man(7) indents them, code blocks unfilled and indented.
func manBlocks(b *strings.Builder, blocks []Block) {
	for _, bl := range blocks {
		switch bl.Kind {
		case Para:
			fmt.Fprintf(b, ".PP\n%s\n", roffInline(bl.Text))
		case Item:
			fmt.Fprintf(b, ".IP \\(bu 2\n%s\n", roffInline(bl.Text))
		case Code:
			b.WriteString(".PP\n.RS 4\n.nf\n")
			for _, l := range bl.Lines {
				b.WriteString(roff(l) + "\n")
			}
			b.WriteString(".fi\n.RE\n")
		}
	}
}

// manFlags is a command's flags, one tagged paragraph each: the names, the
// value, the help text and the default.
func manFlags(b *strings.Builder, flags []Flag) {
	for _, f := range flags {
		b.WriteString(".TP\n")
		if f.Short != "" {
			fmt.Fprintf(b, "\\fB%s\\fR, ", roff("-"+f.Short))
		}
		fmt.Fprintf(b, "\\fB%s\\fR", roff("--"+f.Long))
		if f.Value != "" {
			fmt.Fprintf(b, " \\fI%s\\fR", roff(f.Value))
		}
		b.WriteString("\n" + roff(f.Usage))
		if f.Default != "" {
			fmt.Fprintf(b, " (default %s)", roff(f.Default))
		}
		b.WriteString("\n")
	}
}

// manRef is a man page named as man pages name others: bold, section in
// parentheses.
func manRef(name string) string { return `\fB` + roff(name) + `\fR(1)` }

// Man writes the tool's man page (section 1): a subsection per command
// with each flag, its value and its default. With split the commands have
// pages of their own too (ManPage), which its SEE ALSO names.
func Man(w io.Writer, m Model, split bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"%s %s\" \"User Commands\"\n", roff(strings.ToUpper(m.Name)), m.Name, roff(m.Version))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roff(m.Name), roff(m.Summary))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n.I COMMAND\n[flags] [args]\n", roff(m.Name))
	b.WriteString(".SH COMMANDS\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, ".SS %s\n%s\n", roff(m.Name+" "+c.Name), roff(c.Summary))
		manFlags(&b, c.Flags)
	}
	manExitStatus(&b)
	if split {
		b.WriteString(".SH SEE ALSO\n")
		for i, c := range m.Commands {
			sep := ","
			if i == len(m.Commands)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "%s%s\n", manRef(m.Name+"-"+c.Name), sep)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ManPage writes the man page of one command, NAME-COMMAND (section 1, as
// git's commands have theirs): its summary and description, its flags as
// OPTIONS, then its description's sections.
func ManPage(w io.Writer, m Model, p Page) error {
	var b strings.Builder
	name := m.Name + "-" + p.Name
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"%s %s\" \"User Commands\"\n", roff(strings.ToUpper(name)), m.Name, roff(m.Version))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", roff(name), roff(p.Summary))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n[flags] [args]\n", roff(m.Name+" "+p.Name))
	fmt.Fprintf(&b, ".SH DESCRIPTION\n%s\n", roff(capital(p.Summary)))
	manBlocks(&b, p.Intro)
	b.WriteString(".SH OPTIONS\n")
	if len(p.Flags) == 0 {
		b.WriteString("None.\n")
	}
	manFlags(&b, p.Flags)
	for _, s := range p.Sections {
		fmt.Fprintf(&b, ".SH %s\n", roff(strings.ToUpper(s.Title)))
		manBlocks(&b, s.Blocks)
	}
	manExitStatus(&b)
	fmt.Fprintf(&b, ".SH SEE ALSO\n%s\n", manRef(m.Name))
	_, err := io.WriteString(w, b.String())
	return err
}

// manExitStatus is the exit-status contract every command follows
// (internal/exitcode), so that each man page answers what a script tests.
func manExitStatus(b *strings.Builder) {
	b.WriteString(".SH EXIT STATUS\n")
	for _, s := range exitcode.Table {
		fmt.Fprintf(b, ".TP\n.B %d\n%s\n", s.Code, roff(capital(s.Meaning)))
	}
}

// flagWords are the words a command's flags are typed as.
func flagWords(p Page) []string {
	var words []string
	for _, f := range p.Flags {
		words = append(words, "--"+f.Long)
		if f.Short != "" {
			words = append(words, "-"+f.Short)
		}
	}
	return words
}

// Bash writes a bash completion: commands first, then the command's flags;
// file names where a flag takes a value.
func Bash(w io.Writer, m Model) error {
	fn := "_" + strings.ReplaceAll(m.Name, "-", "_")
	var b strings.Builder
	var names []string
	for _, c := range m.Commands {
		names = append(names, c.Name)
	}
	fmt.Fprintf(&b, "# bash completion for %s (generated from its flags)\n%s() {\n", m.Name, fn)
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]}\n")
	fmt.Fprintf(&b, "\tif ((COMP_CWORD == 1)); then\n\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
	b.WriteString("\t[[ $cur == -* ]] || return 0\n\tcase ${COMP_WORDS[1]} in\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "\t%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")) ;;\n", c.Name, strings.Join(flagWords(c), " "))
	}
	fmt.Fprintf(&b, "\tesac\n}\ncomplete -o default -F %s %s\n", fn, m.Name)
	_, err := io.WriteString(w, b.String())
	return err
}

// zshText makes a usage fit in an _arguments spec: its first clause, with
// the characters the spec gives meaning to taken out.
func zshText(s string) string {
	if i := strings.IndexAny(s, ";:("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(strings.NewReplacer("[", "(", "]", ")", "'", "", `\`, "", ":", " ").Replace(s))
}

// Zsh writes a zsh completion (#compdef): commands with their summaries,
// then each command's flags with theirs.
func Zsh(w io.Writer, m Model) error {
	fn := "_" + strings.ReplaceAll(m.Name, "-", "_")
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s (generated from its flags)\n%s() {\n\tlocal -a cmds\n\tcmds=(\n", m.Name, m.Name, fn)
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "\t\t'%s:%s'\n", c.Name, zshText(c.Summary))
	}
	b.WriteString("\t)\n\tif ((CURRENT == 2)); then\n\t\t_describe command cmds\n\t\treturn\n\tfi\n\tcase $words[2] in\n")
	for _, c := range m.Commands {
		fmt.Fprintf(&b, "\t%s)\n\t\t_arguments", c.Name)
		for _, f := range c.Flags {
			val := ""
			if f.Value != "" {
				val = ":" + f.Value + ":_files"
			}
			for _, word := range []string{"--" + f.Long, "-" + f.Short} {
				if word != "-" {
					fmt.Fprintf(&b, " \\\n\t\t\t'%s[%s]%s'", word, zshText(f.Usage), val)
				}
			}
		}
		b.WriteString(" \\\n\t\t\t'*:file:_files'\n\t\t;;\n")
	}
	fmt.Fprintf(&b, "\tesac\n}\n%s \"$@\"\n", fn)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFiles writes dir/NAME.1, dir/NAME.bash and dir/_NAME (zsh's name
// for a completion); with split, dir/NAME-COMMAND.1 for each command too.
func WriteFiles(dir string, m Model, split bool) error {
	type file struct {
		name  string
		write func(io.Writer) error
	}
	files := []file{
		{m.Name + ".1", func(w io.Writer) error { return Man(w, m, split) }},
		{m.Name + ".bash", func(w io.Writer) error { return Bash(w, m) }},
		{"_" + m.Name, func(w io.Writer) error { return Zsh(w, m) }},
	}
	for _, p := range m.Commands {
		if split {
			files = append(files, file{m.Name + "-" + p.Name + ".1", func(w io.Writer) error { return ManPage(w, m, p) }})
		}
	}
	for _, d := range files {
		f, err := os.Create(filepath.Join(dir, d.name))
		if err != nil {
			return err
		}
		err = d.write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
