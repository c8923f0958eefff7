package ncclog

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// expectation is a corpus EXPECT file: "key: value" lines; every key but
// source, what and verdict is checked against the analysis.
type expectation map[string][]string

func readExpect(t *testing.T, path string) expectation {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("every corpus log needs its EXPECT file: %v", err)
	}
	defer f.Close()
	e := expectation{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		e[k] = append(e[k], strings.TrimSpace(v))
	}
	return e
}

func yesNo(b bool) string { return map[bool]string{true: "yes", false: "no"}[b] }

// TestCorpus runs every log in testdata/corpus (excerpts of real logs
// from public issues, with their source in the EXPECT file) against what
// a careful reader concludes from it.
func TestCorpus(t *testing.T) {
	logs, _ := filepath.Glob(filepath.Join("testdata", "corpus", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no corpus")
	}
	for _, log := range logs {
		name := strings.TrimSuffix(filepath.Base(log), ".log")
		t.Run(name, func(t *testing.T) {
			e := readExpect(t, strings.TrimSuffix(log, ".log")+".expect")
			if len(e["source"]) == 0 || !strings.HasPrefix(e["source"][0], "https://") || len(e["verdict"]) == 0 {
				t.Fatalf("EXPECT needs a source URL and a verdict: %v", e)
			}
			r := parseFile(t, filepath.Join("corpus", name+".log"))
			a := r.Analysis
			var kinds, statuses []string
			for _, x := range a.Errors {
				if !slices.Contains(kinds, string(x.Kind)) {
					kinds = append(kinds, string(x.Kind))
				}
				if x.Kind == ErrCompletion && !slices.Contains(statuses, x.Status) {
					statuses = append(statuses, x.Status)
				}
			}
			slices.Sort(kinds)
			slices.Sort(statuses)
			if len(kinds) == 0 {
				kinds = []string{"none"}
			}
			got := map[string]string{
				"network": string(a.Network), "transport": a.Transport, "socket_fallback": yesNo(a.SocketFallback),
				"gdr": a.GDR, "versions": strings.Join(a.NCCLVersions, ","), "hosts": strings.Join(r.Hosts, ","),
				"errors": strings.Join(kinds, ","), "error_status": strings.Join(statuses, ","),
			}
			for k, want := range e {
				switch k {
				case "source", "what", "verdict":
				case "finding":
					for _, w := range want {
						if !slices.ContainsFunc(a.Findings, func(f string) bool { return strings.Contains(f, w) }) {
							t.Errorf("no finding with %q in %q", w, a.Findings)
						}
					}
				default:
					g, ok := got[k]
					if !ok {
						t.Errorf("unknown EXPECT key %q", k)
					} else if g != want[0] {
						t.Errorf("%s = %q, want %q", k, g, want[0])
					}
				}
			}
		})
	}
}
