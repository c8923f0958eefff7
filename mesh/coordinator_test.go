package mesh

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/results"
)

// fabric is a fake mesh: each rank's bandwidth factor, slow links, ranks
// that die (as servers or clients) from a round on, and transient
// slowness that a retest does not see.
type fabric struct {
	slowNode  map[int]float64 // bandwidth factor
	slowLink  map[Pair]float64
	latLink   map[Pair]float64   // latency factor
	transient map[Pair]bool      // slow in the rounds only
	dieAt     map[int]int        // rank dies when its first task of this round starts
	dieRetest map[int]bool       // rank dies when the retests start
	stuck     map[int]bool       // rank never answers
	failNode  map[int]bool       // RDMA fails on every pair with this rank
	deadLink  map[Pair]bool      // RDMA fails on this pair, both ways
	oneWay    map[[2]int]float64 // bandwidth factor of one direction (from, to)
	starved   map[[2]int]bool    // nothing completes in the rounds, this direction (a client without CPU)
	mu        sync.Mutex
	dead      map[int]string
	calls     int
}

func (f *fabric) Dead(r int) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	why, ok := f.dead[r]
	return why, ok
}

func (f *fabric) Measure(ctx context.Context, client int, t Task) (Outcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.dead == nil {
		f.dead = map[int]string{}
	}
	for _, r := range []int{client, t.Server} {
		if at, ok := f.dieAt[r]; (ok && t.Round >= at) || (f.dieRetest[r] && t.Round == 0) {
			f.dead[r] = "killed"
		}
	}
	if _, gone := f.dead[client]; gone {
		return Outcome{}, errors.New("killed")
	}
	if f.stuck[client] {
		f.dead[client] = "no answer within 1s"
		return Outcome{}, errors.New("no answer within 1s")
	}
	if _, gone := f.dead[t.Server]; gone {
		return Outcome{Error: "server closed the control connection"}, nil
	}
	p := pairOf(client, t.Server)
	if f.failNode[client] || f.failNode[t.Server] || f.deadLink[p] {
		return Outcome{Error: "write-bw: transport retry counter exceeded (status 12)"}, nil
	}
	if f.starved[[2]int{client, t.Server}] && t.Round > 0 {
		return Outcome{Error: "write_bw: nothing completed in the measured interval", Idle: true}, nil
	}
	bw, lat := 100.0, 5.0
	// A little noise, the same every time, so that medians are not ties.
	bw += float64((client*7+t.Server*3)%5) * 0.5
	for _, r := range []int{client, t.Server} {
		if k, ok := f.slowNode[r]; ok {
			bw *= k
		}
	}
	if k, ok := f.slowLink[p]; ok {
		bw *= k
	}
	if k, ok := f.oneWay[[2]int{client, t.Server}]; ok {
		bw *= k
	}
	if k, ok := f.latLink[p]; ok {
		lat *= k
	}
	if f.transient[p] && t.Round > 0 {
		bw *= 0.5
	}
	return Outcome{BWGbps: bw, LatP50us: lat, LatP99us: lat * 2}, nil
}

func newMesh(n int) *results.Mesh {
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema}
	for r := 0; r < n; r++ {
		m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: fmt.Sprintf("node%d", r), Device: "mlx5_0", Port: 1, FWVer: "28.39.1002", RateGbps: 400, ActiveMTU: 4096, LinkLayer: "InfiniBand", GIDIndex: -1})
	}
	return m
}

func runFabric(n int, f *fabric, maxRetests int) *results.Mesh {
	m := newMesh(n)
	c := &Coordinator{Runner: f, Mesh: m, Rounds: Tournament(n), Addrs: make([]string, n),
		Opts: Options{Rules: DefaultRules, MaxRetests: maxRetests, Grace: 10 * time.Millisecond}}
	c.Run(context.Background())
	return m
}

