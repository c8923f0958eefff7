package mesh

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/results"
)

// fabricModel drives the harness's fake link measurement: per-node and
// per-link bandwidth factors, one slow direction, failures, a flapping
// link and a stuck server, with jitter drawn per direction and attempt.
type fabricModel struct {
	n        int
	seed     uint64
	jitter   float64
	slowNode map[int]float64
	slowLink map[Pair]float64
	oneWay   map[Direction]float64
	failNode map[int]bool
	flap     map[Pair]bool // slow (0.5) in about half its measurements
	stuck    map[int]bool  // its server never accepts: the client's engine gives up
	stuckFor time.Duration // how long the client's engine waits for a stuck server
	// screenJitter is the jitter of the rounds' measurements when the mesh
	// screens (--screen): an eighth of the duration, √8 times the noise.
	screenJitter float64
}

func (f *fabricModel) measure(ctx context.Context, client int, t Task) Outcome {
	attempt := uint64(1)
	if t.Round == 0 {
		attempt = 2
	}
	rng := rand.New(rand.NewPCG(f.seed, (uint64(client*f.n+t.Server)<<2)|attempt))
	switch {
	case f.stuck[t.Server]:
		select {
		case <-ctx.Done():
			return Outcome{Error: "write-bw: " + context.Cause(ctx).Error()}
		case <-time.After(f.stuckFor):
			return Outcome{Error: fmt.Sprintf("write-bw to rank %d: server refused the plan: no answer within %v", t.Server, f.stuckFor)}
		}
	case f.failNode[client] || f.failNode[t.Server]:
		return Outcome{Error: "write-bw: transport retry counter exceeded (status 12)"}
	}
	bw := 100.0
	for _, r := range []int{client, t.Server} {
		if k, ok := f.slowNode[r]; ok {
			bw = min(bw, 100*k)
		}
	}
	p := pairOf(client, t.Server)
	if k, ok := f.slowLink[p]; ok {
		bw *= k
	}
	if k, ok := f.oneWay[Direction{From: client, To: t.Server}]; ok {
		bw *= k
	}
	if f.flap[p] && rng.IntN(2) == 0 {
		bw *= 0.5
	}
	jitter := f.jitter
	if t.Round != 0 && f.screenJitter > 0 {
		// Beside its reverse, a direction gets 0.55 of what it gets
		// alone (CPU- or PCIe-bound, as on rxe).
		jitter, bw = f.screenJitter, bw*0.55
	}
	bw *= math.Exp(jitter * rng.NormFloat64())
	lat := 3 * math.Exp(jitter*rng.NormFloat64())
	return Outcome{BWGbps: bw, LatP50us: lat, LatP99us: 2 * lat}
}

// harnessResult is what one simulated mesh cost.
type harnessResult struct {
	mesh      *results.Mesh
	run       time.Duration // the rounds and the retests, measurement free
	join      time.Duration // the rendezvous and the infos
	heapBytes uint64        // heap in use after the mesh, all ranks in this process
	jsonBytes int
}

