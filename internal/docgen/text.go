package docgen

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A command's description is a small Markdown, the part of it that a man
// page and a Markdown page both show the same way:
//
//   - paragraphs, their lines joined;
//   - lists, each item starting "- " and going on in lines indented by two
//     spaces;
//   - code blocks, after a blank line, indented by four spaces;
//   - `code` spans in paragraphs and items;
//   - "## Title" headings, each starting a section shown after the flags
//     (a man page's FILES, SIGNALS and so on); what comes before the first
//     is the description proper.
//
// Anything else Markdown would read as markup (emphasis, links, tags) is
// refused rather than shown as stray characters in the man page.

// BlockKind says how a Block is laid out.
type BlockKind int

const (
	// Para is a paragraph: Text is its lines joined by spaces.
	Para BlockKind = iota
	// Item is one item of a list: Text as for Para.
	Item
	// Code is a code block: Lines as written, without their indent.
	Code
)

// Block is one paragraph, list item or code block of a description.
type Block struct {
	Kind  BlockKind
	Text  string
	Lines []string
}

// Section is a titled part of a description, shown after the flags.
type Section struct {
	Title  string
	Blocks []Block
}

// reservedTitles are the sections a man page or reference page has from
// the model itself; a description's own would make a second.
var reservedTitles = []string{"NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "FLAGS", "SEE ALSO"}

// parseDescription splits a description into the blocks before its first
// heading and its sections, refusing what both writers cannot show alike.
func parseDescription(s string) (intro []Block, sections []Section, err error) {
	var cur *[]Block = &intro
	var open *Block // the paragraph, item or code block still taking lines
	add := func(b Block) {
		*cur = append(*cur, b)
		open = &(*cur)[len(*cur)-1]
	}
	for n, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		n++
		line = strings.TrimRight(line, " ")
		bad := func(format string, args ...any) error {
			return fmt.Errorf("line %d: %s", n, fmt.Sprintf(format, args...))
		}
		switch {
		case strings.ContainsRune(line, '\t'):
			return nil, nil, bad("a tab (indent with spaces)")
		case line == "":
			open = nil
		case strings.HasPrefix(line, "#"):
			title, ok := strings.CutPrefix(line, "## ")
			if !ok || strings.TrimSpace(title) == "" || strings.ContainsAny(title, "`#*[]<>\\") {
				return nil, nil, bad("a heading must be \"## Title\", in plain words: %q", line)
			}
			if open != nil {
				return nil, nil, bad("a heading needs a blank line before it")
			}
			title = strings.TrimSpace(title)
			if slices.Contains(reservedTitles, strings.ToUpper(title)) {
				return nil, nil, bad("%q is a section the writers make themselves", title)
			}
			sections = append(sections, Section{Title: title})
			cur = &sections[len(sections)-1].Blocks
		case strings.HasPrefix(line, "    ") && (open == nil || open.Kind == Code):
			if open == nil {
				add(Block{Kind: Code})
			}
			open.Lines = append(open.Lines, line[4:])
		case strings.HasPrefix(line, "- "):
			if open != nil && open.Kind != Item {
				return nil, nil, bad("a list needs a blank line before it")
			}
			add(Block{Kind: Item, Text: strings.TrimSpace(line[2:])})
		case strings.HasPrefix(line, "  ") && open != nil && open.Kind == Item:
			open.Text += " " + strings.TrimSpace(line)
		case strings.HasPrefix(line, " "):
			return nil, nil, bad("an indent that is neither a list item's two spaces nor a code block's four after a blank line: %q", line)
		case open != nil && open.Kind == Para:
			open.Text += " " + line
		case open != nil:
			return nil, nil, bad("a paragraph needs a blank line before it")
		default:
			add(Block{Kind: Para, Text: line})
		}
	}
	check := func(bs []Block) error {
		for _, b := range bs {
			if b.Kind != Code {
				if err := checkInline(b.Text); err != nil {
					return fmt.Errorf("%w in %q", err, b.Text)
				}
			}
		}
		return nil
	}
	if err := check(intro); err != nil {
		return nil, nil, err
	}
	for _, sec := range sections {
		if len(sec.Blocks) == 0 {
			return nil, nil, fmt.Errorf("section %q is empty", sec.Title)
		}
		if err := check(sec.Blocks); err != nil {
			return nil, nil, err
		}
	}
	return intro, sections, nil
}

