package mesh

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/results"
)

// quickRunner is a Runner for the quick search: 100 Gb/s a direction but
// for slow ranks and directions; ranks that die when a round starts;
// ranks whose RDMA fails; each direction answers late (up to 20 ms, so
// that outcomes come back out of order) and waits for its reverse to
// have started, up to a second: both directions of a pair must run at
// once, or the direction fails.
type quickRunner struct {
	slow     map[int]float64
	oneWay   map[Direction]float64
	failNode map[int]bool
	dieAt    map[int]int

	mu      sync.Mutex
	dead    map[int]string
	started map[Direction]chan struct{}
	tasks   []Task
	calls   map[int]int // tasks by round
}

func (f *quickRunner) Dead(r int) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	why, ok := f.dead[r]
	return why, ok
}

// start marks d begun and returns the channel of its reverse.
func (f *quickRunner) start(client int, t Task) (chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead == nil {
		f.dead, f.started, f.calls = map[int]string{}, map[Direction]chan struct{}{}, map[int]int{}
	}
	f.tasks = append(f.tasks, t)
	f.calls[t.Round]++
	if at, ok := f.dieAt[client]; ok && t.Round >= at {
		f.dead[client] = "killed"
	}
	if _, gone := f.dead[client]; gone {
		return nil, errors.New("killed")
	}
	ch := func(d Direction) chan struct{} {
		c, ok := f.started[d]
		if !ok {
			c = make(chan struct{})
			f.started[d] = c
		}
		return c
	}
	close(ch(Direction{From: client, To: t.Server}))
	return ch(Direction{From: t.Server, To: client}), nil
}

func (f *quickRunner) Measure(ctx context.Context, client int, t Task) (Outcome, error) {
	rev, err := f.start(client, t)
	if err != nil {
		return Outcome{}, err
	}
	defer func() {
		f.mu.Lock()
		delete(f.started, Direction{From: client, To: t.Server})
		f.mu.Unlock()
	}()
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	if _, gone := f.Dead(t.Server); gone {
		return Outcome{Error: "server closed the control connection"}, nil
	}
	select {
	case <-rev:
	case <-ctx.Done():
		return Outcome{Error: "stopped"}, nil
	case <-time.After(time.Second):
		return Outcome{Error: fmt.Sprintf("%d->%d ran alone: the reverse never started", client, t.Server)}, nil
	}
	if f.failNode[client] || f.failNode[t.Server] {
		return Outcome{Error: "write-bw: transport retry counter exceeded (status 12)"}, nil
	}
	bw := 100.0 * (1 + 0.002*float64((client*7+t.Server*3)%5))
	for _, r := range []int{client, t.Server} {
		if k, ok := f.slow[r]; ok {
			bw *= k
		}
	}
	if k, ok := f.oneWay[Direction{From: client, To: t.Server}]; ok {
		bw *= k
	}
	return Outcome{BWGbps: bw}, nil
}

// quickMesh is a mesh of hosts × nics ranks, rank r on node<r/nics> with
// mlx5_<r%nics>.
func quickMesh(hosts, nics int) *results.Mesh {
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshQuickSchema}
	for r := range hosts * nics {
		m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: fmt.Sprintf("node%d", r/nics), Device: fmt.Sprintf("mlx5_%d", r%nics), Port: 1})
	}
	return m
}

func runQuickOn(f *quickRunner, m *results.Mesh) {
	c := &Coordinator{Runner: f, Mesh: m, Addrs: make([]string, len(m.Ranks)), Opts: Options{Grace: 50 * time.Millisecond}}
	c.RunQuick(context.Background(), QuickOptions{Seed: 3})
}

