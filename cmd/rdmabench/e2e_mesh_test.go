package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/mesh/rank"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// meshArgs keep a mesh short under emulation: a 64 KiB write-bw for a
// second and 100 ping-pongs of 8 B each way, two retests at most.
var meshArgs = []string{"mesh", "-s", "64K", "-D", "2", "--lat-iters", "100", "--timeout", "30s", "--max-retests", "2", "--rendezvous-timeout", "60"}

// meshRun is one mesh's processes (or mpirun's one) and their output.
type meshRun struct {
	cmds     []*exec.Cmd
	out, err []*syncbuf.Buffer
	save     string
	start    time.Time
}

func (mr *meshRun) wait(t *testing.T, limit time.Duration) []int {
	t.Helper()
	codes := make([]int, len(mr.cmds))
	done := make(chan struct{})
	go func() {
		for i, c := range mr.cmds {
			err := c.Wait()
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				codes[i] = ee.ExitCode()
			} else if err != nil {
				codes[i] = -1
			}
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		for _, c := range mr.cmds {
			c.Process.Kill()
		}
		<-done
		t.Fatalf("the mesh did not end within %v; rank 0: %s\n%s", limit, mr.out[0], mr.err[0])
	}
	return codes
}

func (mr *meshRun) doc(t *testing.T) *results.Mesh {
	t.Helper()
	m, err := results.ReadMeshFile(mr.save)
	if err != nil {
		t.Fatalf("--save: %v\nrank 0 stdout:\n%s\nstderr:\n%s", err, mr.out[0], mr.err[0])
	}
	return m
}

func startCmd(t *testing.T, mr *meshRun, name string, args []string, env []string) {
	t.Helper()
	startCmdEnv(t, mr, name, args, append(append(os.Environ(), "RDMABENCH_RUN_MAIN=1"), env...))
}

// startCmdEnv starts a rank with exactly env.
func startCmdEnv(t *testing.T, mr *meshRun, name string, args []string, env []string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	o, e := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = o, e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	mr.cmds, mr.out, mr.err = append(mr.cmds, cmd), append(mr.out, o), append(mr.err, e)
}

// slurmMesh starts n ranks of this binary as srun would: SLURM_PROCID and
// the rest in each one's environment, every rank on the one rxe device.
func slurmMesh(t *testing.T, n int, extra ...string) *meshRun {
	mr := &meshRun{save: filepath.Join(t.TempDir(), "mesh.json"), start: time.Now()}
	args := append(append(append([]string{}, meshArgs...), "--rendezvous", testport.Addr(t), "--save", mr.save), extra...)
	for r := 0; r < n; r++ {
		startCmd(t, mr, os.Args[0], args, []string{fmt.Sprintf("SLURM_PROCID=%d", r), fmt.Sprintf("SLURM_NTASKS=%d", n),
			fmt.Sprintf("SLURM_LOCALID=%d", r), "SLURM_STEP_ID=0", "SLURM_JOB_ID=7", "RDMABENCH_TOKEN=mesh-test-token"})
	}
	return mr
}

// mpirunMesh starts n ranks under Debian's Open MPI mpirun (as root in
// the guest, more ranks than cores). Without derive, the ranks are given
// --rendezvous; with it they find rank 0 themselves (one host: 127.0.0.1).
func mpirunMesh(t *testing.T, n int, derive bool) *meshRun {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv("RDMABENCH_REQUIRE_HW") == "1" {
			t.Fatal("mpirun not found: ci/deps.sh installs openmpi-bin")
		}
		t.Skip("needs mpirun (Debian openmpi-bin)")
	}
	mr := &meshRun{save: filepath.Join(t.TempDir(), "mesh.json"), start: time.Now()}
	args := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", fmt.Sprint(n), "-x", "RDMABENCH_RUN_MAIN=1", os.Args[0]}, meshArgs...)
	if !derive {
		args = append(args, "--rendezvous", testport.Addr(t))
	}
	args = append(args, "--save", mr.save)
	startCmd(t, mr, mpirun, args, []string{"OMPI_MCA_pml=ob1", "OMPI_MCA_btl=self,tcp"})
	return mr
}

