package docgen

import (
	"github.com/rdmabench/rdmabench/internal/exitcode"

	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// Regenerate is how a reader of a generated page, or of a failing test,
// brings docs/reference up to date.
const Regenerate = "make docs (or go test ./cmd/rdmabench ./cmd/ncclbench -run TestReference -update)"

// mdText escapes text for a Markdown table cell: the pipe ends a cell, and
// the rest would turn a usage into emphasis, code or an HTML tag.
func mdText(s string) string {
	return strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "<", "&lt;", ">", "&gt;", "\n", " ").Replace(s)
}

// mdCode is s as inline code in a table cell, where a pipe still needs
// its backslash.
func mdCode(s string) string {
	return "`" + strings.ReplaceAll(s, "|", `\|`) + "`"
}

// slug is the anchor GitHub gives a heading: lower case, punctuation other
// than - and _ dropped, spaces made hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// sentence is a summary as a paragraph: a capital and a full stop.
func sentence(s string) string { return mdText(capital(s)) }

// mdBlocks lays out description blocks; parseDescription has refused the
// markup a man page could not show, so the text goes out as it is.
func mdBlocks(b *bytes.Buffer, blocks []Block) {
	for i, bl := range blocks {
		switch bl.Kind {
		case Para:
			b.WriteString(bl.Text + "\n")
		case Item:
			b.WriteString("- " + bl.Text + "\n")
		case Code:
			b.WriteString("```\n" + strings.Join(bl.Lines, "\n") + "\n```\n")
		}
		// A list's items stay together; every other block ends with a
		// blank line.
		if bl.Kind != Item || i == len(blocks)-1 || blocks[i+1].Kind != Item {
			b.WriteString("\n")
		}
	}
}

// mdSections is a description's sections under headings of level.
func mdSections(b *bytes.Buffer, sections []Section, level string) {
	for _, s := range sections {
		fmt.Fprintf(b, "%s %s\n\n", level, s.Title)
		mdBlocks(b, s.Blocks)
	}
}

func header(b *bytes.Buffer, m Model) {
	fmt.Fprintf(b, "<!-- Generated from %s's flags by internal/docgen. Do not edit: %s. -->\n\n", m.Name, Regenerate)
}