// Each round's tasks are write-bw alone, numbered rounds (not retests),
// both directions of each pair at once (quickRunner fails a direction that
// ran alone); the figures land on their own direction however late.
func TestQuickRunMeasures(t *testing.T) {
	f := &quickRunner{oneWay: map[Direction]float64{{From: 6, To: 10}: 0.99, {From: 10, To: 6}: 0.98}}
	m := quickMesh(4, 4)
	c := &Coordinator{Runner: f, Mesh: m, Addrs: make([]string, 16)}
	qm := quickMeasurer{c: c, ctx: context.Background(), ranks: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
	res := qm.MeasureRound(1, []Pair{{6, 10}, {0, 4}, {1, 13}, {2, 14}})
	for _, r := range res {
		if r.Failed || r.AB == 0 || r.BA == 0 {
			t.Fatalf("%+v: failed (both directions not at once?)", r)
		}
	}
	// 6->10 at 0.99, 10->6 at 0.98 of about 100.
	if r := res[0]; r.Pair != (Pair{6, 10}) || r.AB < 99 || r.AB >= 100 || r.BA < 98 || r.BA >= 99 {
		t.Errorf("6-10: %+v, want AB 99.x, BA 98.x", r)
	}
	for _, tk := range f.tasks {
		if tk.Part != BWPart || tk.Round != 1 {
			t.Errorf("task %+v: want write-bw alone in round 1", tk)
		}
	}
	if len(m.Pairs) != 8 {
		t.Errorf("%d directions in the document, want 8", len(m.Pairs))
	}
}

func TestQuickRunVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		f     *quickRunner
		kind  QuickKind
		ranks []int
		dead  int // a rank that must be reported dead (-1: none)
	}{
		{name: "healthy", f: &quickRunner{}, dead: -1},
		{name: "a NIC at 0.7x", f: &quickRunner{slow: map[int]float64{11: 0.7}}, kind: QuickNIC, ranks: []int{11}, dead: -1},
		{name: "a NIC whose RDMA fails", f: &quickRunner{failNode: map[int]bool{6: true}}, kind: QuickNIC, ranks: []int{6}, dead: -1},
		{name: "a rank dies in round 2", f: &quickRunner{dieAt: map[int]int{9: 2}}, kind: QuickNIC, ranks: []int{9}, dead: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := quickMesh(4, 4)
			done := make(chan struct{})
			go func() { runQuickOn(tc.f, m); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("the search did not end in a minute")
			}
			q := m.Quick
			if q.Fraction != DefaultQuickOptions.Fraction {
				t.Errorf("the document's threshold %v, want the search's %v", q.Fraction, DefaultQuickOptions.Fraction)
			}
			var got []string
			for _, s := range q.Suspects {
				got = append(got, s.Text)
			}
			switch {
			case tc.kind == "" && (q.Blames() || m.Error != ""):
				t.Errorf("healthy: blamed %q, unresolved %v %v, error %q", got, q.UnresolvedRanks, q.UnresolvedPairs, m.Error)
			case tc.kind != "" && (len(q.Suspects) != 1 || string(q.Suspects[0].Kind) != string(tc.kind) || fmt.Sprint(q.Suspects[0].Ranks) != fmt.Sprint(tc.ranks)):
				t.Errorf("want %s %v, got %q (unresolved %v)", tc.kind, tc.ranks, got, q.UnresolvedRanks)
			}
			if tc.dead >= 0 && (m.Ranks[tc.dead].Dead == "" || m.Ranks[tc.dead].DeadRound != 2) {
				t.Errorf("rank %d: dead %q in round %d, want killed in round 2", tc.dead, m.Ranks[tc.dead].Dead, m.Ranks[tc.dead].DeadRound)
			}
			if tc.dead >= 0 && len(got) > 0 && !strings.Contains(got[0], "left the mesh in round 2") {
				t.Errorf("the rank that left, named without saying so: %q", got[0])
			}
			if q.Rounds < 4 || m.Rounds != q.Rounds || q.Rounds > 36 {
				t.Errorf("%d rounds (document %d)", q.Rounds, m.Rounds)
			}
			for _, p := range m.Pairs {
				if p.Error != "" && tc.kind == "" {
					t.Errorf("%d->%d failed: %s", p.From, p.To, p.Error)
				}
			}
			t.Logf("%s: %d rounds, %q", tc.name, q.Rounds, got)
		})
	}
}

