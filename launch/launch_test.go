package launch

import (
	"errors"
	"fmt"
	"github.com/rdmabench/rdmabench/internal/testport"
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
		{"alone", nil, Env{Rank: 0, Size: 1, Source: "single process", LocalKnown: true, Launcher: Alone}, false},
		{"openmpi", map[string]string{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, Env{3, 8, 1, "Open MPI", true, OpenMPI}, false},
		{"torchrun", map[string]string{"RANK": "5", "WORLD_SIZE": "16", "LOCAL_RANK": "5"}, Env{5, 16, 5, "torchrun", true, Torchrun}, false},
		{"slurm srun", map[string]string{"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_STEP_ID": "0"}, Env{2, 4, 0, "Slurm", true, Slurm}, false},
		{"slurm step tasks", map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": "1", "SLURM_STEP_ID": "3"}, Env{1, 2, 1, "Slurm", true, Slurm}, false},
		{"slurm batch script is alone", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "4"}, Env{0, 1, 0, "single process", true, Alone}, false},
		{"pmi", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2", "MPI_LOCALRANKID": "1"}, Env{1, 2, 1, "PMI", true, PMI}, false},
		{"pmi no local", map[string]string{"PMI_RANK": "1", "PMI_SIZE": "2"}, Env{1, 2, 0, "PMI", false, PMI}, false},
		{"openmpi wins over slurm", map[string]string{"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0"}, Env{1, 2, 0, "Open MPI", false, OpenMPI}, false},
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

// cfgs makes the configs of an n-process job meeting at addr; process r
// runs on host h(r%hosts).
func cfgs(addr string, n, hosts int, timeout time.Duration) []Config {
	out := make([]Config, n)
	for r := range out {
		out[r] = Config{Addr: addr, Rank: r, Size: n, Timeout: timeout,
			Hello:  Hello{Host: fmt.Sprintf("h%d", r%hosts), Pid: 1000 + r, Key: "all_reduce -b 8"},
			MakeID: func() ([]byte, error) { return []byte("the-id"), nil }}
	}
	return out
}

// concurrently runs f(0..n-1) at once, as the processes of a job would.
func concurrently(n int, f func(r int)) {
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(r)
		}()
	}
	wg.Wait()
}

// joinCfgs joins every config concurrently and returns groups and errors.
func joinCfgs(cs []Config) ([]*Group, []error) {
	groups := make([]*Group, len(cs))
	errs := make([]error, len(cs))
	concurrently(len(cs), func(r int) { groups[r], errs[r] = Join(cs[r]) })
	return groups, errs
}

func joinAll(t *testing.T, n int, timeout time.Duration) []*Group {
	t.Helper()
	groups, errs := joinCfgs(cfgs(testport.Addr(t), n, 2, timeout))
	exitAll(t, groups)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return groups
}

// exitAll ends the groups' processes at the test's end as their exit
// would: every connection closes, and with it every reader. A test that
// stops before Close (a process lost, a verdict) leaves them running else.
func exitAll(t *testing.T, gs []*Group) {
	t.Cleanup(func() {
		for _, g := range gs {
			if g == nil {
				continue
			}
			for _, p := range g.peers {
				if p != nil {
					p.c.Close()
				}
			}
		}
	})
}

func TestGroupReduceAndClose(t *testing.T) {
	const n = 4
	gs := joinAll(t, n, 5*time.Second)
	// Rank 0 has every hello; each rank its id and its place on its host
	// (hosts h0, h1 alternate).
	if h := gs[0].Hellos; len(h) != n || h[3].Host != "h1" || h[3].Pid != 1003 || h[2].Size != n {
		t.Errorf("rank 0 hellos %+v", h)
	}
	for r, g := range gs {
		if string(g.ID) != "the-id" || g.LocalIndex != r/2 || g.LocalCount != 2 || (r > 0 && g.Hellos != nil) {
			t.Errorf("rank %d: id %q local %d/%d hellos %v", r, g.ID, g.LocalIndex, g.LocalCount, g.Hellos)
		}
	}
	// Gather: rank 0 gets every payload.
	got := make([][][]byte, n)
	concurrently(n, func(r int) {
		var err error
		if got[r], err = gs[r].Gather([]byte(fmt.Sprintf(`{"r":%d}`, r))); err != nil {
			t.Error(err)
		}
	})
	if len(got[0]) != n || string(got[0][3]) != `{"r":3}` || got[1] != nil {
		t.Errorf("gather: %q %q", got[0], got[1])
	}
	for _, op := range []Op{Sum, Min, Max} {
		res := make([][]float64, n)
		concurrently(n, func(r int) {
			var err error
			if res[r], err = gs[r].Reduce([]float64{float64(r + 1), 10}, op); err != nil {
				t.Error(err)
			}
		})
		want := map[Op]float64{Sum: 10, Min: 1, Max: 4}[op]
		for r := range res {
			if len(res[r]) != 2 || res[r][0] != want {
				t.Errorf("%s rank %d: %v, want %v", op, r, res[r], want)
			}
		}
	}
	concurrently(n, func(r int) {
		if err := gs[r].Close(); err != nil {
			t.Error(err)
		}
	})
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
	if _, err := gs[1].Reduce([]float64{1}, Sum); err == nil {
		t.Error("reduce succeeded with a dead peer")
	}
}

// Rank 0 exiting right after it notices a lost process (as ncclbench
// does) must not cut off its notice: the others blame the dead process,
// not rank 0 whose connection then closes too.
func TestGroupPeerLostRankZeroExits(t *testing.T) {
	gs := joinAll(t, 3, 5*time.Second)
	gs[2].peers[0].c.Close() // rank 2 dies
	select {
	case <-gs[0].Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("rank 0 did not notice")
	}
	gs[0].Flush()
	for _, p := range gs[0].peers { // rank 0 exits
		if p != nil {
			p.c.Close()
		}
	}
	select {
	case <-gs[1].Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("rank 1 did not notice")
	}
	if err := gs[1].Err(); !strings.Contains(err.Error(), "rank 2") {
		t.Errorf("rank 1 blames the wrong process: %v", err)
	}
}

func TestJoinTimeout(t *testing.T) {
	addr := testport.Addr(t)
	start := time.Now()
	_, err := Join(Config{Addr: addr, Rank: 0, Size: 2, Timeout: 300 * time.Millisecond, MakeID: func() ([]byte, error) { return nil, nil }})
	if err == nil || !strings.Contains(err.Error(), "[1]") {
		t.Errorf("rank 0 alone: %v", err)
	}
	// Rank 1's deadline is long enough to dial at least once on a loaded
	// host: with 300 ms, a scheduling stall (two test binaries and builds
	// on 2 CPUs) let the deadline pass before the first dial could be
	// refused, and the error was rightly the timeout.
	_, err = Join(Config{Addr: testport.Addr(t), Rank: 1, Size: 2, Timeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "cannot reach rank 0") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("rank 1 alone: %v (want the refusal, not the deadline's timeout)", err)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("timeouts took %v", d)
	}
}

// Under torchrun the agent's store may already hold MASTER_PORT+1: rank 0
// says so and how to pick another port.
func TestListenBusyPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rv, _ := FindRendezvous("", 0, Env{Size: 2, Launcher: Torchrun}, envOf(map[string]string{"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1", "TORCHELASTIC_RUN_ID": "x"}))
	c := cfgs(l.Addr().String(), 2, 1, time.Second)[0]
	c.PortHint = rv.Hint
	_, err = Join(c)
	if err == nil || !strings.Contains(err.Error(), "cannot listen") || !strings.Contains(err.Error(), "--rdzv-port") {
		t.Errorf("busy port: %v", err)
	}
}

