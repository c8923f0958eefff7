package mesh

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"
)

// quickFabric is the contention-and-stall noise model of the quick mode,
// as a QuickMeasurer. Every direction is 100 Gb/s times the slowest
// fault on the pair's path, times:
//   - contention: a share (10%) of each round's pairs slow each other,
//     both directions by one factor drawn uniformly in 0.8-0.9x;
//   - a scheduler stall: a direction at 0.3x once, with probability 1%;
//   - exp(jitter·Z), Z standard normal, each direction (5%; 10% reported);
//
// and an intermittent stop: a pair returns nothing once, probability 0.5%.
type quickFabric struct {
	rng                     *rand.Rand
	jitter                  float64
	contShare, stall, stops float64
	hosts, nics             int // rank r: host r/nics, NIC index r%nics
	slowNIC                 map[int]float64
	slowHost                map[int]float64
	slowRail                map[int]float64
	path                    func(Pair) bool // a pair through the faulty uplink
	pathFactor              float64
}

func (f *quickFabric) factor(p Pair) float64 {
	k := 1.0
	for _, r := range []int{p.A, p.B} {
		if x, ok := f.slowNIC[r]; ok {
			k = min(k, x)
		}
		if x, ok := f.slowHost[r/f.nics]; ok {
			k = min(k, x)
		}
	}
	if x, ok := f.slowRail[p.A%f.nics]; ok && p.A%f.nics == p.B%f.nics {
		k = min(k, x)
	}
	if f.path != nil && f.path(p) {
		k = min(k, f.pathFactor)
	}
	return k
}

func (f *quickFabric) MeasureRound(_ int, pairs []Pair) []QuickResult {
	out := make([]QuickResult, 0, len(pairs))
	for _, p := range pairs {
		if f.rng.Float64() < f.stops {
			out = append(out, QuickResult{Pair: p, Failed: true})
			continue
		}
		bw := 100 * f.factor(p)
		if f.rng.Float64() < f.contShare {
			bw *= 0.8 + 0.1*f.rng.Float64()
		}
		var d [2]float64
		for i := range d {
			d[i] = bw * math.Exp(f.jitter*f.rng.NormFloat64())
			if f.rng.Float64() < f.stall {
				d[i] *= 0.3
			}
		}
		out = append(out, QuickResult{Pair: p, AB: d[0], BA: d[1]})
	}
	return out
}

func quickLayout(hosts, nics int) []QuickRank {
	l := make([]QuickRank, hosts*nics)
	for r := range l {
		l[r] = QuickRank{Host: fmt.Sprintf("host%d", r/nics), NIC: r % nics, Device: fmt.Sprintf("mlx5_%d", r%nics)}
	}
	return l
}

// quickShape is a fault of the simulations.
type quickShape string

const (
	qsHealthy quickShape = "healthy"
	qsNIC     quickShape = "NIC at 0.7x"
	qsNode    quickShape = "node at 0.7x"
	qsHost    quickShape = "host at 0.7x"
	qsRail    quickShape = "rail at 0.7x"
	qsPath    quickShape = "path: 1/32 of a leaf's cross-leaf pairs at 0.7x"
)

// leafHosts is the hosts under one leaf switch of a rail (rail-optimized:
// a leaf per rail and group of 16 hosts); an uplink takes 1/32 of the
// pairs leaving it, by a hash of the pair.
const leafHosts, uplinks = 16, 32

type quickOutcome struct {
	named, falseBlame, open bool
	rounds                  int
	wall                    time.Duration
}

