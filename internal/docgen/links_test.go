package docgen

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// mdScan reads a Markdown file outside its fenced code blocks: the anchors
// of its headings (as GitHub makes them, a repeated one with -1, -2 ...)
// and its links' targets, each with its line.
func mdScan(path string) (anchors map[string]bool, links []string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	anchors = map[string]bool{}
	seen := map[string]int{}
	fenced := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		if h := strings.TrimLeft(line, "#"); len(h) < len(line) && strings.HasPrefix(h, " ") {
			a := slug(strings.TrimSpace(strings.ReplaceAll(h, "`", "")))
			if k := seen[a]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", a, k)] = true
			} else {
				anchors[a] = true
			}
			seen[a]++
		}
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			links = append(links, fmt.Sprintf("%d\t%s", n, m[1]))
		}
	}
	return anchors, links, sc.Err()
}

// Every relative link in README.md and docs/ (generated pages included)
// reaches a file, and every #anchor a heading of its page: pages move and
// headings change as topics are added, and GitHub shows a dead link
// without a word.
func TestDocsLinks(t *testing.T) {
	root := filepath.Join("..", "..")
	pages := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".md") {
			pages = append(pages, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{}
	scan := func(p string) (map[string]bool, []string) {
		a, links, err := mdScan(p)
		if err != nil {
			t.Fatal(err)
		}
		anchorsOf[p] = a
		return a, links
	}
	checked := 0
	for _, page := range pages {
		_, links := scan(page)
		for _, l := range links {
			line, target, _ := strings.Cut(l, "\t")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Join(filepath.Dir(page), file)
			}
			rel, _ := filepath.Rel(root, page)
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s:%s: link %q: no such file", rel, line, target)
				continue
			}
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			a, ok := anchorsOf[dest]
			if !ok {
				a, _ = scan(dest)
			}
			if !a[anchor] {
				t.Errorf("%s:%s: link %q: no heading with that anchor", rel, line, target)
			}
		}
	}
	if checked < 50 {
		t.Errorf("only %d relative links checked: the scan misses links", checked)
	}
}