// hostile opens, during a join at addr, an idle connection (a port
// scanner), a garbage one and one that never ends its line; they are
// dropped without delaying anyone.
func hostile(t *testing.T, addr string) func() {
	var conns []net.Conn
	deadline := time.Now().Add(5 * time.Second)
	for len(conns) < 3 && time.Now().Before(deadline) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		conns = append(conns, c)
	}
	if len(conns) < 3 {
		t.Fatal("rank 0 never listened")
	}
	conns[1].Write([]byte("GET / HTTP/1.0\r\n\r\n{not json}\n"))
	go func() {
		junk := make([]byte, 64<<10)
		for i := range junk {
			junk[i] = 'x'
		}
		for i := 0; i < 64; i++ { // 4 MiB without a newline
			if _, err := conns[2].Write(junk); err != nil {
				return
			}
		}
	}()
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

// 1000 ranks (goroutines here; processes in cmd/ncclbench's scale test)
// join in well under the hello timeout although idle and garbage
// connections are open at the same time.
func TestJoinAtScaleHostile(t *testing.T) {
	n := 1000
	if testing.Short() {
		n = 128
	}
	addr := testport.Addr(t)
	cs := cfgs(addr, n, 8, 60*time.Second)
	var groups []*Group
	var errs []error
	done := make(chan struct{})
	start := time.Now()
	go func() {
		g0, e0 := Join(cs[0])
		groups = append([]*Group{g0}, groups...)
		errs = append([]error{e0}, errs...)
		close(done)
	}()
	cleanup := hostile(t, addr)
	defer cleanup()
	gs, es := joinCfgs(cs[1:])
	<-done
	took := time.Since(start)
	t.Logf("%d ranks joined in %v", n, took)
	groups, errs = append(groups, gs...), append(errs, es...)
	// Every group closed, all at once as the processes would: the 2000
	// connections of a run left open ran `go test -count=20` out of file
	// descriptors (ulimit 20000) from the tenth run on.
	defer concurrently(n, func(r int) {
		if groups[r] != nil {
			groups[r].Close()
		}
	})
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if took > helloTimeout/2 {
		t.Errorf("join took %v: idle connections held it up", took)
	}
	if groups[n-1].LocalIndex != (n-1)/8 || groups[n-1].LocalCount != n/8 {
		t.Errorf("rank %d: local %d/%d", n-1, groups[n-1].LocalIndex, groups[n-1].LocalCount)
	}
}

