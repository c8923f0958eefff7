// Package docgen writes a tool's man page and its bash and zsh completions
// from its pflag flag sets, so that what a package ships cannot drift from
// what the binary takes.
package docgen

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// Command is one subcommand: its name, what it does, and its flags.
type Command struct {
	Name, Summary string
	Flags         *pflag.FlagSet
}

// Tool is a binary and its subcommands, in the order they are shown.
type Tool struct {
	Name, Summary, Version string
	Commands               []Command
}

// roff escapes text for a man page: backslashes, hyphens (which man
// would otherwise hyphenate or render as a dash), a leading dot, and
// characters beyond ASCII (µ, ×: groff reads its input as Latin-1).
func roff(s string) string {
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
	s = b.String()
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// Man writes the tool's man page (section 1): a subsection per command
// with each flag, its value and its default.
func Man(w io.Writer, t Tool) error {
	var b strings.Builder
	fmt.Fprintf(&b, ".TH %s 1 \"\" \"%s %s\" \"User Commands\"\n", strings.ToUpper(t.Name), t.Name, roff(t.Version))
	fmt.Fprintf(&b, ".SH NAME\n%s \\- %s\n", t.Name, roff(t.Summary))
	fmt.Fprintf(&b, ".SH SYNOPSIS\n.B %s\n.I COMMAND\n[flags] [args]\n", t.Name)
	b.WriteString(".SH COMMANDS\n")
	for _, c := range t.Commands {
		fmt.Fprintf(&b, ".SS %s\n%s\n", roff(t.Name+" "+c.Name), roff(c.Summary))
		c.Flags.VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			name, usage := pflag.UnquoteUsage(f)
			b.WriteString(".TP\n")
			if f.Shorthand != "" {
				fmt.Fprintf(&b, "\\fB%s\\fR, ", roff("-"+f.Shorthand))
			}
			fmt.Fprintf(&b, "\\fB%s\\fR", roff("--"+f.Name))
			if name != "" {
				fmt.Fprintf(&b, " \\fI%s\\fR", roff(name))
			}
			b.WriteString("\n" + roff(usage))
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
				fmt.Fprintf(&b, " (default %s)", roff(f.DefValue))
			}
			b.WriteString("\n")
		})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// flagWords are the words a command's flags are typed as.
func flagWords(fs *pflag.FlagSet) []string {
	var words []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		words = append(words, "--"+f.Name)
		if f.Shorthand != "" {
			words = append(words, "-"+f.Shorthand)
		}
	})
	return words
}

// Bash writes a bash completion: commands first, then the command's flags;
// file names where a flag takes a value.
func Bash(w io.Writer, t Tool) error {
	fn := "_" + strings.ReplaceAll(t.Name, "-", "_")
	var b strings.Builder
	var names []string
	for _, c := range t.Commands {
		names = append(names, c.Name)
	}
	fmt.Fprintf(&b, "# bash completion for %s (generated from its flags)\n%s() {\n", t.Name, fn)
	b.WriteString("\tlocal cur=${COMP_WORDS[COMP_CWORD]}\n")
	fmt.Fprintf(&b, "\tif ((COMP_CWORD == 1)); then\n\t\tCOMPREPLY=($(compgen -W '%s' -- \"$cur\"))\n\t\treturn\n\tfi\n", strings.Join(names, " "))
	b.WriteString("\t[[ $cur == -* ]] || return 0\n\tcase ${COMP_WORDS[1]} in\n")
	for _, c := range t.Commands {
		fmt.Fprintf(&b, "\t%s) COMPREPLY=($(compgen -W '%s' -- \"$cur\")) ;;\n", c.Name, strings.Join(flagWords(c.Flags), " "))
	}
	fmt.Fprintf(&b, "\tesac\n}\ncomplete -o default -F %s %s\n", fn, t.Name)
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
func Zsh(w io.Writer, t Tool) error {
	fn := "_" + strings.ReplaceAll(t.Name, "-", "_")
	var b strings.Builder
	fmt.Fprintf(&b, "#compdef %s\n# zsh completion for %s (generated from its flags)\n%s() {\n\tlocal -a cmds\n\tcmds=(\n", t.Name, t.Name, fn)
	for _, c := range t.Commands {
		fmt.Fprintf(&b, "\t\t'%s:%s'\n", c.Name, zshText(c.Summary))
	}
	b.WriteString("\t)\n\tif ((CURRENT == 2)); then\n\t\t_describe command cmds\n\t\treturn\n\tfi\n\tcase $words[2] in\n")
	for _, c := range t.Commands {
		fmt.Fprintf(&b, "\t%s)\n\t\t_arguments", c.Name)
		c.Flags.VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			name, usage := pflag.UnquoteUsage(f)
			val := ""
			if name != "" {
				val = ":" + name + ":_files"
			}
			for _, word := range []string{"--" + f.Name, "-" + f.Shorthand} {
				if word != "-" {
					fmt.Fprintf(&b, " \\\n\t\t\t'%s[%s]%s'", word, zshText(usage), val)
				}
			}
		})
		b.WriteString(" \\\n\t\t\t'*:file:_files'\n\t\t;;\n")
	}
	fmt.Fprintf(&b, "\tesac\n}\n%s \"$@\"\n", fn)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFiles writes dir/NAME.1, dir/NAME.bash and dir/_NAME (zsh's name
// for a completion).
func WriteFiles(dir string, t Tool) error {
	for _, d := range []struct {
		name  string
		write func(io.Writer, Tool) error
	}{{t.Name + ".1", Man}, {t.Name + ".bash", Bash}, {"_" + t.Name, Zsh}} {
		f, err := os.Create(filepath.Join(dir, d.name))
		if err != nil {
			return err
		}
		err = d.write(f, t)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