// checkFullMesh asserts a mesh where every rank stayed: all directions
// measured once, in rounds where no NIC serves two pairs at once, every
// rank's port in the inventory, and an exit status that agrees with the
// report.
func checkFullMesh(t *testing.T, m *results.Mesh, n int, launcher string, code int) {
	t.Helper()
	if len(m.Ranks) != n || m.Launcher != launcher {
		t.Errorf("%d ranks, launcher %q; want %d, %q", len(m.Ranks), m.Launcher, n, launcher)
		return
	}
	checkMeshRounds(t, m)
	for _, r := range m.Ranks {
		if r.Dead != "" || r.Device == "" || r.ActiveMTU == 0 || r.Addr == "" {
			t.Errorf("rank %+v", r)
		}
	}
	seen := map[[2]int]bool{}
	for _, p := range m.Pairs {
		if seen[[2]int{p.From, p.To}] {
			t.Errorf("%d->%d measured twice", p.From, p.To)
		}
		seen[[2]int{p.From, p.To}] = true
		if !p.Measured() || p.LatP99us < p.LatP50us {
			t.Errorf("%d->%d round %d: %+v", p.From, p.To, p.Round, p)
		}
	}
	if len(seen) != n*(n-1) {
		t.Errorf("%d directions, want %d", len(seen), n*(n-1))
	}
	if m.MedianBW <= 0 || m.MedianLat <= 0 {
		t.Errorf("medians %v Gb/s %v us", m.MedianBW, m.MedianLat)
	}
	want := 0
	if !render.MeshClean(m) {
		want = 1 // emulation is noisy: outliers may come, and then exit 1
	}
	if code != want {
		t.Errorf("exit %d, want %d for this report", code, want)
	}
}

// checkMeshRounds: no round holds two pairs on one NIC, and there are as
// many rounds as that needs: a full mesh's tournament (n-1 rounds, n when
// odd) exactly where every rank has a NIC of its own, else at least as
// many as the busiest NIC's pairs (all of them where every rank is on the
// single guest's rxe0); no round is empty.
func checkMeshRounds(t *testing.T, m *results.Mesh) {
	t.Helper()
	n := len(m.Ranks)
	pairsOf := map[string]map[[2]int]bool{}
	inRound := map[int]map[string][2]int{}
	for _, p := range m.Pairs {
		pair := [2]int{min(p.From, p.To), max(p.From, p.To)}
		if p.Round < 1 || p.Round > m.Rounds {
			t.Errorf("%d->%d in round %d of %d", p.From, p.To, p.Round, m.Rounds)
			continue
		}
		if inRound[p.Round] == nil {
			inRound[p.Round] = map[string][2]int{}
		}
		for _, r := range pair {
			nic := m.Ranks[r].NIC()
			if pairsOf[nic] == nil {
				pairsOf[nic] = map[[2]int]bool{}
			}
			pairsOf[nic][pair] = true
			if other, ok := inRound[p.Round][nic]; ok && other != pair {
				t.Errorf("round %d: NIC %s in pairs %v and %v at once", p.Round, nic, other, pair)
			}
			inRound[p.Round][nic] = pair
		}
	}
	least := 1 // --pairs: as many as the NICs need
	if len(m.Pairs) == n*(n-1) {
		least = n - 1
		if n%2 == 1 {
			least = n
		}
	}
	for _, ps := range pairsOf {
		least = max(least, len(ps))
	}
	if len(pairsOf) == n && m.Rounds != least || m.Rounds < least || len(inRound) != m.Rounds {
		t.Errorf("%d rounds (%d with pairs) for %d ranks on %d NICs; want %d", m.Rounds, len(inRound), n, len(pairsOf), least)
	}
}

