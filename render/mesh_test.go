package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/results"
)

// fixtureMesh has every part of the mesh report: a rank with other
// firmware, a slow rank (culprit), a transient outlier, a failed
// direction, a rank that died in round 3, a pair not scheduled.
func fixtureMesh() *results.Mesh {
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, Launcher: "Slurm", BWSize: 1 << 20, LatSize: 8,
		BWDurationS: 2, LatIters: 1000, Rounds: 5, BWFraction: 0.9, LatMultiple: 2, MedianBW: 97.5, MedianLat: 2.1, ElapsedS: 42,
		Sigmas: 3.5, SpreadBW: 0.012, SpreadLat: 0.031}
	for r := 0; r < 5; r++ {
		m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: "node0" + string(rune('1'+r)), Addr: "10.0.0." + string(rune('1'+r)),
			Device: "mlx5_0", Port: 1, FWVer: "28.39.1002", RateGbps: 400, ActiveMTU: 4096, LinkLayer: "Ethernet", GIDIndex: 3})
	}
	m.Ranks[2].FWVer = "28.36.1010"
	m.Ranks[4].Dead, m.Ranks[4].DeadRound = "exited or was killed (its rendezvous connection closed)", 3
	add := func(from, to, round int, bw, lat float64) *results.MeshPair {
		m.Pairs = append(m.Pairs, results.MeshPair{From: from, To: to, Round: round, MeshFigures: results.MeshFigures{BWGbps: bw, LatP50us: lat, LatP99us: lat * 1.5}})
		return &m.Pairs[len(m.Pairs)-1]
	}
	add(0, 1, 1, 97.5, 2.1)
	add(1, 0, 1, 98.25, 2.05)
	add(0, 2, 2, 48, 2.2).SlowBW = true
	p := add(2, 0, 2, 47.5, 2.2)
	p.SlowBW, p.Retest = true, &results.MeshFigures{BWGbps: 48.5, LatP50us: 2.2, SlowBW: true}
	p = add(1, 2, 3, 49, 5.5)
	p.SlowBW, p.SlowLat, p.Retest = true, true, &results.MeshFigures{BWGbps: 50, LatP50us: 5.25, SlowBW: true, SlowLat: true}
	add(2, 1, 3, 50.5, 2.3).SlowBW = true
	p = add(3, 0, 4, 70, 2.0)
	p.SlowBW, p.Retest = true, &results.MeshFigures{BWGbps: 97, LatP50us: 2.0}
	add(0, 3, 4, 97, 2.0)
	add(1, 3, 5, 0, 0).Error = "write-bw: transport retry counter exceeded (status 12)"
	add(3, 1, 5, 97.75, 2.1)
	add(0, 4, 3, 0, 0).Error = "rank 4 left the mesh: exited or was killed (its rendezvous connection closed)"
	add(4, 0, 3, 0, 0).Error = "rank 4 left the mesh: exited or was killed (its rendezvous connection closed)"
	m.Pairs[2].Retest = &results.MeshFigures{Error: "rank 0 left the mesh"}
	m.Pairs[2].Retest.SlowBW = true
	m.Mismatches = []results.Mismatch{{Fact: "firmware", Majority: "28.39.1002", Odd: []results.RankValue{{Rank: 2, Value: "28.36.1010"}}}}
	m.Culprits = []results.Culprit{{Rank: 2, BadPairs: 2, Pairs: 2, BWRatio: 0.49}}
	m.Links = []results.SuspectLink{{A: 1, B: 3, OneWay: true, Failed: true}}
	m.Inconclusive = []results.Direction{{From: 3, To: 0}}
	m.NotRetested = 1
	return m
}

func TestMeshText(t *testing.T) {
	var b bytes.Buffer
	if err := MeshText(&b, fixtureMesh()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "mesh.txt", b.Bytes())
	b.Reset()
	if err := MeshJSON(&b, fixtureMesh()); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "mesh.json", b.Bytes())
	// The document reads back as it was written.
	m, err := results.DecodeMesh(&b)
	if err != nil || len(m.Pairs) != len(fixtureMesh().Pairs) || m.Ranks[4].DeadRound != 3 {
		t.Fatalf("read back: %v %+v", err, m)
	}
	// A clean mesh says so.
	clean := &results.Mesh{Kind: results.MeshKind, Schema: 1, Launcher: "Open MPI", Rounds: 1, BWSize: 65536, LatSize: 8,
		Ranks: []results.MeshRank{{Rank: 0, Device: "rxe0"}, {Rank: 1, Device: "rxe0"}},
		Pairs: []results.MeshPair{{From: 0, To: 1, Round: 1, MeshFigures: results.MeshFigures{BWGbps: 1, LatP50us: 9}}, {From: 1, To: 0, Round: 1, MeshFigures: results.MeshFigures{BWGbps: 1, LatP50us: 9}}}}
	b.Reset()
	MeshText(&b, clean)
	golden.Check(t, "mesh-clean.txt", b.Bytes())
}

func TestMeshDecodeRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"schema":2,"test":"write_bw"}`, "not a mesh document"},
		{`{"kind":"rdmabench-mesh","schema":9}`, "mesh schema 9"},
		{`{"kind":"rdmabench-mesh","schema":1,"ranks":[{"rank":0}],"pairs":[{"from":0,"to":3}]}`, "outside its 1 ranks"},
		{`[`, "not a mesh document"},
	} {
		if _, err := results.DecodeMesh(strings.NewReader(tc.doc)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// The heat map decodes back as an image of the size asked for, in both
// formats, for a mesh with outliers, failures and gaps, for two ranks of
// one value, and for a mesh where nothing was measured.
func TestMeshHeatmap(t *testing.T) {
	one := &results.Mesh{Ranks: make([]results.MeshRank, 2), Pairs: []results.MeshPair{{From: 0, To: 1, MeshFigures: results.MeshFigures{BWGbps: 5, LatP50us: 3}}, {From: 1, To: 0, MeshFigures: results.MeshFigures{BWGbps: 5, LatP50us: 3}}}}
	none := &results.Mesh{Ranks: make([]results.MeshRank, 3), Pairs: []results.MeshPair{{From: 0, To: 1, MeshFigures: results.MeshFigures{Error: "x"}}}}
	big := &results.Mesh{Ranks: make([]results.MeshRank, 40)}
	for i := 0; i < 40; i++ {
		for j := 0; j < 40; j++ {
			if i != j {
				big.Pairs = append(big.Pairs, results.MeshPair{From: i, To: j, MeshFigures: results.MeshFigures{BWGbps: float64(90 + (i*j)%10), LatP50us: 2, SlowBW: (i*j)%10 == 0}})
			}
		}
	}
	for name, m := range map[string]*results.Mesh{"fixture": fixtureMesh(), "one value": one, "nothing measured": none, "40 ranks": big} {
		t.Run(name, func(t *testing.T) {
			checkImages(t, PlotSize{Width: 900, Height: 500}, func(b *bytes.Buffer, f PlotFormat) error {
				return MeshHeatmap(b, f, PlotSize{Width: 900, Height: 500}, m)
			})
		})
	}
	if err := MeshHeatmap(&bytes.Buffer{}, PNG, DefaultPlotSize, &results.Mesh{Ranks: make([]results.MeshRank, 1)}); err == nil {
		t.Error("a mesh of one rank drawn")
	}
	if err := MeshHeatmap(&bytes.Buffer{}, "gif", DefaultPlotSize, fixtureMesh()); err == nil {
		t.Error("gif drawn")
	}
}