// quickSim runs one mesh of shape s: hosts × nics ranks (a rank a NIC;
// the node shape is hosts × 1).
func quickSim(s quickShape, hosts, nics int, seed uint64, jitter float64, randomRounds int) quickOutcome {
	if s == qsNode {
		hosts, nics = hosts*nics, 1
	}
	n := hosts * nics
	rng := rand.New(rand.NewPCG(seed, 0xfab))
	f := &quickFabric{rng: rng, jitter: jitter, contShare: 0.10, stall: 0.01, stops: 0.005, hosts: hosts, nics: nics, pathFactor: 0.7}
	victim := rng.IntN(n)
	switch s {
	case qsNIC, qsNode:
		f.slowNIC = map[int]float64{victim: 0.7}
	case qsHost:
		f.slowHost = map[int]float64{victim / nics: 0.7}
	case qsRail:
		f.slowRail = map[int]float64{victim % nics: 0.7}
	case qsPath:
		rail, leaf, salt := victim%nics, (victim/nics)/leafHosts, rng.Uint64()
		f.path = func(p Pair) bool {
			if p.A%nics != rail || p.B%nics != rail {
				return false
			}
			la, lb := (p.A/nics)/leafHosts, (p.B/nics)/leafHosts
			if (la == leaf) == (lb == leaf) {
				return false
			}
			h := rand.New(rand.NewPCG(salt, uint64(p.A)<<32|uint64(p.B))).Uint64()
			return h%uplinks == 0
		}
	}
	q, err := NewQuick(quickLayout(hosts, nics), QuickOptions{Seed: seed ^ 0x9e3779b97f4a7c15, RandomRounds: randomRounds})
	if err != nil {
		panic(err)
	}
	v := RunQuick(q, f)
	o := quickOutcome{rounds: v.Rounds, wall: v.Wall, open: len(v.UnresolvedRanks)+len(v.UnresolvedPairs) > 0}
	one := len(v.Suspects) == 1
	switch s {
	case qsHealthy:
		o.falseBlame = v.Blames()
	case qsNIC, qsNode:
		kind := QuickNIC
		if s == qsNode {
			kind = QuickNode
		}
		o.named = one && v.Suspects[0].Kind == kind && v.Suspects[0].Ranks[0] == victim
		o.falseBlame = !o.named && v.Blames()
	case qsHost:
		o.named = one && v.Suspects[0].Kind == QuickHost && v.Suspects[0].Host == fmt.Sprintf("host%d", victim/nics)
		o.falseBlame = !o.named && v.Blames()
	case qsRail:
		o.named = one && v.Suspects[0].Kind == QuickRail && v.Suspects[0].Rail == victim%nics
		o.falseBlame = !o.named && v.Blames()
	case qsPath:
		for _, su := range v.Suspects {
			if su.Kind == QuickLink && f.path(pairOf(su.Ranks[0], su.Ranks[1])) {
				o.named = true
			} else {
				o.falseBlame = true
			}
		}
		o.named = o.named && !o.falseBlame
	}
	return o
}

type quickRow struct {
	shape                 quickShape
	meshes, named, blamed int
	open                  int // meshes with a suspect open when the rounds ran out
	rounds, maxRounds     int
	wall, maxWall         time.Duration
}

func (r quickRow) String() string {
	pct := func(k int) float64 { return 100 * float64(k) / float64(r.meshes) }
	return fmt.Sprintf("| %s | %d | %.1f%% | %.1f%% | %.1f%% | %.1f / %d | %.1fs / %.1fs |", r.shape, r.meshes, pct(r.named), pct(r.blamed), pct(r.open),
		float64(r.rounds)/float64(r.meshes), r.maxRounds, (r.wall / time.Duration(r.meshes)).Seconds(), r.maxWall.Seconds())
}

func quickRun(s quickShape, hosts, nics, meshes int, jitter float64, randomRounds int) quickRow {
	row := quickRow{shape: s, meshes: meshes}
	for i := range meshes {
		o := quickSim(s, hosts, nics, uint64(i)*7919+uint64(hosts*nics)*104729+uint64(randomRounds), jitter, randomRounds)
		if o.named {
			row.named++
		}
		if o.falseBlame {
			row.blamed++
		}
		if o.open {
			row.open++
		}
		row.rounds += o.rounds
		row.maxRounds = max(row.maxRounds, o.rounds)
		row.wall += o.wall
		row.maxWall = max(row.maxWall, o.wall)
	}
	return row
}

const quickHeader = "| shape | meshes | named as such | blames something else | a suspect left open | rounds mean / max | wall mean / max |\n|---|---|---|---|---|---|---|"

// checkQuick asserts the targets on rows: a NIC, node, host and
// rail named as such in >= 99%, a healthy fabric blamed in <= 1%.
func checkQuick(t *testing.T, rows []quickRow, maxWall time.Duration) {
	t.Helper()
	for _, r := range rows {
		pct := func(k int) float64 { return 100 * float64(k) / float64(r.meshes) }
		switch r.shape {
		case qsHealthy:
			if pct(r.blamed) > 1 {
				t.Errorf("%s: blamed something in %.1f%% of meshes, more than 1%%", r.shape, pct(r.blamed))
			}
		case qsPath:
		default:
			if pct(r.named) < 99 {
				t.Errorf("%s: named as such in %.1f%% of meshes, fewer than 99%%", r.shape, pct(r.named))
			}
		}
		if maxWall > 0 && r.maxWall > maxWall {
			t.Errorf("%s: wall time up to %s, more than %s", r.shape, r.maxWall, maxWall)
		}
	}
}

var quickShapes = []quickShape{qsHealthy, qsNIC, qsNode, qsHost, qsRail, qsPath}

// At 1000 ranks (125 hosts × 8 NICs; the node shape 1000 × 1), 200 meshes
// of each shape, 5% jitter, the default options (4 random rounds):
// the targets asserted, and the wall time at most 60 s.
func TestQuickSim1000(t *testing.T) {
	quickSweep1000(t, quickShapes, 0.05)
}

