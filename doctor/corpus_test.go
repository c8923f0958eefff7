package doctor

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCorpus runs doctor over the sysfs trees in testdata/corpus, each
// captured by a public project or from a real machine, against its
// EXPECT file: source and verdict, "want: CHECK SUBJECT STATUS TEXT" lines
// and the FAILs ("fails: none" for a healthy host).
func TestCorpus(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*", "EXPECT"))
	if len(dirs) == 0 {
		t.Fatal("no corpus")
	}
	for _, exp := range dirs {
		name := filepath.Base(filepath.Dir(exp))
		t.Run(name, func(t *testing.T) {
			f, err := os.Open(exp)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			fields := map[string][]string{}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if k, v, ok := strings.Cut(sc.Text(), ": "); ok {
					fields[k] = append(fields[k], v)
				}
			}
			if len(fields["source"]) == 0 || len(fields["verdict"]) == 0 || len(fields["fails"]) != 1 {
				t.Fatalf("EXPECT needs a source, a verdict and one fails line: %v", fields)
			}
			// A tree from a public project names its URL; one captured on
			// a real kernel here names the script that built and captured it.
			if by := fields["captured-by"]; len(by) == 1 {
				if st, err := os.Stat(filepath.Join("testdata", "corpus", by[0])); err != nil || st.Mode()&0o111 == 0 {
					t.Fatalf("captured-by %s: not an executable script beside the tree (%v)", by[0], err)
				}
			} else if !strings.HasPrefix(fields["source"][0], "https://") {
				t.Fatalf("source %q: a URL, or captured-by naming the capture script", fields["source"][0])
			}
			root := materialize(t, filepath.Join("corpus", name))
			r, err := Run(Options{SysRoot: filepath.Join(root, "sys"), ProcRoot: filepath.Join(root, "proc"),
				DevRoot: filepath.Join(root, "dev"), Capture: true})
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range fields["want"] {
				p := strings.SplitN(w, " ", 4)
				if len(p) != 4 {
					t.Fatalf("bad want %q", w)
				}
				found := false
				for _, f := range r.Find(p[0], p[1]) {
					found = found || (string(f.Status) == p[2] && strings.Contains(f.Value, p[3]))
				}
				if !found {
					t.Errorf("want %s; got %+v", w, r.Find(p[0], p[1]))
				}
			}
			got := strings.Join(fails(r), ", ")
			if got == "" {
				got = "none"
			}
			if got != fields["fails"][0] {
				t.Errorf("FAILs %s, want %s", got, fields["fails"][0])
			}
		})
	}
}