func TestE2EMesh(t *testing.T) {
	needRDMA(t)
	for _, tc := range []struct {
		name     string
		n        int
		launcher string
		args     []string
	}{
		// A device per local rank, as with a rank per NIC (all rxe0 here).
		{"slurm 4", 4, "Slurm", []string{"-d", "rxe0,rxe0,rxe0,rxe0"}},
		{"slurm 5", 5, "Slurm", nil},
		{"mpirun 4", 4, "Open MPI", nil},
		{"mpirun 5", 5, "Open MPI", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mr *meshRun
			if tc.launcher == "Slurm" {
				mr = slurmMesh(t, tc.n, tc.args...)
			} else {
				mr = mpirunMesh(t, tc.n, tc.n == 4)
			}
			codes := mr.wait(t, 5*time.Minute)
			m := mr.doc(t)
			t.Logf("%d ranks under %s: %v", tc.n, tc.launcher, time.Since(mr.start).Round(time.Second))
			checkFullMesh(t, m, tc.n, tc.launcher, codes[0])
			out := mr.out[0].String()
			for _, want := range []string{"Bandwidth [Gb/s], write-bw 64 KiB", "Latency p50 [us]", fmt.Sprintf("%d ranks (%s)", tc.n, tc.launcher)} {
				if !strings.Contains(out, want) {
					t.Errorf("report lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(mr.err[0].String(), "expected about") {
				t.Errorf("no expected time first:\n%s", mr.err[0])
			}
			if tc.launcher == "Open MPI" && tc.n == 4 && !strings.Contains(mr.err[0].String(), "rendezvous: 127.0.0.1:") {
				t.Errorf("no derived rendezvous said:\n%s", mr.err[0])
			}
			if tc.launcher == "Slurm" {
				for r := 1; r < tc.n; r++ {
					if codes[r] != 0 || mr.out[r].Len() != 0 {
						t.Errorf("rank %d: exit %d, stdout %q, stderr %q", r, codes[r], mr.out[r], mr.err[r])
					}
				}
			}
		})
	}
}

// --screen: each rank is a client and a server at once (both directions
// of its pair), every direction measured in the short pass, and the
// report says what the rounds and the retests ran.
func TestE2EMeshScreen(t *testing.T) {
	needRDMA(t)
	mr := slurmMesh(t, 4, "--screen", "0.5")
	codes := mr.wait(t, 3*time.Minute)
	m := mr.doc(t)
	t.Logf("4 ranks screened: %v", time.Since(mr.start).Round(time.Second))
	// A failure keeps every direction's figures and verdicts in the log:
	// it failed once in 7 runs with 10 of 12 directions outliers, and the
	// document is gone with the guest.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		t.Logf("medians %.3f Gb/s %.1f us, spreads %.3f %.3f, sigmas %g", m.MedianBW, m.MedianLat, m.SpreadBW, m.SpreadLat, m.Sigmas)
		for _, p := range m.Pairs {
			rt := "-"
			if p.Retest != nil {
				rt = fmt.Sprintf("%.3f/%.1f %q", p.Retest.BWGbps, p.Retest.LatP50us, p.Retest.Error)
			}
			t.Logf("%d->%d %s: %.3f Gb/s %.1f us slow %v/%v control %v retest %s err %q", p.From, p.To, p.Class, p.BWGbps, p.LatP50us, p.SlowBW, p.SlowLat, p.Control, rt, p.Error)
		}
		t.Logf("culprits %v links %v inconclusive %v not judged %v", m.Culprits, m.Links, m.Inconclusive, m.NotJudged)
	})
	checkFullMesh(t, m, 4, "Slurm", codes[0])
	if m.Screen == nil || m.Screen.BWDurationS != 0.5 || m.Screen.LatIters != 100 || m.BWDurationS != 2 {
		t.Fatalf("screen %+v, retests for %gs", m.Screen, m.BWDurationS)
	}
	// The controls: up to 8 healthy directions of the 12 retested alone at
	// full length, and how that differs from the screening pass on this
	// path. They are drawn from the directions the screening found fine:
	// on a loaded host the guest's ping-pongs wait for its 4 ms timer tick
	// or two, and 10 of 12 directions came out latency outliers, leaving 2
	// to be controls (3 of 7 runs failed "2 controls measured" so).
	controls, fine := 0, 0
	for _, p := range m.Pairs {
		if p.Control && p.Retest != nil && p.Retest.Error == "" {
			controls++
		}
		if p.Control || (p.Measured() && !p.Outlier()) {
			fine++
		}
	}
	// The ratios need minControls (3) controls; with fewer the analysis
	// states none.
	if controls < min(3, fine) || (controls >= 3) != (m.Screen.RetestBW > 0 && m.Screen.RetestLat > 0) {
		t.Errorf("%d controls measured of %d fine directions, retest ratios %v %v", controls, fine, m.Screen.RetestBW, m.Screen.RetestLat)
	}
	t.Logf("%d controls: alone at full length %.2f x the screening bandwidth, %.2f x its latency", controls, m.Screen.RetestBW, m.Screen.RetestLat)
	// One NIC for all 4 ranks: its 6 pairs screened one a round.
	for _, want := range []string{"6 rounds screening both directions of each pair at once, write-bw 64 KiB for 0.5s", "retests alone for 2s", "retests judged against"} {
		if !strings.Contains(mr.out[0].String(), want) {
			t.Errorf("report lacks %q:\n%s", want, mr.out[0])
		}
	}
	if !strings.Contains(mr.err[0].String(), "a round; expected about") {
		t.Errorf("no screening estimate first:\n%s", mr.err[0])
	}
}

