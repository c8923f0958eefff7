package pinglist

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestParseTopology(t *testing.T) {
	long := strings.Repeat("a", MaxLineBytes+1)
	cases := []struct {
		name, in string
		hosts    []string // grouped by ToR
		tors     []string
		err      string // the error's text, "" for none
	}{
		{"two ToRs", "# rack A\nn2 torA\nn1 torA  # trailing comment\n\n  n3\ttorB\n", []string{"n1", "n2", "n3"}, []string{"torA", "torB"}, ""},
		{"grouped by ToR, not name", "a torZ\nb torA\n", []string{"b", "a"}, []string{"torA", "torZ"}, ""},
		{"one field", "n1 torA\nn2\n", nil, nil, "topo line 2: want HOST TOR, got 1 fields"},
		{"three fields", "n1 torA rail3\n", nil, nil, "topo line 1: want HOST TOR, got 3 fields"},
		{"host twice", "n1 torA\n#\nn1 torB\n", nil, nil, "topo line 3: host n1 listed again (first on line 1)"},
		{"bad byte", "n{1} torA\n", nil, nil, `topo line 1: host "n{1}": byte '{' not allowed (letters, digits and - . _ : / [ ])`},
		{"long line", "n1 torA\n" + long + "\n", nil, nil, fmt.Sprintf("topo line 2: longer than %d bytes", MaxLineBytes)},
		{"long name", strings.Repeat("h", MaxNameBytes+1) + " t\n", nil, nil, fmt.Sprintf(`topo line 1: host %q: longer than %d bytes`, strings.Repeat("h", MaxNameBytes+1), MaxNameBytes)},
		{"empty", "# nothing\n\n", nil, nil, "topo line 0: no hosts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topo, err := ParseTopology(strings.NewReader(c.in), "topo")
			if c.err != "" {
				var pe *ParseError
				if err == nil || err.Error() != c.err || !errors.As(err, &pe) {
					t.Fatalf("err %v, want %q as a *ParseError", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(topo.Hosts, c.hosts) || !slices.Equal(topo.ToRs, c.tors) {
				t.Errorf("hosts %v tors %v, want %v %v", topo.Hosts, topo.ToRs, c.hosts, c.tors)
			}
		})
	}
}

func TestParsePeers(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string
		err      string
	}{
		{"deduped in first order", "n2:9100\nn1:9100 # me\nn2:9100\n[fe80::1]:9100\n", []string{"n2:9100", "n1:9100", "[fe80::1]:9100"}, ""},
		{"same host two ports", "n1:9100\nn1:9101\n", []string{"n1:9100", "n1:9101"}, ""},
		{"no port", "n1\n", nil, `peers line 1: "n1": want HOST:PORT`},
		{"port zero", "n1:0\n", nil, `peers line 1: "n1:0": port "0" outside 1..65535`},
		{"port too big", "n1:9100\nn2:65536\n", nil, `peers line 2: "n2:65536": port "65536" outside 1..65535`},
		{"port not a number", "n1:http\n", nil, `peers line 1: "n1:http": port "http" outside 1..65535`},
		{"no host", ":9100\n", nil, `peers line 1: ":9100": no host`},
		{"two on a line", "n1:1 n2:2\n", nil, "peers line 1: want one HOST:PORT, got 2 fields"},
		{"bad host", "n\"1:9100\n", nil, `peers line 1: host "n\"1": byte '"' not allowed (letters, digits and - . _ : / [ ])`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			peers, err := ParsePeers(strings.NewReader(c.in), "peers")
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range peers {
				got = append(got, p.Addr())
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

// fabric is n ToRs of size hosts each, hosts named h<tor>-<i>.
func fabric(tors, size int) *Topology {
	m := map[string]string{}
	for r := range tors {
		for i := range size {
			m[fmt.Sprintf("h%03d-%02d", r, i)] = fmt.Sprintf("tor%03d", r)
		}
	}
	return NewTopology(m)
}

func TestBuild(t *testing.T) {
	cases := []struct {
		name             string
		tors, size, k    int
		wantToR, wantRem int
	}{
		{"ToR-mesh plus k", 10, 8, 4, 7, 4},
		{"k capped by the other ToRs", 2, 3, 10, 2, 3},
		{"one ToR: no remote", 1, 5, 8, 4, 0},
		{"k zero", 4, 4, 0, 3, 0},
		{"all the others", 3, 2, 4, 1, 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			topo := fabric(c.tors, c.size)
			self := topo.Hosts[len(topo.Hosts)/2]
			myToR, _ := topo.ToR(self)
			l, err := Build(topo, self, c.k, Draw{Seed: 1, Period: 7})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			var tor, rem int
			for _, e := range l.Entries {
				if e.Host == self {
					t.Errorf("self on its own list")
				}
				if seen[e.Host] {
					t.Errorf("%s twice", e.Host)
				}
				seen[e.Host] = true
				if got, _ := topo.ToR(e.Host); got != e.ToR {
					t.Errorf("%s: ToR %s, topology says %s", e.Host, e.ToR, got)
				}
				switch e.Scope {
				case ScopeToR:
					tor++
					if e.ToR != myToR {
						t.Errorf("%s under %s listed as ToR-mesh of %s", e.Host, e.ToR, myToR)
					}
				case ScopeRemote:
					rem++
					if e.ToR == myToR {
						t.Errorf("%s drawn as remote from self's own ToR", e.Host)
					}
				}
			}
			if tor != c.wantToR || rem != c.wantRem {
				t.Errorf("%d ToR-mesh and %d remote peers, want %d and %d", tor, rem, c.wantToR, c.wantRem)
			}
		})
	}
	if _, err := Build(fabric(2, 2), "nobody", 1, Draw{}); err == nil || err.Error() != "host nobody is not in the topology" {
		t.Errorf("unknown self: %v", err)
	}
}

// The same draw gives the same list; another period or another node
// another; over many periods every remote host is drawn about equally.
func TestBuildDraws(t *testing.T) {
	topo := fabric(20, 8)
	self := topo.Hosts[3]
	remote := func(l List) []string {
		var hs []string
		for _, e := range l.Entries {
			if e.Scope == ScopeRemote {
				hs = append(hs, e.Host)
			}
		}
		return hs
	}
	a, _ := Build(topo, self, 5, Draw{Seed: 42, Period: 1})
	b, _ := Build(topo, self, 5, Draw{Seed: 42, Period: 1})
	c, _ := Build(topo, self, 5, Draw{Seed: 42, Period: 2})
	d, _ := Build(topo, topo.Hosts[4], 5, Draw{Seed: 42, Period: 1})
	if !slices.Equal(remote(a), remote(b)) {
		t.Errorf("same draw, two lists: %v and %v", remote(a), remote(b))
	}
	if slices.Equal(remote(a), remote(c)) {
		t.Errorf("periods 1 and 2 drew the same: %v", remote(a))
	}
	if slices.Equal(remote(a), remote(d)) {
		t.Errorf("two nodes drew the same: %v", remote(a))
	}
	counts := map[string]int{}
	const periods = 4000
	for p := range uint64(periods) {
		l, _ := Build(topo, self, 5, Draw{Seed: 9, Period: p})
		for _, h := range remote(l) {
			counts[h]++
		}
	}
	others := len(topo.Hosts) - 8
	if len(counts) != others {
		t.Errorf("%d of the %d remote hosts ever drawn", len(counts), others)
	}
	mean := float64(periods*5) / float64(others) // 131.6
	for h, n := range counts {
		if float64(n) < 0.6*mean || float64(n) > 1.4*mean { // > 5 sigma out
			t.Errorf("%s drawn %d times, mean %.1f", h, n, mean)
		}
	}
}
