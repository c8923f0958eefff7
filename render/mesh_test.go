package render

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/expect"
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
		m.Pairs = append(m.Pairs, results.MeshPair{From: from, To: to, Round: round, Class: results.ClassCrossHost, MeshFigures: results.MeshFigures{BWGbps: bw, LatP50us: lat, LatP99us: lat * 1.5}})
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

// Directions no other pair of their class could be compared with are
// said, by class, and are not a finding against the mesh (issue 47).
func TestMeshNotJudged(t *testing.T) {
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, Rounds: 1, BWSize: 65536, LatSize: 8, BWFraction: 0.9, LatMultiple: 2,
		Ranks: []results.MeshRank{{Rank: 0, Host: "a", Device: "rxe0"}, {Rank: 1, Host: "b", Device: "rxe0"}},
		Pairs: []results.MeshPair{
			{From: 0, To: 1, Round: 1, Class: results.ClassCrossHost, MeshFigures: results.MeshFigures{BWGbps: 1, LatP50us: 9}},
			{From: 1, To: 0, Round: 1, Class: results.ClassCrossHost, MeshFigures: results.MeshFigures{BWGbps: 1, LatP50us: 9}}},
		NotJudged: []results.Direction{{From: 0, To: 1}, {From: 1, To: 0}}}
	var b bytes.Buffer
	if err := MeshText(&b, m); err != nil {
		t.Fatal(err)
	}
	want := "not judged: 2 directions (2 across hosts): neither rank has another pair of its class to compare with, so never blamed"
	if !strings.Contains(b.String(), want) || !MeshClean(m) {
		t.Errorf("clean %v, text:\n%s\nwant a line %q", MeshClean(m), b.String(), want)
	}
}

