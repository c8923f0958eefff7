package mesh

import (
	"reflect"
	"sort"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// The blame, told apart: a node, a link, one direction, a dead path. Each
// case is one a reviewer found wrong (issue 24).
func TestBlame(t *testing.T) {
	for _, tc := range []struct {
		name     string
		n        int
		f        *fabric
		culprits []results.Culprit
		links    []results.SuspectLink
	}{
		// 2 bad pairs of its 19: two links, not a bad node.
		{name: "two bad links share a node", n: 20, f: &fabric{slowLink: map[Pair]float64{{0, 1}: 0.5, {0, 2}: 0.5}},
			links: []results.SuspectLink{{A: 0, B: 1}, {A: 0, B: 2}}},
		{name: "three bad links share a node of 10", n: 10, f: &fabric{slowLink: map[Pair]float64{{3, 4}: 0.5, {3, 7}: 0.6, {3, 9}: 0.5}},
			links: []results.SuspectLink{{A: 3, B: 4}, {A: 3, B: 7}, {A: 3, B: 9}}},
		// The node is in 2/N of the directions: the mesh's median is no
		// reference on a small mesh, its partners' other pairs are.
		{name: "slow node of 3", n: 3, f: &fabric{slowNode: map[int]float64{1: 0.5}},
			culprits: []results.Culprit{{Rank: 1, Kind: results.CulpritNode, BadPairs: 2, Pairs: 2, BWRatio: 0.5, LatRatio: 1, SlowBW: true}}},
		{name: "slow node of 4", n: 4, f: &fabric{slowNode: map[int]float64{3: 0.85}},
			culprits: []results.Culprit{{Rank: 3, Kind: results.CulpritNode, BadPairs: 3, Pairs: 3, BWRatio: 0.85, LatRatio: 1, SlowBW: true}}},
		{name: "one bad link of 3", n: 3, f: &fabric{slowLink: map[Pair]float64{{0, 2}: 0.5}},
			links: []results.SuspectLink{{A: 0, B: 2}}},
		{name: "one slow direction", n: 6, f: &fabric{oneWay: map[[2]int]float64{{4, 1}: 0.5}},
			links: []results.SuspectLink{{A: 4, B: 1, OneWay: true}}},
		{name: "a culprit and a link elsewhere", n: 8, f: &fabric{slowNode: map[int]float64{0: 0.6}, slowLink: map[Pair]float64{{4, 5}: 0.5}},
			culprits: []results.Culprit{{Rank: 0, Kind: results.CulpritNode, BadPairs: 7, Pairs: 7, BWRatio: 0.6, LatRatio: 1, SlowBW: true}}, links: []results.SuspectLink{{A: 4, B: 5}}},
		{name: "a ring of bad links blames no one node", n: 8, f: &fabric{slowLink: map[Pair]float64{{0, 1}: 0.5, {1, 2}: 0.5, {2, 3}: 0.5, {4, 5}: 0.5}},
			links: []results.SuspectLink{{A: 0, B: 1}, {A: 1, B: 2}, {A: 2, B: 3}, {A: 4, B: 5}}},
		{name: "a latency link", n: 5, f: &fabric{latLink: map[Pair]float64{{2, 4}: 3}}, links: []results.SuspectLink{{A: 2, B: 4}}},
		// Failed directions are blamed too.
		{name: "a node failing every pair", n: 5, f: &fabric{failNode: map[int]bool{2: true}},
			culprits: []results.Culprit{{Rank: 2, Kind: results.CulpritNode, BadPairs: 4, Pairs: 4, FailedPairs: 4, SlowBW: true, SlowLat: true}}},
		{name: "a dead path", n: 5, f: &fabric{deadLink: map[Pair]bool{{1, 3}: true}},
			links: []results.SuspectLink{{A: 1, B: 3, Failed: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := runFabric(tc.n, tc.f, 100)
			for i := range m.Culprits {
				// The ratio to two places: the fake's figures jitter by 1%.
				m.Culprits[i].BWRatio = float64(int(m.Culprits[i].BWRatio*100+0.5)) / 100
				m.Culprits[i].LatRatio = float64(int(m.Culprits[i].LatRatio*100+0.5)) / 100
			}
			if !reflect.DeepEqual(m.Culprits, tc.culprits) {
				t.Errorf("culprits %+v, want %+v", m.Culprits, tc.culprits)
			}
			if !reflect.DeepEqual(m.Links, tc.links) {
				t.Errorf("links %+v, want %+v", m.Links, tc.links)
			}
			if len(m.Inconclusive) > 0 {
				t.Errorf("inconclusive %+v", m.Inconclusive)
			}
		})
	}
}

// An outlier is blamed only when its retest stays outside the spread: one
// not retested (--max-retests 0) is inconclusive, one the retest cleared
// is fine.
func TestUnconfirmedIsInconclusive(t *testing.T) {
	m := runFabric(6, &fabric{slowLink: map[Pair]float64{{1, 4}: 0.5}}, 0)
	want := []results.Direction{{From: 1, To: 4}, {From: 4, To: 1}}
	if len(m.Links) != 0 || len(m.Culprits) != 0 || !reflect.DeepEqual(sortedDirs(m.Inconclusive), want) {
		t.Errorf("links %+v culprits %+v inconclusive %+v; want only %+v inconclusive", m.Links, m.Culprits, m.Inconclusive, want)
	}
	m = runFabric(6, &fabric{transient: map[Pair]bool{{2, 5}: true}}, 10)
	if len(m.Links)+len(m.Culprits)+len(m.Inconclusive) != 0 {
		t.Errorf("a transient outlier: links %+v culprits %+v inconclusive %+v", m.Links, m.Culprits, m.Inconclusive)
	}
}

// A direction where nothing completed (a client starved of CPU, as 256
// ranks on 2 CPUs left hundreds) is a dead path only when its retest
// alone fails too: not retested it is inconclusive, retested fine it is
// cleared; one whose retest fails is the dead path it looked.
func TestIdleFailureNeedsItsRetest(t *testing.T) {
	starved := map[[2]int]bool{{2, 5}: true}
	m := runFabric(6, &fabric{starved: starved}, 0)
	if len(m.Links)+len(m.Culprits) != 0 || !reflect.DeepEqual(m.Inconclusive, []results.Direction{{From: 2, To: 5}}) {
		t.Errorf("not retested: links %+v culprits %+v inconclusive %+v; want 2->5 inconclusive only", m.Links, m.Culprits, m.Inconclusive)
	}
	m = runFabric(6, &fabric{starved: starved}, 10)
	if len(m.Links)+len(m.Culprits)+len(m.Inconclusive) != 0 {
		t.Errorf("retested fine: links %+v culprits %+v inconclusive %+v", m.Links, m.Culprits, m.Inconclusive)
	}
	m = runFabric(6, &fabric{deadLink: map[Pair]bool{{2, 5}: true}}, 0)
	if want := []results.SuspectLink{{A: 2, B: 5, Failed: true}}; !reflect.DeepEqual(m.Links, want) {
		t.Errorf("a failure with the NIC's status, not retested: links %+v, want %+v", m.Links, want)
	}
}

func sortedDirs(d []results.Direction) []results.Direction {
	out := append([]results.Direction(nil), d...)
	sort.Slice(out, func(i, j int) bool { return out[i].From < out[j].From })
	return out
}

// A retest that failed because a rank left confirms no link: the rank's
// leaving is reported, the outlier is inconclusive.
func TestRetestLostToALeavingRank(t *testing.T) {
	m := runFabric(6, &fabric{slowLink: map[Pair]float64{{1, 4}: 0.5}, dieRetest: map[int]bool{4: true}}, 100)
	if m.Ranks[4].Dead == "" || len(m.Links) != 0 || len(m.Culprits) != 0 {
		t.Errorf("rank 4 %q; links %+v culprits %+v: want no blame", m.Ranks[4].Dead, m.Links, m.Culprits)
	}
	if len(m.Inconclusive) != 2 {
		t.Errorf("inconclusive %+v, want both directions of 1-4", m.Inconclusive)
	}
}

// make demo's mesh (issue 37): 4 ranks, the rounds slowed by what ran
// beside them, --max-retests 4. The four outliers retested alone are fine
// and the four not retested are inconclusive: neither is evidence, so no
// rank is a culprit (the old rule named every rank, "at 1.02 x its
// partners' other pairs"). The same document judged again says the same.
func TestContendedDemoBlamesNobody(t *testing.T) {
	f := &fabric{transient: map[Pair]bool{{0, 1}: true, {1, 2}: true, {1, 3}: true, {2, 3}: true}}
	m := runFabric(4, f, 4)
	outliers := 0
	for _, p := range m.Pairs {
		if p.Outlier() {
			outliers++
		}
	}
	if outliers != 8 || m.NotRetested != 4 {
		t.Fatalf("%d outliers, %d not retested: the case needs 8 and 4", outliers, m.NotRetested)
	}
	if len(m.Culprits)+len(m.Hosts)+len(m.Links) != 0 {
		t.Errorf("culprits %+v hosts %+v links %+v: want no blame", m.Culprits, m.Hosts, m.Links)
	}
	DefaultRules.MarkOutliers(m)
	DefaultRules.Analyze(m)
	if len(m.Culprits)+len(m.Hosts)+len(m.Links) != 0 {
		t.Errorf("judged again: culprits %+v hosts %+v links %+v", m.Culprits, m.Hosts, m.Links)
	}
}

// Controls are taken where a host's NICs run pairs at once (their rounds
// slow each other, their retests alone do not) and where the mesh is too
// small to fit the noise a pair's directions share; not on a larger mesh
// of a host each, or one whose hosts run their pairs one at a time; a
// command's own (screening) controls stand.
func TestControlsFor(t *testing.T) {
	ranks := func(hosts, devs []string) []results.MeshRank {
		var out []results.MeshRank
		for i := range hosts {
			out = append(out, results.MeshRank{Rank: i, Host: hosts[i], Device: devs[i], Port: 1})
		}
		return out
	}
	for _, tc := range []struct {
		name           string
		ranks          []results.MeshRank
		perHost, given int
		want           int
	}{
		{"a host each, 6 ranks", ranks([]string{"a", "b", "c", "d", "e", "f"}, []string{"m", "m", "m", "m", "m", "m"}), 0, 0, 0},
		{"one NIC shared (make demo, 4 ranks)", ranks([]string{"g", "g", "g", "g"}, []string{"rxe0", "rxe0", "rxe0", "rxe0"}), 0, 0, 0},
		{"a rank per NIC", ranks([]string{"a", "a", "a", "b", "b", "b"}, []string{"m0", "m1", "m2", "m0", "m1", "m2"}), 0, 0, SharedControls},
		{"a rank per NIC, --per-host 1", ranks([]string{"a", "a", "a", "b", "b", "b"}, []string{"m0", "m1", "m2", "m0", "m1", "m2"}), 1, 0, 0},
		{"screening's own", ranks([]string{"a", "a"}, []string{"mlx5_0", "mlx5_1"}), 0, 5, 5},
	} {
		if got := ControlsFor(tc.ranks, tc.perHost, tc.given); got != tc.want {
			t.Errorf("%s: %d controls, want %d", tc.name, got, tc.want)
		}
	}
}

// make demo's saved mesh (mesh/testdata/README.md): four ranks on one
// rxe device whose pairs differ by what the host was doing while each ran
// (both directions alike). Judged again it names nobody: no pair of rank
// 1 was confirmed bad by a retest, and 4 ranks are too few to know the
// noise the directions share, so its typical pair alone blames nothing.
func TestDemoMeshNamesNobody(t *testing.T) {
	m, err := results.ReadMeshFile("testdata/demo-rxe-shared-nic.json")
	if err != nil {
		t.Fatal(err)
	}
	DefaultRules.MarkOutliers(m)
	DefaultRules.Analyze(m)
	if len(m.Culprits)+len(m.Hosts)+len(m.Links) != 0 {
		t.Errorf("culprits %+v hosts %+v links %+v: want no blame", m.Culprits, m.Hosts, m.Links)
	}
}