// With a job token, a process without it (or with another) cannot take a
// rank or learn the id; the real process still joins.
func TestJoinToken(t *testing.T) {
	addr := testport.Addr(t)
	cs := cfgs(addr, 2, 1, 5*time.Second)
	for i := range cs {
		cs[i].Token = []byte("job-7")
	}
	stale := cs[1]
	stale.Token = []byte("job-6")
	stale.Timeout = 2 * time.Second
	none := cs[1]
	none.Token = nil
	none.Timeout = 2 * time.Second
	res := make(chan *Group, 1)
	go func() {
		g, err := Join(cs[0])
		if err != nil {
			t.Error(err)
		}
		res <- g
	}()
	if g, err := Join(stale); err == nil || !strings.Contains(err.Error(), "auth") || g != nil {
		t.Errorf("wrong token: %v", err)
	}
	if _, err := Join(none); err == nil || !strings.Contains(err.Error(), "requires a job token") {
		t.Errorf("no token: %v", err)
	}
	g1, err := Join(cs[1])
	g0 := <-res
	exitAll(t, []*Group{g0, g1})
	if err != nil || string(g1.ID) != "the-id" {
		t.Fatalf("real rank 1: %v", err)
	}
	if g0 == nil || g0.Hellos[1].Pid != cs[1].Hello.Pid {
		t.Errorf("rank 0 took the wrong process")
	}
}

// A process with another world size or other arguments fails every
// process with one line that names it.
func TestJoinMismatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		odd  func(c *Config)
		want string
	}{
		{"arguments", func(c *Config) { c.Hello.Key = "all_reduce -b 16" }, "process rank 2 (h0 pid 1002) runs"},
		{"world size", func(c *Config) { c.Size = 4 }, "process rank 2 (h0 pid 1002) says there are 4 processes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := cfgs(testport.Addr(t), 3, 1, 3*time.Second)
			tc.odd(&cs[2])
			_, errs := joinCfgs(cs)
			for r, err := range errs {
				var mm *MismatchError
				if !errors.As(err, &mm) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("rank %d: %v", r, err)
				}
			}
		})
	}
}

// KeepGoing (the mesh): rank 0 talks to each process on its own; one that
// dies, gives up or is dropped is reported for that rank alone, and the
// others go on.
func TestGroupKeepGoing(t *testing.T) {
	const n = 4
	cs := cfgs(testport.Addr(t), n, 1, 5*time.Second)
	for r := range cs {
		cs[r].KeepGoing, cs[r].Proto, cs[r].MakeID = true, "test-mesh/1", nil
	}
	gs, errs := joinCfgs(cs)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if a := gs[0].PeerAddr(1); a != "127.0.0.1" {
		t.Errorf("PeerAddr(1) = %q", a)
	}
	dl := time.Now().Add(3 * time.Second)
	// A round trip with rank 1.
	if err := gs[0].Send(1, []byte(`"task"`), dl); err != nil {
		t.Fatal(err)
	}
	if p, err := gs[1].Recv(0, dl); err != nil || string(p) != `"task"` {
		t.Fatalf("rank 1 got %q, %v", p, err)
	}
	if err := gs[1].Send(0, []byte(`"done"`), dl); err != nil {
		t.Fatal(err)
	}
	if p, err := gs[0].Recv(1, dl); err != nil || string(p) != `"done"` {
		t.Fatalf("rank 0 got %q, %v", p, err)
	}
	// Only rank 0 talks to everyone.
	if err := gs[1].Send(2, nil, dl); err == nil {
		t.Error("rank 1 sent to rank 2")
	}
	// Rank 2 dies, rank 3 does not answer and is dropped.
	gs[2].peers[0].c.Close()
	var pl *PeerLost
	if _, err := gs[0].Recv(2, dl); !errors.As(err, &pl) || pl.Rank != 2 || !strings.Contains(err.Error(), "exited or was killed") {
		t.Errorf("rank 2 dead: %v", err)
	}
	start := time.Now()
	if _, err := gs[0].Recv(3, time.Now().Add(200*time.Millisecond)); !errors.As(err, &pl) || time.Since(start) > 2*time.Second {
		t.Errorf("rank 3 silent: %v after %v", err, time.Since(start))
	}
	gs[0].Drop(3, "stuck in round 2")
	if why, dead := gs[0].Dead(3); !dead || why != "stuck in round 2" {
		t.Errorf("Dead(3) = %q, %v", why, dead)
	}
	if _, err := gs[3].Recv(0, dl); err == nil {
		t.Error("a dropped rank 3 still hears rank 0")
	}
	// The group itself is not lost: rank 1 still works, and closes cleanly.
	if gs[0].Err() != nil {
		t.Errorf("group lost: %v", gs[0].Err())
	}
	if err := gs[0].Send(1, []byte(`"more"`), dl); err != nil {
		t.Fatal(err)
	}
	if p, err := gs[1].Recv(0, dl); err != nil || string(p) != `"more"` {
		t.Fatalf("after the losses rank 1 got %q, %v", p, err)
	}
	concurrently(2, func(r int) {
		if err := gs[r].Close(); err != nil {
			t.Errorf("close rank %d: %v", r, err)
		}
	})
}