// The verdicts: a wrong culprit, a missed one, a link blamed for a node
// (or the other way round) fails.
func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		n           int
		f           *fabric
		maxRetests  int
		culprits    []int
		links       []results.SuspectLink
		outliers    int // directions flagged in the rounds
		notRetested int
	}{
		{name: "healthy", n: 6, f: &fabric{}, maxRetests: 10},
		{name: "slow node", n: 6, f: &fabric{slowNode: map[int]float64{2: 0.5}}, maxRetests: 100, culprits: []int{2}, outliers: 10},
		{name: "slow node, odd n", n: 5, f: &fabric{slowNode: map[int]float64{0: 0.6}}, maxRetests: 100, culprits: []int{0}, outliers: 8},
		{name: "two slow nodes", n: 8, f: &fabric{slowNode: map[int]float64{1: 0.5, 4: 0.7}}, maxRetests: 100, culprits: []int{1, 4}, outliers: 26},
		{name: "slow link", n: 6, f: &fabric{slowLink: map[Pair]float64{{1, 4}: 0.5}}, maxRetests: 100, links: []results.SuspectLink{{A: 1, B: 4}}, outliers: 2},
		{name: "latency link", n: 4, f: &fabric{latLink: map[Pair]float64{{0, 3}: 3}}, maxRetests: 100, links: []results.SuspectLink{{A: 0, B: 3}}, outliers: 2},
		{name: "latency within the multiple", n: 4, f: &fabric{latLink: map[Pair]float64{{0, 3}: 1.8}}, maxRetests: 100},
		{name: "two links apart", n: 8, f: &fabric{slowLink: map[Pair]float64{{0, 1}: 0.5, {5, 6}: 0.5}}, maxRetests: 100, links: []results.SuspectLink{{A: 0, B: 1}, {A: 5, B: 6}}, outliers: 4},
		{name: "transient", n: 6, f: &fabric{transient: map[Pair]bool{{0, 3}: true}}, maxRetests: 100, outliers: 2},
		{name: "retests bounded", n: 6, f: &fabric{slowNode: map[int]float64{3: 0.5}}, maxRetests: 4, culprits: []int{3}, outliers: 10, notRetested: 6},
		{name: "a single pair", n: 2, f: &fabric{slowLink: map[Pair]float64{{0, 1}: 0.5}}, maxRetests: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := runFabric(tc.n, tc.f, tc.maxRetests)
			var culprits []int
			for _, c := range m.Culprits {
				culprits = append(culprits, c.Rank)
			}
			if !reflect.DeepEqual(culprits, tc.culprits) {
				t.Errorf("culprits %v, want %v", culprits, tc.culprits)
			}
			if !reflect.DeepEqual(m.Links, tc.links) {
				t.Errorf("links %v, want %v", m.Links, tc.links)
			}
			outliers, retested := 0, 0
			for _, p := range m.Pairs {
				if p.Outlier() {
					outliers++
				}
				if p.Retest != nil {
					retested++
				}
			}
			if outliers != tc.outliers || m.NotRetested != tc.notRetested || retested != min(outliers, tc.maxRetests) {
				t.Errorf("%d outliers, %d retested, %d not retested; want %d, %d", outliers, retested, m.NotRetested, tc.outliers, tc.notRetested)
			}
			if want := tc.n * (tc.n - 1); len(m.Pairs) != want {
				t.Errorf("%d directions, want %d", len(m.Pairs), want)
			}
		})
	}
}