func TestMeshDecodeRefuses(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"schema":2,"test":"write_bw"}`, "not a mesh document"},
		{`{"kind":"rdmabench-mesh","schema":9}`, "mesh schema 9"},
		{`{"kind":"rdmabench-mesh","schema":1,"ranks":[{"rank":0}],"pairs":[{"from":0,"to":3}]}`, "outside its 1 ranks"},
		{`[`, "not a mesh document"},
		{`{"kind":"rdmabench-mesh","schema":3,"ranks":[{"rank":0},{"rank":1}],"culprits":[{"rank":7}]}`, "name rank 7, outside its 2 ranks"},
		{`{"kind":"rdmabench-mesh","schema":3,"ranks":[{"rank":0},{"rank":1}],"links":[{"a":0,"b":-1}]}`, "name rank -1"},
		{`{"kind":"rdmabench-mesh","schema":3,"ranks":[{"rank":0}],"inconclusive":[{"from":0,"to":4}]}`, "name rank 4"},
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

// The culprits told apart: a host blamed by two of its NICs (under one
// PCI root), a NIC whose host's other NIC is fine, and a node by latency:
// each line says what it points at and the figure that blames it.
func TestMeshCulpritKinds(t *testing.T) {
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, Launcher: "Slurm", BWSize: 1 << 20, LatSize: 8,
		BWDurationS: 2, LatIters: 1000, Rounds: 7, BWFraction: 0.9, LatMultiple: 2, Sigmas: 3.5}
	zero := 0
	for r := 0; r < 7; r++ {
		m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: "gpu" + string(rune('a'+r/2)), Device: "mlx5_" + string(rune('0'+r%2)), Port: 1,
			RateGbps: 400, ActiveMTU: 4096, LinkLayer: "InfiniBand", GIDIndex: -1, PCIRoot: "pci0000:17", NUMANode: &zero})
	}
	m.Culprits = []results.Culprit{
		{Rank: 0, Kind: results.CulpritHost, BadPairs: 6, Pairs: 6, BWRatio: 0.71, LatRatio: 1.02, SlowBW: true},
		{Rank: 1, Kind: results.CulpritHost, BadPairs: 5, Pairs: 6, BWRatio: 0.69, LatRatio: 1.01, SlowBW: true},
		{Rank: 3, Kind: results.CulpritNIC, BadPairs: 6, Pairs: 6, BWRatio: 0.52, LatRatio: 1.1, SlowBW: true},
		{Rank: 6, Kind: results.CulpritNode, BadPairs: 4, Pairs: 6, BWRatio: 0.98, LatRatio: 3.4, SlowLat: true},
	}
	m.Hosts = []results.SuspectHost{{Host: "gpua", Ranks: []int{0, 1}, NICs: 2, Total: 2, PCIRoot: "pci0000:17"}}
	var b bytes.Buffer
	if err := MeshText(&b, m); err != nil {
		t.Fatal(err)
	}
	text := b.String()
	expect.Contains(t, "report", text,
		" LIKELY CULPRIT: host gpua, not one NIC: 2 of its 2 NICs slow (ranks 0, 1, all under PCI root pci0000:17): its CPUs, memory, PCIe or software\n",
		"   rank 0 (gpua mlx5_0): 6 of its 6 pairs bad; its pairs' bandwidth at 0.71 x their partners' other pairs\n",
		" LIKELY CULPRIT: rank 3 (gpub mlx5_1), the NIC (its host's other NICs are fine): 6 of its 6 pairs bad; its pairs' bandwidth at 0.52 x their partners' other pairs\n",
		" LIKELY CULPRIT: rank 6 (gpud), the node: 4 of its 6 pairs bad; its pairs' latency at 3.40 x their partners' other pairs\n",
	)
	// The figure that did not blame is not shown as if it did.
	if strings.Contains(text, "bandwidth at 0.98") {
		t.Errorf("a latency culprit shown by its bandwidth:\n%s", text)
	}
}

// An outlier its retest cleared: the report's last line does not say "no
// outliers" under an outlier's line, and the reason it gives for the
// clearing fits the round (other pairs beside it, or none: a NIC that
// every rank shares runs its pairs one a round).
func TestMeshClearedOutliers(t *testing.T) {
	pair := func(from, to, round int, bw float64, rt *results.MeshFigures) results.MeshPair {
		p := results.MeshPair{From: from, To: to, Round: round, MeshFigures: results.MeshFigures{BWGbps: bw, LatP50us: 80, LatP99us: 90}, Retest: rt}
		p.SlowBW = rt != nil
		return p
	}
	fine := &results.MeshFigures{BWGbps: 0.29, LatP50us: 45, LatP99us: 50}
	for _, tc := range []struct {
		name   string
		pairs  []results.MeshPair
		reason string
	}{
		{"alone in its round", []results.MeshPair{pair(0, 1, 1, 0.19, fine), pair(1, 0, 1, 0.28, nil), pair(2, 3, 2, 0.28, nil), pair(3, 2, 2, 0.28, nil)},
			" outlier 0->1 (round 1): 0.19 Gb/s, 80.00 us; again 0.29 Gb/s, 45.00 us: fine (not slow when measured again)\n"},
		{"beside another pair", []results.MeshPair{pair(0, 1, 1, 0.19, fine), pair(1, 0, 1, 0.28, nil), pair(2, 3, 1, 0.28, nil), pair(3, 2, 1, 0.28, nil)},
			" outlier 0->1 (round 1): 0.19 Gb/s, 80.00 us; alone 0.29 Gb/s, 45.00 us: fine (slow only while other pairs ran)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, Launcher: "Open MPI", BWSize: 65536, LatSize: 8,
				BWDurationS: 1, LatIters: 200, Rounds: 2, BWFraction: 0.9, LatMultiple: 2, Sigmas: 3.5, Pairs: tc.pairs}
			for r := range 4 {
				m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: "rxe-guest", Device: "rxe0", Port: 1, ActiveMTU: 1024, LinkLayer: "Ethernet", GIDIndex: 1})
			}
			if !MeshClean(m) {
				t.Fatalf("a mesh whose only outlier was cleared is not clean")
			}
			var b bytes.Buffer
			if err := MeshText(&b, m); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			if !strings.Contains(text, tc.reason) || !strings.HasSuffix(text, " no outliers left (1 cleared by a retest), no failures, no mismatches\n") || strings.Contains(text, " no outliers,") {
				t.Errorf("report:\n%s", text)
			}
		})
	}
}

// A direction that failed in its round and measured fine alone is let go,
// as a cleared outlier (a 64-rank mesh on 2 CPUs: "nothing completed in
// the measured interval" of a starved rank); one never measured again
// stays a failure.
func TestMeshClearedFailure(t *testing.T) {
	failed := func(rt *results.MeshFigures) results.MeshPair {
		return results.MeshPair{From: 0, To: 1, Round: 1, MeshFigures: results.MeshFigures{Error: "write_bw to rank 1: nothing completed in the measured interval"}, Retest: rt}
	}
	ok := func(from, to int) results.MeshPair {
		return results.MeshPair{From: from, To: to, Round: 1, MeshFigures: results.MeshFigures{BWGbps: 0.1, LatP50us: 20, LatP99us: 21}}
	}
	for _, tc := range []struct {
		name  string
		first results.MeshPair
		clean bool
		line  string
	}{
		{"retest fine", failed(&results.MeshFigures{BWGbps: 0.1, LatP50us: 20.8, LatP99us: 22}), true,
			" failed 0->1 (round 1): write_bw to rank 1: nothing completed in the measured interval; alone 0.10 Gb/s, 20.80 us: fine (failed only while other pairs ran)\n"},
		{"not retested", failed(nil), false, " failed 0->1 (round 1): write_bw to rank 1: nothing completed in the measured interval\n"},
		{"retest failed", failed(&results.MeshFigures{Error: "again"}), false, " failed 0->1 (round 1): write_bw to rank 1: nothing completed in the measured interval\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, Launcher: "Open MPI", BWSize: 16384, LatSize: 8,
				BWDurationS: 1, LatIters: 10, Rounds: 1, BWFraction: 0.9, LatMultiple: 2, Sigmas: 3.5, Pairs: []results.MeshPair{tc.first, ok(1, 0)}}
			for r := range 2 {
				m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: fmt.Sprintf("node%d", r), Device: "mlx5_0", Port: 1, ActiveMTU: 4096, LinkLayer: "Ethernet"})
			}
			if MeshClean(m) != tc.clean {
				t.Errorf("clean %v, want %v", MeshClean(m), tc.clean)
			}
			var b bytes.Buffer
			if err := MeshText(&b, m); err != nil {
				t.Fatal(err)
			}
			text := b.String()
			if !strings.Contains(text, tc.line) || strings.Contains(text, "no failures") != tc.clean {
				t.Errorf("report:\n%s\nwant the line %q", text, tc.line)
			}
		})
	}
}