// joinRanks joins n in-process ranks at addr over a real rendezvous, as a
// mesh's ranks join (KeepGoing), rank r saying hello(r) (nil: nothing),
// and fails the test if any cannot.
func joinRanks(t *testing.T, addr string, n int, timeout time.Duration, proto string, hello func(r int) launch.Hello) []*launch.Group {
	t.Helper()
	groups := make([]*launch.Group, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := launch.Config{Addr: addr, Rank: r, Size: n, Timeout: timeout, KeepGoing: true, Proto: proto}
		if hello != nil {
			cfg.Hello = hello(r)
		}
		wg.Go(func() { groups[r], errs[r] = launch.Join(cfg) })
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return groups
}

// harness runs the real rendezvous (launch.Join over loopback), the
// Session and its Leader on rank 0 (GatherInfo, the schedule, Start, the
// Coordinator over a LinkRunner, Finish) and Work on every other rank, with n in-process ranks and f's
// fake measurement.
// Under screen the rounds run both directions of a pair at once, the
// retests alone (Options.BothAtOnce, as rdmabench mesh --screen).
func harness(t *testing.T, n int, f *fabricModel, screen bool) harnessResult {
	addr := testport.Addr(t)
	runtime.GC()
	t0 := time.Now()
	groups := joinRanks(t, addr, n, 2*time.Minute, "test-mesh/2", func(r int) launch.Hello {
		return launch.Hello{Host: fmt.Sprintf("node%d", r), Pid: r, Key: "mesh"}
	})
	// Each rank's facts as a real rank sends them (newMesh's), its engine
	// server's port its own.
	facts := newMesh(n).Ranks
	var workers sync.WaitGroup
	for r := 1; r < n; r++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			info := Info{Rank: facts[r], ServerPort: 18000 + r}
			if err := Work(context.Background(), groups[r], info, time.Minute, func(ctx context.Context, tk Task) Outcome { return f.measure(ctx, r, tk) }); err == nil {
				groups[r].Close()
			}
		}()
	}
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema}
	var join, run time.Duration
	ld := &Leader{Link: groups[0], Size: n, Self: Info{Rank: facts[0], ServerPort: 18000}, Addr0: "127.0.0.1",
		Peer:           func(r int) (string, string) { return groups[0].PeerAddr(r), groups[0].Hellos[r].Host },
		GatherBy:       time.Now().Add(time.Minute),
		Local:          func(ctx context.Context, tk Task) Outcome { return f.measure(ctx, 0, tk) },
		DirectionBound: 2 * time.Minute,
		Opts:           Options{Rules: DefaultRules, MaxRetests: 64, Grace: 200 * time.Millisecond, BothAtOnce: screen, Controls: controlsIf(screen)},
		Gathered:       func(*results.Mesh) { join = time.Since(t0) },
	}
	// Rank 0's session as the command runs it: the schedule made once the
	// ranks are in (a host each here: the tournament).
	s := &Session{Doc: m, Leader: ld, Costs: Costs{Direction: time.Millisecond, DirectionBound: 2 * time.Minute, MaxRetests: 64, Screen: screen}}
	s.Run(context.Background())
	if len(ld.Rounds) != len(Tournament(n)) {
		t.Fatalf("%d rounds, want the tournament's %d", len(ld.Rounds), len(Tournament(n)))
	}
	run = time.Since(t0) - join
	// The document's ranks are what the ranks said, where they were.
	for r, rk := range m.Ranks {
		want := facts[r]
		want.Addr = "127.0.0.1"
		if rk != want {
			t.Fatalf("rank %d in the document: %+v, want %+v", r, rk, want)
		}
	}
	closed := make(chan struct{})
	go func() { groups[0].Close(); close(closed) }()
	workers.Wait()
	<-closed
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return harnessResult{mesh: m, run: run, join: join, heapBytes: ms.HeapInuse, jsonBytes: len(b) + 1}
}

// controlsIf is rdmabench mesh --screen's controls.
func controlsIf(screen bool) int {
	if screen {
		return 8
	}
	return 0
}

// fault is one injected fault and the verdict that localizes it.
type fault struct {
	name     string
	set      func(f *fabricModel, n int)
	culprits []int
	links    []results.SuspectLink
	// either: no verdict at all is right too (a flapping link the retest
	// caught good), and so is the link one way.
	either bool
}

var faults = []fault{
	{name: "healthy", set: func(*fabricModel, int) {}},
	{name: "one bad link", set: func(f *fabricModel, n int) { f.slowLink = map[Pair]float64{{1, n - 2}: 0.5} },
		links: func() []results.SuspectLink { return nil }()},
	{name: "two bad links sharing a node", set: func(f *fabricModel, n int) { f.slowLink = map[Pair]float64{{2, 5}: 0.5, {2, n - 1}: 0.6} }},
	{name: "one slow node", set: func(f *fabricModel, n int) { f.slowNode = map[int]float64{n / 2: 0.7} }},
	{name: "a node failing every pair", set: func(f *fabricModel, n int) { f.failNode = map[int]bool{3: true} }},
	{name: "one slow direction", set: func(f *fabricModel, n int) { f.oneWay = map[Direction]float64{{From: 6, To: 1}: 0.5} }},
	{name: "a flapping link", set: func(f *fabricModel, n int) { f.flap = map[Pair]bool{{0, 7}: true} }, either: true},
	{name: "a stuck server", set: func(f *fabricModel, n int) { f.stuck = map[int]bool{n - 3: true} }},
}