// --pairs: only those pairs, packed into as few rounds as the tournament
// allows.
func TestE2EMeshPairs(t *testing.T) {
	needRDMA(t)
	pairs := filepath.Join(t.TempDir(), "pairs")
	os.WriteFile(pairs, []byte("# two racks\n0 1\n2 3\n0 2\n"), 0o644)
	prom := filepath.Join(t.TempDir(), "mesh.prom")
	mr := slurmMesh(t, 4, "--pairs", pairs, "--metrics", prom)
	codes := mr.wait(t, 3*time.Minute)
	m := mr.doc(t)
	// 0-1 and 2-3 would share a round, but all four ranks share rxe0.
	if len(m.Pairs) != 6 || m.Rounds != 3 || codes[0] > 1 {
		t.Errorf("exit %d, %d directions in %d rounds; want 6 in 3:\n%s", codes[0], len(m.Pairs), m.Rounds, mr.out[0])
	}
	checkMeshRounds(t, m)
	for _, p := range m.Pairs {
		if !p.Measured() {
			t.Errorf("%d->%d: %s", p.From, p.To, p.Error)
		}
	}
	// --metrics: a series per direction measured, and the Slurm job.
	text, err := os.ReadFile(prom)
	if err != nil {
		t.Fatalf("--metrics: %v", err)
	}
	fams := promtest.Parse(t, text)
	first := 0
	for _, s := range fams["rdmabench_mesh_bandwidth_bytes_per_second"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "measurement" && l.GetValue() == "first" {
				first++
			}
		}
	}
	if first != 6 || len(fams["rdmabench_mesh_slurm_job_info"].GetMetric()) != 1 {
		t.Errorf("%d first bandwidths, want 6; slurm info %v", first, fams["rdmabench_mesh_slurm_job_info"])
	}
}

// A rank killed mid-mesh is reported, with its round, and the others'
// pairs are all measured.
func TestE2EMeshRankKilled(t *testing.T) {
	needRDMA(t)
	const n, victim = 5, 3
	mr := slurmMesh(t, n)
	// 10 rounds: the 5 ranks share rxe0, so its 10 pairs run one at a time.
	for deadline := time.Now().Add(3 * time.Minute); !strings.Contains(mr.err[0].String(), "1/10 rounds done"); {
		if time.Now().After(deadline) {
			t.Fatalf("round 1 did not end:\n%s", mr.err[0])
		}
		time.Sleep(100 * time.Millisecond)
	}
	mr.cmds[victim].Process.Signal(syscall.SIGKILL)
	killed := time.Now()
	codes := mr.wait(t, 4*time.Minute)
	t.Logf("the mesh ended %v after the kill", time.Since(killed).Round(time.Second))
	m := mr.doc(t)
	if codes[0] != 1 {
		t.Errorf("rank 0 exit %d, want 1", codes[0])
	}
	if d := m.Ranks[victim]; d.Dead == "" || d.DeadRound < 2 {
		t.Errorf("rank %d: dead %q in round %d", victim, d.Dead, d.DeadRound)
	}
	for _, p := range m.Pairs {
		switch {
		case p.From != victim && p.To != victim:
			if !p.Measured() {
				t.Errorf("%d->%d (round %d) not measured: %s", p.From, p.To, p.Round, p.Error)
			}
		case p.Round > m.Ranks[victim].DeadRound:
			if !strings.Contains(p.Error, fmt.Sprintf("rank %d left the mesh", victim)) {
				t.Errorf("%d->%d (round %d): %q", p.From, p.To, p.Round, p.Error)
			}
		}
	}
	if len(m.Pairs) != n*(n-1) {
		t.Errorf("%d directions, want %d", len(m.Pairs), n*(n-1))
	}
	if !strings.Contains(mr.out[0].String(), fmt.Sprintf("rank %d (", victim)) || !strings.Contains(mr.out[0].String(), "left the mesh in round") {
		t.Errorf("report does not name the dead rank:\n%s", mr.out[0])
	}
	for r := 1; r < n; r++ {
		if r != victim && codes[r] != 0 {
			t.Errorf("rank %d exit %d: %s", r, codes[r], mr.err[r])
		}
	}
}