func TestMismatches(t *testing.T) {
	m := newMesh(5)
	m.Ranks[3].FWVer = "28.36.1010"
	m.Ranks[1].ActiveMTU, m.Ranks[4].ActiveMTU = 1024, 2048
	m.Ranks[2].Device = "" // never reported: not judged
	m.Ranks[2].FWVer = "x"
	got := Mismatches(m.Ranks)
	want := []results.Mismatch{
		{Fact: "firmware", Majority: "28.39.1002", Odd: []results.RankValue{{Rank: 3, Value: "28.36.1010"}}},
		{Fact: "active MTU", Majority: "4096", Odd: []results.RankValue{{Rank: 1, Value: "1024"}, {Rank: 4, Value: "2048"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got := Mismatches(newMesh(3).Ranks); got != nil {
		t.Errorf("alike ranks: %+v", got)
	}
}

// A rank that dies is reported with the round, the directions with it
// after say so, and every other pair is measured.
func TestRankDiesMidMesh(t *testing.T) {
	for _, tc := range []struct {
		name  string
		n     int
		f     *fabric
		rank  int
		round int
		why   string
	}{
		{"dies", 5, &fabric{dieAt: map[int]int{3: 2}}, 3, 2, "killed"},
		{"stuck", 4, &fabric{stuck: map[int]bool{1: true}}, 1, 1, "no answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := runFabric(tc.n, tc.f, 100)
			r := m.Ranks[tc.rank]
			if !strings.Contains(r.Dead, tc.why) || r.DeadRound != tc.round {
				t.Errorf("rank %d: dead %q in round %d", tc.rank, r.Dead, r.DeadRound)
			}
			for _, p := range m.Pairs {
				involved := p.From == tc.rank || p.To == tc.rank
				switch {
				case involved && p.Round >= tc.round:
					if !strings.Contains(p.Error, fmt.Sprintf("rank %d left the mesh", tc.rank)) {
						t.Errorf("%d→%d round %d: error %q", p.From, p.To, p.Round, p.Error)
					}
				case !p.Measured():
					t.Errorf("%d→%d round %d not measured: %q", p.From, p.To, p.Round, p.Error)
				}
			}
			if len(m.Pairs) != tc.n*(tc.n-1) {
				t.Errorf("%d directions", len(m.Pairs))
			}
			if len(m.Culprits) != 0 || len(m.Links) != 0 {
				t.Errorf("a dead rank is not a slow one: %+v %+v", m.Culprits, m.Links)
			}
			for i, rk := range m.Ranks {
				if i != tc.rank && rk.Dead != "" {
					t.Errorf("rank %d dead too: %q", i, rk.Dead)
				}
			}
		})
	}
}

// A rank that dies during the retests is reported so, and its outliers
// stay bad (a failed retest clears nothing) but confirm nothing either:
// inconclusive, not a culprit by the rounds' figures alone.
func TestRankDiesInRetests(t *testing.T) {
	m := runFabric(4, &fabric{slowNode: map[int]float64{2: 0.5}, dieRetest: map[int]bool{2: true}}, 100)
	if r := m.Ranks[2]; r.Dead != "killed" || r.DeadRound != 4 {
		t.Errorf("rank 2: dead %q in round %d, want the retests (4)", r.Dead, r.DeadRound)
	}
	if len(m.Culprits) != 0 || len(m.Inconclusive) != 6 {
		t.Errorf("culprits %+v, inconclusive %+v: want none, and rank 2's 6 directions", m.Culprits, m.Inconclusive)
	}
	for _, p := range m.Pairs {
		if p.Outlier() && (p.Retest == nil || p.Retest.Error == "" || !p.Bad()) {
			t.Errorf("%d->%d: retest %+v", p.From, p.To, p.Retest)
		}
	}
}

// pairedRunner holds each direction of a round until the other direction
// of its pair has started (or a bound passes: then the direction fails),
// and counts the retests running at once.
type pairedRunner struct {
	mu       sync.Mutex
	started  map[partKey]chan struct{}
	parts    []Part // the parts of 0→1, in the order they ran
	retests  int
	maxRetry int
}

type partKey struct {
	d    Direction
	part Part
}

func (p *pairedRunner) gate(d partKey) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started[d] == nil {
		p.started[d] = make(chan struct{})
	}
	return p.started[d]
}

func (p *pairedRunner) Dead(int) (string, bool) { return "", false }

func (p *pairedRunner) Measure(ctx context.Context, client int, t Task) (Outcome, error) {
	if t.Round == 0 {
		p.mu.Lock()
		p.retests++
		p.maxRetry = max(p.maxRetry, p.retests)
		p.mu.Unlock()
		defer func() { p.mu.Lock(); p.retests--; p.mu.Unlock() }()
		return Outcome{BWGbps: 50, LatP50us: 5, LatP99us: 10}, nil
	}
	if client == 0 && t.Server == 1 {
		p.mu.Lock()
		p.parts = append(p.parts, t.Part)
		p.mu.Unlock()
	}
	close(p.gate(partKey{Direction{From: client, To: t.Server}, t.Part}))
	select {
	case <-p.gate(partKey{Direction{From: t.Server, To: client}, t.Part}):
	case <-time.After(5 * time.Second):
		return Outcome{Error: "the other direction never started"}, nil
	}
	bw := 100.0
	if client == 0 && t.Server == 1 {
		bw = 10 // an outlier, for the retests
	}
	if client == 2 && t.Server == 3 {
		bw = 10
	}
	return Outcome{BWGbps: bw, LatP50us: 5, LatP99us: 10}, nil
}

// BothAtOnce (the screening pass) runs the two directions of each pair at
// the same time, and the retests still one at a time.
func TestBothDirectionsAtOnce(t *testing.T) {
	const n = 6
	r := &pairedRunner{started: map[partKey]chan struct{}{}}
	m := newMesh(n)
	c := &Coordinator{Runner: r, Mesh: m, Rounds: Tournament(n), Addrs: make([]string, n),
		Opts: Options{Rules: DefaultRules, MaxRetests: 8, Grace: 10 * time.Millisecond, BothAtOnce: true}}
	c.Run(context.Background())
	if len(m.Pairs) != n*(n-1) {
		t.Fatalf("%d directions, want %d", len(m.Pairs), n*(n-1))
	}
	retested := 0
	for _, p := range m.Pairs {
		if p.Error != "" {
			t.Errorf("%d→%d: %s", p.From, p.To, p.Error)
		}
		if p.Retest != nil {
			retested++
		}
	}
	if retested < 2 || r.maxRetry != 1 {
		t.Errorf("%d directions retested, at most %d at once: want the two outliers, one at a time", retested, r.maxRetry)
	}
	// Both directions' write-bw together, then both send-lat: no
	// ping-pong beside the reverse direction's stream.
	if !reflect.DeepEqual(r.parts, []Part{BWPart, LatPart}) {
		t.Errorf("0→1 ran the parts %q, want write-bw then send-lat", r.parts)
	}
}

// screenedPath is a fabric whose screening pass (both directions at
// once, rounds ≥ 1) gets 0.55 of what a direction gets alone (a path
// bound by CPUs or PCIe, as on rxe), with one link at half speed.
type screenedPath struct{ bad Pair }

func (screenedPath) Dead(int) (string, bool) { return "", false }

func (s screenedPath) Measure(_ context.Context, client int, t Task) (Outcome, error) {
	bw := 100 + float64((client*7+t.Server*3)%5)*0.5
	if pairOf(client, t.Server) == s.bad {
		bw /= 2
	}
	if t.Round != 0 {
		bw *= 0.55
	}
	return Outcome{BWGbps: bw, LatP50us: 5, LatP99us: 10}, nil
}

// A screened mesh's retests run alone at full length: judged against the
// screening pass they clear a link at half speed (alone 50 against 55
// beside the reverse); judged against the controls, retested the same
// way, they confirm it.
func TestScreenControls(t *testing.T) {
	const n = 8
	for _, controls := range []int{0, 8} {
		m := newMesh(n)
		m.Screen = &results.MeshScreen{BWDurationS: 0.25, LatIters: 100}
		c := &Coordinator{Runner: screenedPath{bad: Pair{2, 5}}, Mesh: m, Rounds: Tournament(n), Addrs: make([]string, n),
			Opts: Options{Rules: DefaultRules, MaxRetests: 8, Grace: 10 * time.Millisecond, BothAtOnce: true, Controls: controls}}
		c.Run(context.Background())
		marked := 0
		for _, p := range m.Pairs {
			if p.Control {
				marked++
				if p.Outlier() || p.Retest == nil {
					t.Errorf("control %d->%d: outlier %v, retest %v", p.From, p.To, p.Outlier(), p.Retest)
				}
			}
		}
		want := []results.SuspectLink{{A: 2, B: 5}}
		switch controls {
		case 0:
			if len(m.Links) != 0 || marked != 0 || m.Screen.RetestBW != 0 {
				t.Errorf("no controls: links %+v, %d controls, ratio %v; want the link cleared (the flaw the controls mend)", m.Links, marked, m.Screen.RetestBW)
			}
		default:
			if !reflect.DeepEqual(m.Links, want) || marked != controls || len(m.Culprits) != 0 {
				t.Errorf("controls: links %+v culprits %+v, %d controls; want %+v", m.Links, m.Culprits, marked, want)
			}
			if r := m.Screen.RetestBW; r < 1.8 || r > 1.85 {
				t.Errorf("retest ratio %v, want 1/0.55", r)
			}
		}
	}
}
