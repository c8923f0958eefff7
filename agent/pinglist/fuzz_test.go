package pinglist

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// Whatever the file holds, the parsers return a topology or peers that
// satisfy their own rules, or one *ParseError; never a panic.
func FuzzParseTopology(f *testing.F) {
	f.Add([]byte("n1 torA\nn2 torA # c\nn3 torB\n"))
	f.Add([]byte("n1 torA\nn1 torB\n"))
	f.Add([]byte("\x00 \xff\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		topo, err := ParseTopology(bytes.NewReader(in), "f")
		if err != nil {
			if pe := (*ParseError)(nil); !errors.As(err, &pe) {
				t.Fatalf("%T: %v", err, err)
			}
			return
		}
		for _, h := range topo.Hosts {
			if _, ok := topo.ToR(h); !ok || h == "" || strings.ContainsAny(h, " #\n") {
				t.Fatalf("host %q", h)
			}
			l, err := Build(topo, h, 3, Draw{Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range l.Entries {
				if e.Host == h {
					t.Fatalf("self %q on its list", h)
				}
			}
		}
	})
}

func FuzzParsePeers(f *testing.F) {
	f.Add([]byte("n1:9100\n[::1]:9100\nn1:9100\n"))
	f.Add([]byte("n1:0\n"))
	f.Add([]byte(":\n[]:1\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		peers, err := ParsePeers(bytes.NewReader(in), "f")
		if err != nil {
			if pe := (*ParseError)(nil); !errors.As(err, &pe) {
				t.Fatalf("%T: %v", err, err)
			}
			return
		}
		seen := map[Peer]bool{}
		for _, p := range peers {
			if p.Port == 0 || p.Host == "" || seen[p] {
				t.Fatalf("peer %+v (seen %v)", p, seen[p])
			}
			seen[p] = true
			back, err := ParsePeer(p.Addr())
			if err != nil || back != p {
				t.Fatalf("%s read back as %+v, %v", p.Addr(), back, err)
			}
		}
	})
}
