package render

import (
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// A quick mesh's report is its search's verdict: the suspects by kind,
// what is open, the ranks that left; clean only without any of them.
func TestMeshQuickText(t *testing.T) {
	mk := func(q results.MeshQuick, dead bool) *results.Mesh {
		m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshQuickSchema, Launcher: "Open MPI", BWSize: 16384, BWDurationS: 0.6,
			Screen: &results.MeshScreen{BWDurationS: 0.3}, Rounds: q.Rounds, ElapsedS: 7, Quick: &q}
		q.Fraction = 0.85
		for r := range 4 {
			m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: "node" + string(rune('0'+r)), Device: "mlx5_0", Port: 1})
		}
		m.Pairs = []results.MeshPair{{From: 0, To: 1, Round: 1, MeshFigures: results.MeshFigures{BWGbps: 0.1}}}
		if dead {
			m.Ranks[3].Dead, m.Ranks[3].DeadRound = "killed", 2
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		m     *results.Mesh
		clean bool
		want  []string
	}{
		{"healthy", mk(results.MeshQuick{Rounds: 4, RandomRounds: 4, CannotSee: []string{"latency"}}, false), true,
			[]string{"4 rounds (4 random matchings", "write-bw 16 KiB for 0.3s", "nothing named, nothing left open: no NIC, node, host, rail or link slower than 0.85 x", "cannot see: latency"}},
		{"a NIC", mk(results.MeshQuick{Rounds: 12, RandomRounds: 4, Suspects: []results.QuickSuspect{{Kind: results.QuickNIC, Ranks: []int{2}, Text: "NIC of rank 2 (node2): 0.70 x known-good partners"}}}, false), false,
			[]string{"LIKELY NIC: NIC of rank 2 (node2): 0.70 x"}},
		{"open", mk(results.MeshQuick{Rounds: 36, RandomRounds: 4, UnresolvedRanks: []int{1}, UnresolvedPairs: [][2]int{{0, 2}}}, false), false,
			[]string{"unresolved: ranks 1 still suspect", "unresolved: pair 0-2"}},
		{"a rank left", mk(results.MeshQuick{Rounds: 6, RandomRounds: 4}, true), false,
			[]string{"rank 3 (node3) left the mesh in round 2: killed"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			if err := MeshText(&b, tc.m); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in:\n%s", w, out)
				}
			}
			if MeshClean(tc.m) != tc.clean || strings.Contains(out, "nothing named") != tc.clean {
				t.Errorf("clean %v, want %v:\n%s", MeshClean(tc.m), tc.clean, out)
			}
			if strings.Contains(out, "Bandwidth [Gb/s]") {
				t.Errorf("a quick mesh's report has the full mesh's matrices:\n%s", out)
			}
		})
	}
}
