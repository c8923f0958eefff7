// Package badinput runs the bad-input tables of the commands' tests: each
// row a command line, the exit status it must give and the one line it must
// print. The rows are data (testdata/badinput/*.txt), so that adding a case
// is adding a line.
//
// A row is
//
//	CODE | EXPECTED | ARGS
//
// ARGS are split as a shell splits words (single and double quotes, no
// expansion but the placeholders below); leading NAME=value words are the
// environment. $T is a fresh directory of the row's own, $F the table's
// files (testdata/badinput/files), $G the generated fixtures, $P a free
// 127.0.0.1:PORT of the row's own. For a code
// other than 0 and 1 stderr must be exactly one line containing EXPECTED,
// and for 2 stdout must be empty; for 0 and 1 stdout and stderr together
// must contain it.
package badinput

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Row is one bad input and what the command must answer.
type Row struct {
	Where string // file:line
	Code  int
	Want  string
	Env   []string
	Args  []string
}

// Dirs are what the placeholders stand for; Extra are a package's own
// (ncclbench's $N, the stand-in NCCL library).
type Dirs struct {
	Files, Generated string
	Extra            map[string]string
}

// ReadDir reads every *.txt table in dir.
func ReadDir(dir string) ([]Row, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.txt"))
	if err != nil {
		return nil, err
	}
	var rows []Row
	for _, p := range paths {
		rs, err := ReadFile(p)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rs...)
	}
	return rows, nil
}

// ReadFile reads one table.
func ReadFile(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []Row
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", filepath.Base(path), n)
		row, err := parseRow(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		row.Where = where
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

func parseRow(line string) (Row, error) {
	parts := strings.SplitN(line, " | ", 3)
	if len(parts) != 3 {
		return Row{}, fmt.Errorf("want CODE | EXPECTED | ARGS, got %q", line)
	}
	code, err := strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil {
		return Row{}, fmt.Errorf("exit code %q: %v", parts[0], err)
	}
	words, err := SplitWords(parts[2])
	if err != nil {
		return Row{}, err
	}
	r := Row{Code: code, Want: strings.TrimSpace(parts[1])}
	for len(words) > 0 && isEnv(words[0]) {
		r.Env, words = append(r.Env, words[0]), words[1:]
	}
	if len(words) == 0 {
		return Row{}, fmt.Errorf("no command in %q", line)
	}
	r.Args = words
	return r, nil
}

func isEnv(w string) bool {
	i := strings.IndexByte(w, '=')
	if i <= 0 {
		return false
	}
	for _, c := range w[:i] {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// SplitWords splits s into words as a shell would: blanks separate, single
// quotes keep everything, double quotes keep all but a backslash before " or
// \, and a backslash outside quotes keeps the next character.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
			continue
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated ' in %q", s)
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && (s[j+1] == '"' || s[j+1] == '\\') {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated \" in %q", s)
			}
			i = j
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
		default:
			cur.WriteByte(c)
		}
		inWord = true
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// usesPort: the row names $P.
func (r Row) usesPort() bool {
	for _, w := range append(append([]string{r.Want}, r.Env...), r.Args...) {
		if strings.Contains(w, "$P") {
			return true
		}
	}
	return false
}

// Expand replaces the placeholders in a row's words and its expected line:
// $T by tmp, $F and $G by d's directories.
func (r Row) Expand(d Dirs, tmp string) (env, args []string, want string) {
	pairs := []string{"$T", tmp, "$F", d.Files, "$G", d.Generated}
	for k, v := range d.Extra {
		pairs = append(pairs, k, v)
	}
	rep := strings.NewReplacer(pairs...)
	for _, e := range r.Env {
		env = append(env, rep.Replace(e))
	}
	for _, a := range r.Args {
		args = append(args, rep.Replace(a))
	}
	return env, args, rep.Replace(r.Want)
}

// Check says what is wrong with a command's answer to the row, or "".
func (r Row) Check(code int, stdout, stderr string) string {
	if code != r.Code {
		return fmt.Sprintf("exit %d, want %d", code, r.Code)
	}
	if r.Code == 0 || r.Code == 1 {
		if !strings.Contains(stdout+stderr, r.Want) {
			return fmt.Sprintf("output does not contain %q", r.Want)
		}
		return ""
	}
	// Bad input measured nothing, so it has nothing to print; a run that
	// could not finish (3) prints what it has.
	if r.Code == 2 && stdout != "" {
		return "printed on stdout as well"
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	switch {
	case stderr == "":
		return "no line on stderr"
	case !strings.HasSuffix(stderr, "\n"):
		return "stderr does not end its line"
	case len(lines) != 1:
		return fmt.Sprintf("%d lines on stderr, want one", len(lines))
	case !strings.Contains(stderr, r.Want):
		return fmt.Sprintf("stderr does not contain %q", r.Want)
	case strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine "):
		return "a panic"
	}
	return ""
}