// quickSweep1000 runs each shape at 1000 ranks (125 hosts × 8 NICs) and
// jitter, 200 meshes (40 with -short), logs the table and asserts the
// targets with a wall time of at most 60 s.
func quickSweep1000(t *testing.T, shapes []quickShape, jitter float64) {
	meshes := 200
	if testing.Short() {
		meshes = 40
	}
	var rows []quickRow
	var b strings.Builder
	for _, s := range shapes {
		rows = append(rows, quickRun(s, 125, 8, meshes, jitter, 0))
	}
	fmt.Fprintf(&b, "1000 ranks, %.0f%% jitter:\n%s\n", 100*jitter, quickHeader)
	for _, r := range rows {
		fmt.Fprintln(&b, r)
	}
	t.Log("\n" + b.String())
	checkQuick(t, rows, 60*time.Second)
}

// The noisier end of the model: 10% jitter, 1000 ranks; reported, and the
// healthy and NIC targets asserted.
func TestQuickSim1000Noisy(t *testing.T) {
	quickSweep1000(t, []quickShape{qsHealthy, qsNIC, qsHost, qsRail}, 0.10)
}

// The path fault's power against the random rounds, 1000 ranks.
func TestQuickPathPower(t *testing.T) {
	meshes := 200
	if testing.Short() {
		meshes = 40
	}
	var b strings.Builder
	fmt.Fprintln(&b, "path fault, 1000 ranks, 5% jitter:\n| random rounds | meshes | named (a link through it) | blames something else | rounds mean / max | wall mean |\n|---|---|---|---|---|---|")
	prev := -1.0
	for _, rr := range []int{3, 6, 12, 24} {
		r := quickRun(qsPath, 125, 8, meshes, 0.05, rr)
		pct := func(k int) float64 { return 100 * float64(k) / float64(r.meshes) }
		fmt.Fprintf(&b, "| %d | %d | %.1f%% | %.1f%% | %.1f / %d | %.1fs |\n", rr, meshes, pct(r.named), pct(r.blamed),
			float64(r.rounds)/float64(meshes), r.maxRounds, (r.wall / time.Duration(meshes)).Seconds())
		if pct(r.blamed) > 1 {
			t.Errorf("%d rounds: blamed something else in %.1f%%", rr, pct(r.blamed))
		}
		if pct(r.named) < prev-10 {
			t.Errorf("%d rounds: power %.1f%% fell from %.1f%%", rr, pct(r.named), prev)
		}
		prev = pct(r.named)
	}
	t.Log("\n" + b.String())
}

// At 10 000 ranks (1250 hosts × 8 NICs), RDMABENCH_QUICK_SIM_10K=1 (or a
// count of meshes): each shape and the path's power. One run, 100 meshes
// each, 97 s on one core (docs/mesh.md, "Quick mode"):
//
//	healthy: blamed 0%, 17.8 rounds mean / 21 max, 13.7 s / 16.2 s
//	NIC, node, host, rail at 0.7x: named 100% each, nothing else blamed,
//	  17.7-17.9 rounds mean / 22 max, 13.7-13.8 s / 16.9 s
//	path (1/32 of a leaf uplink's pairs at 0.7x): 83%, 18.4 / 31, 14.1 s
//	path power by random rounds 3, 6, 12, 24: 86%, 93%, 100%, 100%
//	  (16.1, 21.9, 31.4, 49.6 rounds mean; 12.4, 16.8, 24.2, 38.2 s)
func TestQuickSim10k(t *testing.T) {
	v := os.Getenv("RDMABENCH_QUICK_SIM_10K")
	if v == "" {
		t.Skip("RDMABENCH_QUICK_SIM_10K=1 runs it")
	}
	meshes := 100
	if k := 0; v != "1" {
		if _, err := fmt.Sscan(v, &k); err != nil || k < 1 {
			t.Fatalf("RDMABENCH_QUICK_SIM_10K=%q: 1 or a count of meshes", v)
		}
		meshes = k
	}
	var rows []quickRow
	var b strings.Builder
	for _, s := range quickShapes {
		rows = append(rows, quickRun(s, 1250, 8, meshes, 0.05, 0))
	}
	fmt.Fprintln(&b, "10 000 ranks, 5% jitter:\n"+quickHeader)
	for _, r := range rows {
		fmt.Fprintln(&b, r)
	}
	fmt.Fprintln(&b, "path fault power:")
	for _, rr := range []int{3, 6, 12, 24} {
		r := quickRun(qsPath, 1250, 8, meshes, 0.05, rr)
		fmt.Fprintf(&b, "| %d | %d | %.1f%% | %.1f%% | %.1f / %d | %.1fs |\n", rr, meshes, 100*float64(r.named)/float64(meshes), 100*float64(r.blamed)/float64(meshes),
			float64(r.rounds)/float64(meshes), r.maxRounds, (r.wall / time.Duration(meshes)).Seconds())
	}
	t.Log("\n" + b.String())
	checkQuick(t, rows, 0)
}
