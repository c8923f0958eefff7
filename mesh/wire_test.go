package mesh

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/results"
)

// The whole protocol over a real rendezvous on this host: infos, tasks,
// outcomes, a rank that dies mid-mesh and one that sends nonsense.
func TestOverRendezvous(t *testing.T) {
	addr := testport.Addr(t)
	const n = 5
	groups := joinRanks(t, addr, n, 5*time.Second, "test-mesh/1", func(r int) launch.Hello {
		return launch.Hello{Host: "h", Pid: r, Key: "mesh"}
	})
	// Rank r's figures: 100 + r Gb/s towards anyone; rank 4 dies on its
	// second task.
	measure := func(r int) func(context.Context, Task) Outcome {
		tasks := 0
		return func(_ context.Context, tk Task) Outcome {
			tasks++
			if r == 4 && tasks == 2 {
				groups[4].Close() // not a clean close: rank 0 is not waiting for bye
				time.Sleep(100 * time.Millisecond)
			}
			return Outcome{BWGbps: float64(100 + r), LatP50us: 3, LatP99us: 4}
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 1; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info := Info{Rank: results.MeshRank{Device: "rxe0", Host: fmt.Sprintf("h%d", r)}, ServerPort: 18000 + r}
			errs[r] = Work(context.Background(), groups[r], info, 5*time.Second, measure(r))
			if errs[r] == nil { // rank 0 waits for the others' goodbyes
				errs[r] = groups[r].Close()
			}
		}()
	}
	infos := GatherInfo(context.Background(), groups[0], n, time.Now().Add(5*time.Second))
	m := newMesh(n)
	addrs := make([]string, n)
	for r := 1; r < n; r++ {
		if infos[r].Error != "" || infos[r].ServerPort != 18000+r || infos[r].Rank.Host != fmt.Sprintf("h%d", r) {
			t.Fatalf("rank %d info %+v", r, infos[r])
		}
		addrs[r] = net.JoinHostPort(groups[0].PeerAddr(r), fmt.Sprint(infos[r].ServerPort))
	}
	if addrs[3] != "127.0.0.1:18003" {
		t.Errorf("rank 3 at %s", addrs[3])
	}
	Start(groups[0], n, time.Minute, "")
	c := &Coordinator{Runner: &LinkRunner{Link: groups[0], Local: measure(0), Bound: 5 * time.Second}, Mesh: m, Rounds: Tournament(n), Addrs: addrs,
		Opts: Options{Rules: DefaultRules, MaxRetests: 10, Grace: time.Second}}
	c.Run(context.Background())
	Finish(groups[0], n)
	closed := make(chan error, 1)
	go func() { closed <- groups[0].Close() }()
	wg.Wait()
	if err := <-closed; err != nil {
		t.Errorf("rank 0 close: %v", err)
	}
	for r := 1; r < 4; r++ {
		if errs[r] != nil {
			t.Errorf("rank %d: %v", r, errs[r])
		}
	}
	if errs[4] == nil {
		t.Error("rank 4 died but its Work returned nil")
	}
	if m.Ranks[4].Dead == "" {
		t.Error("rank 4's death not reported")
	}
	measured := 0
	for _, p := range m.Pairs {
		if p.Measured() {
			measured++
			if want := float64(100 + p.From); p.BWGbps != want {
				t.Errorf("%d→%d: %v Gb/s, want %v", p.From, p.To, p.BWGbps, want)
			}
		} else if p.From != 4 && p.To != 4 {
			t.Errorf("%d→%d failed: %s", p.From, p.To, p.Error)
		} else if !strings.Contains(p.Error, "rank 4 left the mesh") {
			t.Errorf("%d→%d: %q", p.From, p.To, p.Error)
		}
	}
	if measured < 12 { // the 12 directions among ranks 0-3
		t.Errorf("%d directions measured", measured)
	}
}