// Another program's rendezvous on the port is refused by name.
func TestJoinOtherProto(t *testing.T) {
	cs := cfgs(testport.Addr(t), 2, 1, 2*time.Second)
	cs[0].Proto = "rdmabench-mesh/1"
	_, errs := joinCfgs(cs)
	if errs[1] == nil || !strings.Contains(errs[1].Error(), `protocol "rdmabench-mesh/1"`) {
		t.Errorf("rank 1: %v", errs[1])
	}
}

// Clock offsets within one process are zero, within the bound measured.
func TestMeasureClocks(t *testing.T) {
	gs := joinAll(t, 3, 10*time.Second)
	offs, err := gs[0].MeasureClocks(8, time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	for r, o := range offs[1:] {
		if o.ErrNs <= 0 || o.OffsetNs > o.ErrNs || o.OffsetNs < -o.ErrNs {
			t.Errorf("rank %d: offset %d ns, error bound %d ns: the true offset is 0", r+1, o.OffsetNs, o.ErrNs)
		}
	}
	if o, _ := gs[1].MeasureClocks(1, time.Now().Add(time.Second)); o != nil {
		t.Errorf("rank 1 measured %v", o)
	}
}

// A census names what each process says; one that does not answer (its
// reader is stuck, as a stopped process's) keeps what it last published.
// Conclude's reason reaches every process as it is.
func TestCensus(t *testing.T) {
	stuck := make(chan struct{})
	cs := cfgs(testport.Addr(t), 3, 1, 10*time.Second)
	cs[0].Status = func() []byte { return []byte(`"r0"`) }
	cs[1].Status = func() []byte { return []byte(`"r1"`) }
	cs[2].Status = func() []byte { <-stuck; return []byte(`"r2"`) }
	gs, errs := joinCfgs(cs)
	exitAll(t, gs)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	// Rank 2 publishes, then asks for the census on the same connection
	// (nil: what it published stands), so rank 0 has heard "early2" when
	// the stall fires. A stall from another rank would race it: two
	// connections' messages reach rank 0 in no set order (on a loaded
	// machine the census ended before the publication was read).
	if err := gs[2].Publish([]byte(`"early2"`), time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if gs[1].Stalled() != nil {
		t.Error("rank 1 has a stall channel")
	}
	if err := gs[2].RequestCensus(nil, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-gs[0].Stalled():
	case <-time.After(5 * time.Second):
		t.Fatal("rank 0 never saw the stall")
	}
	begin := time.Now()
	st := gs[0].Census(time.Now().Add(time.Second))
	if d := time.Since(begin); d < time.Second || d > 4*time.Second {
		t.Errorf("the census took %v, want its 1 s deadline", d)
	}
	want := []struct {
		answered bool
		payload  string
	}{{true, `"r0"`}, {true, `"r1"`}, {false, `"early2"`}}
	for r, w := range want {
		if st[r].Answered != w.answered || string(st[r].Payload) != w.payload || st[r].Heard.IsZero() {
			t.Errorf("rank %d: %+v, want answered %v with %s", r, st[r], w.answered, w.payload)
		}
	}
	gs[0].Conclude("the verdict")
	close(stuck) // rank 2 continues, and hears it too
	for r, g := range gs {
		select {
		case <-g.Lost():
		case <-time.After(5 * time.Second):
			t.Fatalf("rank %d never heard the conclusion", r)
		}
		var pl *PeerLost
		if err := g.Err(); !errors.As(err, &pl) || !pl.Final || err.Error() != "the verdict" {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}