// flagTable is a command's flags: names, value, default, help.
func flagTable(b *bytes.Buffer, p Page) {
	if len(p.Flags) == 0 {
		b.WriteString("No flags.\n")
		return
	}
	b.WriteString("| flag | value | default | what it does |\n|---|---|---|---|\n")
	for _, f := range p.Flags {
		names := mdCode("--" + f.Long)
		if f.Short != "" {
			names = mdCode("-"+f.Short) + ", " + names
		}
		def := ""
		if f.Default != "" {
			def = mdCode(f.Default)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", names, mdText(f.Value), def, mdText(f.Usage))
	}
}

// Reference is the tool's Markdown reference, file name to content, with
// no version in it so that it changes only when the flags do. split gives
// NAME.md, the list of commands, and NAME-COMMAND.md for each (rdmabench:
// each verbs test has some 60 flags); otherwise NAME.md holds every
// command, those with the same flags under one heading (ncclbench's seven
// collectives).
func Reference(m Model, split bool) map[string][]byte {
	files := map[string][]byte{}
	var b bytes.Buffer
	header(&b, m)
	fmt.Fprintf(&b, "# %s reference\n\n%s\n\n", m.Name, sentence(m.Summary))
	if split {
		fmt.Fprintf(&b, "Made from the flags the binary parses: `%s COMMAND --help` prints the same, `man %s` has every command, and `man %s-COMMAND` each one.\n\n", m.Name, m.Name, m.Name)
		b.WriteString("| command | what it does | flags |\n|---|---|---|\n")
		for _, c := range m.Commands {
			page := m.Name + "-" + c.Name + ".md"
			fmt.Fprintf(&b, "| [`%s`](%s) | %s | %d |\n", c.Name, page, mdText(c.Summary), len(c.Flags))
			files[page] = commandPage(m, c)
		}
	} else {
		fmt.Fprintf(&b, "Made from the flags the binary parses: `%s COMMAND --help` prints the same, and `man %s` has every command.\n\n", m.Name, m.Name)
		groupedCommands(&b, m)
		b.WriteString("\n")
	}
	mdExitStatus(&b)
	files[m.Name+".md"] = b.Bytes()
	return files
}

// commandPage is one command's page of a split reference.
func commandPage(m Model, c Page) []byte {
	var p bytes.Buffer
	header(&p, m)
	fmt.Fprintf(&p, "# %s %s\n\n%s\n\n", m.Name, c.Name, sentence(c.Summary))
	described := c.described()
	if described {
		mdBlocks(&p, c.Intro)
		p.WriteString("## Flags\n\n")
	}
	flagTable(&p, c)
	p.WriteString("\n")
	if described {
		mdSections(&p, c.Sections, "##")
	}
	fmt.Fprintf(&p, "[Every %s command](%s.md)\n", m.Name, m.Name)
	return p.Bytes()
}

// groupedCommands writes every command on one page, those whose flags are
// the same under one heading, in order of first use; a command with a
// description keeps a heading of its own.
func groupedCommands(b *bytes.Buffer, m Model) {
	var groups [][]Page
	for _, c := range m.Commands {
		i := slices.IndexFunc(groups, func(g []Page) bool {
			return !c.described() && !g[0].described() && slices.Equal(g[0].Flags, c.Flags)
		})
		if i < 0 {
			groups = append(groups, []Page{c})
		} else {
			groups[i] = append(groups[i], c)
		}
	}
	heading := func(g []Page) string {
		var names []string
		for _, c := range g {
			names = append(names, c.Name)
		}
		return strings.Join(names, ", ")
	}
	b.WriteString("| command | what it does |\n|---|---|\n")
	for _, g := range groups {
		for _, c := range g {
			fmt.Fprintf(b, "| [`%s`](#%s) | %s |\n", c.Name, slug(heading(g)), mdText(c.Summary))
		}
	}
	for _, g := range groups {
		fmt.Fprintf(b, "\n## %s\n\n", heading(g))
		if len(g) == 1 {
			fmt.Fprintf(b, "%s\n\n", sentence(g[0].Summary))
			mdBlocks(b, g[0].Intro)
		} else {
			b.WriteString("These commands take the same flags.\n\n")
		}
		flagTable(b, g[0])
		if len(g) == 1 && len(g[0].Sections) > 0 {
			b.WriteString("\n")
			mdSections(b, g[0].Sections, "###")
			b.Truncate(b.Len() - 1) // the next heading brings its blank line
		}
	}
}

// mdExitStatus is the exit-status contract (internal/exitcode) as a table
// under its own heading; docs/exit-codes.md says more of each.
func mdExitStatus(b *bytes.Buffer) {
	b.WriteString("\n## Exit status\n\nEvery command ([exit codes](../exit-codes.md)):\n\n| status | meaning |\n|---|---|\n")
	for _, s := range exitcode.Table {
		fmt.Fprintf(b, "| %d | %s |\n", s.Code, mdText(s.Meaning))
	}
}

// owned are the files in dir that the tool's reference may have written:
// NAME.md and NAME-*.md.
func owned(dir, name string) ([]string, error) {
	more, err := filepath.Glob(filepath.Join(dir, name+"-*.md"))
	if err != nil {
		return nil, err
	}
	var files []string
	if _, err := os.Stat(filepath.Join(dir, name+".md")); err == nil {
		files = append(files, name+".md")
	}
	for _, f := range more {
		files = append(files, filepath.Base(f))
	}
	return files, nil
}

// WriteReference writes Reference into dir and removes the pages of
// commands that are gone.
func WriteReference(dir string, m Model, split bool) error {
	files := Reference(m, split)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := owned(dir, m.Name)
	if err != nil {
		return err
	}
	for _, f := range old {
		if _, keep := files[f]; !keep {
			if err := os.Remove(filepath.Join(dir, f)); err != nil {
				return err
			}
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// StaleReference compares dir with Reference: the files that differ, are
// missing, or belong to a command that is gone, each with why, sorted.
func StaleReference(dir string, m Model, split bool) ([]string, error) {
	files := Reference(m, split)
	var stale []string
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		switch {
		case os.IsNotExist(err):
			stale = append(stale, name+": missing")
		case err != nil:
			return nil, err
		case !bytes.Equal(got, want):
			stale = append(stale, name+": differs from the flags or descriptions")
		}
	}
	old, err := owned(dir, m.Name)
	if err != nil {
		return nil, err
	}
	for _, f := range old {
		if _, ok := files[f]; !ok {
			stale = append(stale, f+": no such command any more")
		}
	}
	slices.Sort(stale)
	return stale, nil
}

// CheckReference is the reference test of a tool: under update it rewrites
// dir; otherwise it fails, saying how to regenerate, when dir is not what
// the flags make.
func CheckReference(dir string, m Model, split, update bool) error {
	if update {
		return WriteReference(dir, m, split)
	}
	stale, err := StaleReference(dir, m, split)
	if err != nil {
		return err
	}
	if len(stale) > 0 {
		// A test names docs/reference from its package's directory; the
		// reader runs make docs from the repository's top.
		shown := filepath.ToSlash(dir)
		for strings.HasPrefix(shown, "../") {
			shown = shown[3:]
		}
		return fmt.Errorf("%s is stale; regenerate it with %s:\n  %s", shown, Regenerate, strings.Join(stale, "\n  "))
	}
	return nil
}