// Bad input is one line and exit 2, on every rank, before anything is
// measured; no hardware needed.
func TestMeshUsage(t *testing.T) {
	slurm := func(r, n int) []string {
		return []string{fmt.Sprintf("SLURM_PROCID=%d", r), fmt.Sprintf("SLURM_NTASKS=%d", n), "SLURM_STEP_ID=0"}
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"alone", []string{"mesh"}, nil, "1 rank: start one process per node"},
		{"argument", []string{"mesh", "node1"}, slurm(0, 2), "takes no arguments"},
		{"size", []string{"mesh", "-s", "0"}, slurm(0, 2), "-s: bad size"},
		{"too big", []string{"mesh", "-s", "16M"}, slurm(0, 2), "exceeds"},
		{"fraction", []string{"mesh", "--bw-fraction", "1.5"}, slurm(0, 2), "--bw-fraction 1.5 outside"},
		{"multiple", []string{"mesh", "--lat-multiple", "0.5"}, slurm(0, 2), "--lat-multiple 0.5 outside"},
		{"duration", []string{"mesh", "-D", "0"}, slurm(0, 2), "--duration 0 outside"},
		{"at once", []string{"mesh", "--retest-at-once", "0"}, slurm(0, 2), "--retest-at-once 0 outside 1..4096"},
		{"no rendezvous", []string{"mesh"}, slurm(1, 2), "need a rendezvous"},
		{"bad launcher rank", []string{"mesh"}, slurm(3, 2), "rank 3 out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mr := &meshRun{}
			startCmd(t, mr, os.Args[0], tc.args, tc.env)
			codes := mr.wait(t, 20*time.Second)
			lines := strings.Split(strings.TrimSpace(mr.err[0].String()), "\n")
			if codes[0] != 2 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", codes[0], mr.err[0], tc.want)
			}
		})
	}
}

// A --pairs file that is not a list of pairs: rank 0 says why, the others
// learn from rank 0 that the mesh will not run (without a device they end
// sooner, on their own error); all exit non-zero at once, one line each.
func TestMeshBadPairsFile(t *testing.T) {
	pairs := filepath.Join(t.TempDir(), "pairs")
	os.WriteFile(pairs, []byte("0 1\n1 7\n"), 0o644)
	mr := &meshRun{}
	port := testport.Free(t)
	for r := 0; r < 3; r++ {
		startCmd(t, mr, os.Args[0], []string{"mesh", "--pairs", pairs, "--rendezvous", "127.0.0.1:" + port},
			[]string{fmt.Sprintf("SLURM_PROCID=%d", r), "SLURM_NTASKS=3", "SLURM_STEP_ID=0"})
	}
	codes := mr.wait(t, 30*time.Second)
	if codes[0] != 2 || !strings.Contains(mr.err[0].String(), `line 2: "7" is not a rank`) {
		t.Errorf("rank 0: exit %d: %s", codes[0], mr.err[0])
	}
	for r := 1; r < 3; r++ {
		e := mr.err[r].String()
		told := strings.Contains(e, "is not a list of this mesh's pairs") || strings.Contains(e, "no RDMA device")
		if codes[r] == 0 || !told || strings.Count(e, "\n") != 1 {
			t.Errorf("rank %d: exit %d: %s", r, codes[r], e)
		}
	}
}

// Ranks started with other arguments are refused by name, on every rank.
func TestMeshArgumentsDiffer(t *testing.T) {
	mr := &meshRun{}
	port := testport.Free(t)
	for r := 0; r < 2; r++ {
		size := "64K"
		if r == 1 {
			size = "1M"
		}
		startCmd(t, mr, os.Args[0], []string{"mesh", "-s", size, "--rendezvous", "127.0.0.1:" + port},
			[]string{fmt.Sprintf("SLURM_PROCID=%d", r), "SLURM_NTASKS=2", "SLURM_STEP_ID=0"})
	}
	codes := mr.wait(t, 30*time.Second)
	for r := 0; r < 2; r++ {
		if codes[r] != 2 || !strings.Contains(mr.err[r].String(), "start every process with the same arguments") {
			t.Errorf("rank %d: exit %d: %s", r, codes[r], mr.err[r])
		}
	}
}

func TestLocalDevice(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		env   launch.Env
		want  string
		error string
	}{
		{"", launch.Env{}, "", ""},
		{"mlx5_0", launch.Env{LocalRank: 3, LocalKnown: true}, "mlx5_0", ""},
		{"mlx5_0,mlx5_1,mlx5_2", launch.Env{LocalRank: 1, LocalKnown: true}, "mlx5_1", ""},
		{"mlx5_0, mlx5_1", launch.Env{LocalRank: 1, LocalKnown: true}, "mlx5_1", ""},
		{"mlx5_0,mlx5_1", launch.Env{LocalRank: 2, LocalKnown: true}, "", "local rank 2 has no device"},
		{"mlx5_0,mlx5_1", launch.Env{Source: "PMI"}, "", "gives no local rank"},
		{"mlx5_0,", launch.Env{LocalRank: 1, LocalKnown: true}, "", "empty device name"},
	} {
		got, err := rank.LocalDevice(tc.flag, tc.env)
		if (tc.error == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.error)) || got != tc.want {
			t.Errorf("localDevice(%q, %+v) = %q, %v; want %q, %q", tc.flag, tc.env, got, err, tc.want, tc.error)
		}
	}
}