// spans splits text at its backticks: the even parts are prose, the odd
// ones code.
func spans(text string) []string { return strings.Split(text, "`") }

// checkInline refuses what Markdown would read as markup outside code
// spans, which the man page would show as it is: emphasis (* and a word's
// leading or trailing _), links and their brackets, tags, escapes.
func checkInline(text string) error {
	parts := spans(text)
	if len(parts)%2 == 0 {
		return fmt.Errorf("a ` without its pair")
	}
	for i, p := range parts {
		if i%2 == 1 {
			if p == "" || strings.TrimSpace(p) != p {
				return fmt.Errorf("an empty code span, or one starting or ending with a space")
			}
			continue
		}
		if strings.ContainsAny(p, "*[]<>\\") {
			return fmt.Errorf("Markdown markup (one of * [ ] < > \\) outside a code span")
		}
		for _, w := range strings.FieldsFunc(p, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' }) {
			if strings.HasPrefix(w, "_") || strings.HasSuffix(w, "_") {
				return fmt.Errorf("%q would be emphasis in Markdown: put it in a code span", w)
			}
		}
	}
	return nil
}

// flagWordsIn are the words a description says are the command's flags:
// the first word of a code span that starts with a dash, and every dashed
// word of a code span or code block line that is a command line of this
// command ("rdmabench agent ...").
func flagWordsIn(intro []Block, sections []Section, tool, cmd string) []string {
	var words []string
	prefix := tool + " " + cmd + " "
	fromCommandLine := func(s string) {
		if !strings.HasPrefix(s, prefix) {
			return
		}
		for _, w := range strings.Fields(s[len(prefix):]) {
			if len(w) > 1 && w[0] == '-' {
				words = append(words, w)
			}
		}
	}
	scan := func(bs []Block) {
		for _, b := range bs {
			if b.Kind == Code {
				// A command line may go on over lines ending in "\".
				line := ""
				for _, l := range b.Lines {
					line += strings.TrimSpace(strings.TrimPrefix(l, "$ "))
					if c, ok := strings.CutSuffix(line, "\\"); ok {
						line = c + " "
						continue
					}
					fromCommandLine(line)
					line = ""
				}
				fromCommandLine(line)
				continue
			}
			for i, p := range spans(b.Text) {
				if i%2 == 0 {
					continue
				}
				if strings.HasPrefix(p, "-") {
					words = append(words, strings.Fields(p)[0])
				}
				fromCommandLine(p)
			}
		}
	}
	scan(intro)
	for _, s := range sections {
		scan(s.Blocks)
	}
	return words
}

// unknownFlags are the words of flagWordsIn that are none of the page's
// flags ("--name", "--name=value" or "-x"), each once: a flag renamed or
// removed leaves the prose describing it stale, and this makes that an
// error where the flag table would just change.
func unknownFlags(p Page, words []string) []string {
	var bad []string
	for _, w := range words {
		name := strings.SplitN(w, "=", 2)[0]
		known := slices.ContainsFunc(p.Flags, func(f Flag) bool {
			return name == "--"+f.Long || (f.Short != "" && name == "-"+f.Short)
		})
		if !known && !slices.Contains(bad, name) {
			bad = append(bad, name)
		}
	}
	return bad
}

// capital is s with its first letter a capital and a full stop at its end.
func capital(s string) string {
	if s == "" {
		return ""
	}
	r, n := utf8.DecodeRuneInString(s)
	return string(unicode.ToUpper(r)) + s[n:] + "."
}