// A rank dead before the first round is left out of the search: not
// blamed, reported dead; its index is not another rank's.
func TestQuickRunDeadBefore(t *testing.T) {
	m := quickMesh(4, 4)
	m.Ranks[5].Dead = "no RDMA device on this host"
	f := &quickRunner{slow: map[int]float64{14: 0.7}}
	runQuickOn(f, m)
	q := m.Quick
	if len(q.Suspects) != 1 || q.Suspects[0].Ranks[0] != 14 || q.Suspects[0].Host != "node3" {
		t.Errorf("want the NIC of rank 14 (node3), got %+v", q.Suspects)
	}
	for _, tk := range f.tasks {
		if tk.Server == 5 {
			t.Errorf("task towards rank 5, dead before the mesh: %+v", tk)
		}
	}
}

// The search over the real rendezvous (launch.Join over loopback), the
// Leader's Session in quick mode and Work on every other rank: tasks
// numbered (Seq), outcomes late and out of order, a rank that leaves mid-
// mesh. The others finish; a slow NIC is still named.
func TestQuickOverRendezvous(t *testing.T) {
	const hosts, nics = 4, 4
	n := hosts * nics
	groups := joinRanks(t, testport.Addr(t), n, 10*time.Second, "test-mesh-quick/1", func(r int) launch.Hello {
		return launch.Hello{Host: fmt.Sprintf("node%d", r/nics), Pid: r, Key: "mesh"}
	})
	facts := quickMesh(hosts, nics).Ranks
	const victim, slow = 6, 13
	measure := func(r int) func(context.Context, Task) Outcome {
		tasks := 0
		return func(ctx context.Context, tk Task) Outcome {
			tasks++
			if r == victim && tasks == 3 {
				groups[victim].Close()
			}
			time.Sleep(time.Duration(rand.IntN(30)) * time.Millisecond)
			bw := 100.0 * (1 + 0.002*float64((r*7+tk.Server*3)%5))
			if r == slow || tk.Server == slow {
				bw *= 0.7
			}
			return Outcome{BWGbps: bw}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := 1; r < n; r++ {
		wg.Go(func() {
			errs[r] = Work(context.Background(), groups[r], Info{Rank: facts[r], ServerPort: 18000 + r}, 10*time.Second, measure(r))
			if errs[r] == nil {
				errs[r] = groups[r].Close()
			}
		})
	}
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshQuickSchema}
	ld := &Leader{Link: groups[0], Size: n, Self: Info{Rank: facts[0], ServerPort: 18000}, Addr0: "127.0.0.1",
		Peer:     func(r int) (string, string) { return groups[0].PeerAddr(r), groups[0].Hellos[r].Host },
		GatherBy: time.Now().Add(10 * time.Second), Local: measure(0), DirectionBound: 5 * time.Second,
		Opts: Options{Grace: 200 * time.Millisecond}}
	s := &Session{Doc: m, Leader: ld, Costs: Costs{DirectionBound: 5 * time.Second}, Quick: &QuickOptions{Seed: 5}}
	s.Run(context.Background())
	go groups[0].Close()
	wg.Wait()
	for r, err := range errs {
		if r != 0 && r != victim && err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	if m.Ranks[victim].Dead == "" {
		t.Errorf("rank %d left, not reported", victim)
	}
	named := map[int]bool{}
	for _, sp := range m.Quick.Suspects {
		for _, r := range sp.Ranks {
			named[r] = true
		}
		if sp.Kind == results.QuickNIC && sp.Ranks[0] == slow && !strings.Contains(sp.Text, "node3") {
			t.Errorf("rank %d named off its host: %s", slow, sp.Text)
		}
	}
	if !named[slow] || len(named) > 2 || len(named) == 2 && !named[victim] {
		t.Errorf("named %v, want rank %d (and the rank that left, %d, at most): %+v", named, slow, victim, m.Quick.Suspects)
	}
	for _, p := range m.Pairs {
		if p.Error != "" && p.From != victim && p.To != victim {
			t.Errorf("%d->%d failed: %s", p.From, p.To, p.Error)
		}
	}
	t.Logf("%d rounds, %.1fs, suspects %+v", m.Quick.Rounds, m.ElapsedS, m.Quick.Suspects)
}