// want fills in the verdict of each fault for a mesh of n.
func (fl fault) want(n int) ([]int, []results.SuspectLink) {
	switch fl.name {
	case "one bad link":
		return nil, []results.SuspectLink{{A: 1, B: n - 2}}
	case "two bad links sharing a node":
		return nil, []results.SuspectLink{{A: 2, B: 5}, {A: 2, B: n - 1}}
	case "one slow node":
		return []int{n / 2}, nil
	case "a node failing every pair":
		return []int{3}, nil
	case "one slow direction":
		return nil, []results.SuspectLink{{A: 6, B: 1, OneWay: true}}
	case "a flapping link":
		return nil, []results.SuspectLink{{A: 0, B: 7}}
	case "a stuck server":
		return []int{n - 3}, nil
	}
	return nil, nil
}

// The real coordinator, rendezvous, schedule and analysis with in-process
// ranks over loopback: every fault localized, nothing healthy blamed, no
// healthy rank dropped, measuring each direction in full and screening
// (the rounds short and noisier, both directions at once, the outliers
// retested at full length). RDMABENCH_MESH_SIM="16,128,1000" sets the
// sizes (default 16) and prints the cost table.
func TestHarness(t *testing.T) {
	sizes := []int{16}
	if v := os.Getenv("RDMABENCH_MESH_SIM"); v != "" {
		sizes = nil
		for _, s := range strings.Split(v, ",") {
			k, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || k < 10 || k > 2000 {
				t.Fatalf("RDMABENCH_MESH_SIM=%q: sizes of 10 to 2000", v)
			}
			sizes = append(sizes, k)
		}
	}
	for _, n := range sizes {
		for _, screen := range []bool{false, true} {
			for _, fl := range faults {
				if n > 128 && fl.name != "one slow node" {
					continue // beyond 128, the cost at one (a mesh of 1000 is minutes here)
				}
				harnessCase(t, n, fl, screen)
			}
		}
	}
}

func harnessCase(t *testing.T, n int, fl fault, screen bool) {
	f := &fabricModel{n: n, seed: uint64(n), jitter: 0.03, stuckFor: 300 * time.Millisecond}
	mode := "full"
	if screen {
		f.screenJitter, mode = 0.03*math.Sqrt(8), "screen"
	}
	fl.set(f, n)
	r := harness(t, n, f, screen)
	m := r.mesh
	var culprits []int
	for _, c := range m.Culprits {
		culprits = append(culprits, c.Rank)
	}
	wantC, wantL := fl.want(n)
	ok := reflect.DeepEqual(culprits, wantC) && reflect.DeepEqual(m.Links, wantL)
	if fl.either && len(culprits) == 0 && (len(m.Links) == 0 || len(m.Links) == 1 && pairOf(m.Links[0].A, m.Links[0].B) == pairOf(wantL[0].A, wantL[0].B)) {
		ok = true // nothing, or the link either way
	}
	var dead []int
	for _, rk := range m.Ranks {
		if rk.Dead != "" {
			dead = append(dead, rk.Rank)
		}
	}
	sort.Ints(dead)
	if len(dead) > 0 {
		t.Logf("rank %d left: %s", dead[0], m.Ranks[dead[0]].Dead)
	}
	rounds := len(Tournament(n))
	t.Logf("N=%-4d %-6s %-29s localized %-5v culprits %v links %v dead %v inconclusive %d | rendezvous %v, rounds+retests %v (%.1f ms a round in coordination), heap %.1f MiB, JSON %.1f MiB",
		n, mode, fl.name, ok, culprits, m.Links, dead, len(m.Inconclusive), r.join.Round(time.Millisecond), r.run.Round(time.Millisecond),
		float64(r.run.Microseconds())/1000/float64(rounds), float64(r.heapBytes)/(1<<20), float64(r.jsonBytes)/(1<<20))
	if !ok {
		t.Errorf("N=%d %s %s: culprits %v links %+v, want %v %+v", n, mode, fl.name, culprits, m.Links, wantC, wantL)
	}
	if len(dead) > 0 {
		t.Errorf("N=%d %s %s: ranks %v dropped", n, mode, fl.name, dead)
	}
}
