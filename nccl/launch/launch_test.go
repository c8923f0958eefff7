package launch

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDetect(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Env
		err  bool
	}{
		{"alone", nil, Env{Rank: 0, Size: 1, Source: "single process"}, false},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, Env{3, 8, 1, "Open MPI"}, false},
		{"torchrun", map[string]string{"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "5"}, Env{5, 16, 5, "torchrun"}, false},
		{"slurm srun", map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0"}, Env{2, 4, 0, "Slurm"}, false},
		{"slurm step tasks", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "3"}, Env{1, 2, 1, "Slurm"}, false},
		{"slurm batch script is alone", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, Env{0, 1, 0, "single process"}, false},
		{"pmi", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, Env{1, 2, 1, "PMI"}, false},
		{"pmi no local", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2"}, Env{1, 2, 0, "PMI"}, false},
		{"openmpi wins over slurm", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}, Env{1, 2, 0, "Open MPI"}, false},
		{"bad number", map[string]string{"RANK": "x", "WORLD_SIZE": "2"}, Env{}, true},
		{"rank out of range", map[string]string{"RANK": "2", "WORLD_SIZE": "2"}, Env{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(envOf(tc.env))
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if !tc.err && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRendezvousAddr(t *testing.T) {
	tests := []struct {
		flag string
		env  map[string]string
		want string
		err  bool
	}{
		{"10.0.0.1:5000", map[string]string{"MASTER_ADDR": "x", "MASTER_PORT": "1"}, "10.0.0.1:5000", false},
		{"", map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "29400"}, "node1:29400", false},
		{"", map[string]string{"MASTER_ADDR": "node1"}, "node1:29500", false},
		{"", map[string]string{"MASTER_ADDR": "node1", "MASTER_PORT": "29400", "TORCHELASTIC_RUN_ID": "x"}, "node1:29401", false},
		{"", nil, "", true},
		{"nohostport", nil, "", true},
	}
	for _, tc := range tests {
		got, err := RendezvousAddr(tc.flag, envOf(tc.env))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("RendezvousAddr(%q, %v) = %q, %v", tc.flag, tc.env, got, err)
		}
	}
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func joinAll(t *testing.T, n int, timeout time.Duration) []*Group {
	addr := freeAddr(t)
	groups := make([]*Group, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			groups[r], errs[r] = Join(Config{Addr: addr, Rank: r, Size: n, Timeout: timeout,
				Hello:  Hello{Host: fmt.Sprintf("h%d", r), Payload: []byte(fmt.Sprintf(`{"r":%d}`, r))},
				MakeID: func() ([]byte, error) { return []byte("the-id"), nil }})
		}(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return groups
}

func TestGroupReduceAndClose(t *testing.T) {
	const n = 4
	gs := joinAll(t, n, 5*time.Second)
	for r, g := range gs {
		if string(g.ID) != "the-id" || len(g.Hellos) != n || g.Hellos[2].Host != "h2" || string(g.Hellos[3].Payload) != `{"r":3}` {
			t.Errorf("rank %d: id %q hellos %+v", r, g.ID, g.Hellos)
		}
	}
	for _, op := range []string{"sum", "min", "max"} {
		res := make([][]float64, n)
		var wg sync.WaitGroup
		for r := range gs {
			wg.Add(1)
			go func(r int) {
				defer wg.Done()
				var err error
				res[r], err = gs[r].Reduce([]float64{float64(r + 1), 10}, op)
				if err != nil {
					t.Error(err)
				}
			}(r)
		}
		wg.Wait()
		want := map[string]float64{"sum": 10, "min": 1, "max": 4}[op]
		for r := range res {
			if len(res[r]) != 2 || res[r][0] != want {
				t.Errorf("%s rank %d: %v, want %v", op, r, res[r], want)
			}
		}
	}
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Add(1)
		go func(g *Group) {
			defer wg.Done()
			if err := g.Close(); err != nil {
				t.Error(err)
			}
		}(g)
	}
	wg.Wait()
	for r, g := range gs {
		if g.Err() != nil {
			t.Errorf("rank %d lost after a clean close: %v", r, g.Err())
		}
	}
}

// A process that disappears is reported to everyone, promptly.
func TestGroupPeerLost(t *testing.T) {
	gs := joinAll(t, 3, 5*time.Second)
	gs[2].peers[0].c.Close() // rank 2 "dies"
	for _, r := range []int{0, 1} {
		select {
		case <-gs[r].Lost():
		case <-time.After(3 * time.Second):
			t.Fatalf("rank %d did not notice", r)
		}
		var pl *PeerLost
		if err := gs[r].Err(); !errors.As(err, &pl) || !strings.Contains(err.Error(), "rank 2") {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// A reduce after the loss fails instead of waiting.
	if _, err := gs[1].Reduce([]float64{1}, "sum"); err == nil {
		t.Error("reduce succeeded with a dead peer")
	}
}

func TestJoinTimeout(t *testing.T) {
	addr := freeAddr(t)
	start := time.Now()
	_, err := Join(Config{Addr: addr, Rank: 0, Size: 2, Timeout: 300 * time.Millisecond, MakeID: func() ([]byte, error) { return nil, nil }})
	if err == nil || !strings.Contains(err.Error(), "[1]") {
		t.Errorf("rank 0 alone: %v", err)
	}
	_, err = Join(Config{Addr: freeAddr(t), Rank: 1, Size: 2, Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 0") {
		t.Errorf("rank 1 alone: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("timeouts took %v", d)
	}
}
