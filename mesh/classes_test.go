package mesh

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// rxeFabric replays a real mesh's figures, as a Runner: each pair's
// bandwidth as the real run measured it (both directions), each
// measurement, retests included, that times exp(jitter·Z), the latency
// likewise with twice the jitter.
type rxeFabric struct {
	n      int
	seed   uint64
	jitter float64
	bw     map[Pair]float64 // Gb/s, by pair (lower rank first)
	lat    float64          // us
}

func (f *rxeFabric) Dead(int) (string, bool) { return "", false }

func (f *rxeFabric) Measure(_ context.Context, client int, t Task) (Outcome, error) {
	attempt := uint64(1)
	if t.Round == 0 {
		attempt = 2
	}
	rng := rand.New(rand.NewPCG(f.seed, (uint64(client*f.n+t.Server)<<2)|attempt))
	bw := f.bw[Pair{min(client, t.Server), max(client, t.Server)}] * math.Exp(f.jitter*rng.NormFloat64())
	lat := f.lat * math.Exp(2*f.jitter*rng.NormFloat64())
	return Outcome{BWGbps: bw, LatP50us: lat, LatP99us: 2 * lat}, nil
}

// rxeMesh runs the real mesh of ranks (host, device) and pair figures bw
// with the default rules and retests, the schedule as the command makes
// it.
func rxeMesh(hosts, devs []string, bw map[Pair]float64, seed uint64) *results.Mesh {
	n := len(hosts)
	m := newMesh(n)
	share := make([]Share, n)
	for r := range n {
		m.Ranks[r].Host, m.Ranks[r].Device, m.Ranks[r].LinkLayer = hosts[r], devs[r], "Ethernet"
		share[r] = Share{NIC: m.Ranks[r].NIC(), Host: m.Ranks[r].Host}
	}
	f := &rxeFabric{n: n, seed: seed, jitter: 0.05, bw: bw, lat: 2000}
	c := &Coordinator{Runner: f, Mesh: m, Rounds: LimitShared(Tournament(n), share, 0), Addrs: make([]string, n),
		Opts: Options{Rules: DefaultRules, MaxRetests: 64, Controls: ControlsFor(m.Ranks, 0, 0)}}
	c.Run(context.Background())
	return m
}

// The healthy rxe meshes that named culprits before pairs were judged
// within their class (issue 47), as the real runs measured them, each
// with 5% jitter on bandwidth and 10% on latency in 1000 seeded variants
// (-short: 100): none may blame anything.
//
//   - Two hosts of two rxe NICs, a rank each: the pairs across hosts at
//     0.07-0.09 Gb/s, a host's own two NICs at 0.20 (through the host).
//     The old rule read the 0.20 among a rank's "other pairs": "LIKELY
//     CULPRIT: rank 1 (rxe-node1), the node: 3 of its 3 pairs bad; its
//     pairs' bandwidth at 0.66 x their partners' other pairs". Now no rank
//     has another pair of its same-rail, cross-rail or same-host class:
//     nothing is judged, all 12 directions are reported not judged.
//   - Four ranks on one rxe0: pairs at 0.32-0.38 Gb/s, rank 2 - rank 3 at
//     0.32. The old rule: "LIKELY LINK: rank 2 - rank 3: slower than both
//     ranks' other pairs". Two ranks of one NIC have no link between
//     them: an outlier there no culprit explains is inconclusive.
//
// Two ranks of one NIC are no evidence against either rank either (they
// share the NIC and the host; their pairs differ by what the host did
// while each ran): 2 of rank 3's 3 pairs below 0.9x made it a "node"
// culprit in 13 of 1000 variants when they counted.
//
// Measured, 1000 variants each (at the parent of this change, the test
// run against the old analysis): the old rule blamed the first in 1000 of
// 1000 variants (every rank a culprit of some kind) and the second in 82
// (the link 2-3, both ways or one); the new blames nothing in either, the
// second's 2-3 inconclusive in 200.
func TestRealRxeMeshesBlameNobody(t *testing.T) {
	variants := 1000
	if testing.Short() {
		variants = 100
	}
	for _, tc := range []struct {
		name        string
		hosts, devs []string
		bw          map[Pair]float64
		notJudged   int
	}{
		{"2 hosts x 2 rxe NICs", []string{"rxe-node0", "rxe-node1", "rxe-node0", "rxe-node1"}, []string{"rxe0", "rxe0", "rxe1", "rxe1"},
			map[Pair]float64{{0, 1}: 0.08, {0, 2}: 0.20, {0, 3}: 0.07, {1, 2}: 0.09, {1, 3}: 0.20, {2, 3}: 0.085}, 12},
		{"4 ranks on one rxe0", []string{"rxe-guest", "rxe-guest", "rxe-guest", "rxe-guest"}, []string{"rxe0", "rxe0", "rxe0", "rxe0"},
			map[Pair]float64{{0, 1}: 0.36, {0, 2}: 0.35, {0, 3}: 0.38, {1, 2}: 0.37, {1, 3}: 0.34, {2, 3}: 0.32}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			blamedIn, inconclusive := 0, 0
			for i := range variants {
				m := rxeMesh(tc.hosts, tc.devs, tc.bw, uint64(i)*7919+17)
				if blamed(m) {
					blamedIn++
					if blamedIn <= 3 {
						t.Errorf("variant %d: culprits %+v hosts %+v links %+v", i, m.Culprits, m.Hosts, m.Links)
					}
				}
				if len(m.Inconclusive) > 0 {
					inconclusive++
				}
				if len(m.NotJudged) != tc.notJudged {
					t.Fatalf("variant %d: %d directions not judged, want %d", i, len(m.NotJudged), tc.notJudged)
				}
			}
			t.Logf("%s: blamed in %d of %d variants, an outlier inconclusive in %d", tc.name, blamedIn, variants, inconclusive)
			if blamedIn > 0 {
				t.Errorf("blamed in %d of %d variants, want none", blamedIn, variants)
			}
		})
	}
}

// The classes of a mesh's pairs: ranks on one device, a host's NICs,
// rails (NIC indexes by device name, mlx5_2 before mlx5_10) where both
// hosts have several NICs, across hosts where one has one.
func TestPairClasses(t *testing.T) {
	ranks := []results.MeshRank{
		{Rank: 0, Host: "a", Device: "mlx5_10", Port: 1},
		{Rank: 1, Host: "a", Device: "mlx5_2", Port: 1},
		{Rank: 2, Host: "a", Device: "mlx5_2", Port: 1},
		{Rank: 3, Host: "b", Device: "mlx5_0", Port: 1},
		{Rank: 4, Host: "b", Device: "mlx5_1", Port: 1},
		{Rank: 5, Host: "c", Device: "mlx5_0", Port: 1},
		{Rank: 6, Device: "mlx5_0", Port: 1},
		{Rank: 7, Device: "mlx5_0", Port: 1},
	}
	pc := results.NewPairClasses(ranks)
	for _, tc := range []struct {
		a, b int
		want results.PairClass
	}{
		{1, 2, results.ClassSameNIC},
		{0, 1, results.ClassSameHost},
		{1, 3, results.ClassSameRail}, // a's rail 0 is mlx5_2, b's mlx5_0
		{0, 4, results.ClassSameRail},
		{0, 3, results.ClassCrossRail},
		{3, 5, results.ClassCrossHost}, // c has one NIC
		{6, 7, results.ClassCrossHost}, // no host name: a host each
	} {
		if got := pc.Of(tc.a, tc.b); got != tc.want || pc.Of(tc.b, tc.a) != tc.want {
			t.Errorf("ranks %d, %d: %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
