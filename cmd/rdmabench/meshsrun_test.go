package main

// Real ranks at scale under the real Slurm (issue 47 item 2): the mesh of
// meshfabric_test.go, N processes of this binary on the zero-cost NIC's
// fabric, started by Debian's srun from a slurmctld, slurmd and munged the
// test runs on 127.0.0.1 alone, every file in its temporary directory. No
// --rendezvous and no rank variables of the test's: the mesh takes its
// rank, size and rendezvous from Slurm's variables (launch/), as on a
// cluster; a step on one node meets on 127.0.0.1 with no name service.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
)

// srunFirstJob is the test cluster's first job id: the mesh derives its
// port from the job id (20000 + job × 10 + step; launch's slurmPort), so
// the test's two jobs meet on 20400 and 20410, between the agent test's
// fixed block (to 20299) and the ports testport hands out (from 20500).
const srunFirstJob = 40

// srunPort is the mesh's port for a job's step 0.
func srunPort(job int) int { return launch.DerivedPortBase + job*10 }

// srunRanks is the scale of the srun meshes: 16 (4 hosts × 4 NICs), or
// RDMABENCH_MESH_FABRIC_RANKS.
func srunRanks(t *testing.T) int {
	if os.Getenv("RDMABENCH_MESH_FABRIC_RANKS") == "" {
		return 16
	}
	return fabricRanks(t)
}

// srunFlags are srun's: n tasks on the one node (it declares n CPUs);
// -K0 (--kill-on-bad-exit=0, Slurm's default unless KillOnBadExit is set):
// a task that dies leaves the others running, which the mesh relies on;
// a time limit past the test's own.
func srunFlags(n int) []string {
	return []string{"-n", strconv.Itoa(n), "--kill-on-bad-exit=0", fmt.Sprintf("--time=%d", int(fabricLimit(n).Minutes())+1)}
}

// startLocalSlurm is a one-node Slurm on this host for n tasks: the node is
// this host's short name at 127.0.0.1, with n CPUs; slurmctld and slurmd
// on free ports. Skips where Slurm or munge is not installed.
func startLocalSlurm(t *testing.T, n int) *slurmCluster {
	t.Helper()
	for _, c := range []string{"munged", "slurmctld", "slurmd", "srun", "sinfo"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed (ci/deps.sh installs slurmd, slurmctld, slurm-client and munge)", c)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test's slurmd (SlurmdUser=root) starts the tasks")
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	host, _, _ = strings.Cut(host, ".")
	for job := srunFirstJob; job < srunFirstJob+2; job++ {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", srunPort(job)))
		if err != nil {
			t.Fatalf("job %d's rendezvous port is taken: %v", job, err)
		}
		l.Close()
	}
	dir := t.TempDir()
	// munged will not put its socket under a directory others cannot
	// search, as t.TempDir's parent (0700) is.
	if err := os.Chmod(filepath.Dir(dir), 0o711); err != nil {
		t.Fatal(err)
	}
	c := newSlurmCluster(t, dir, true)
	c.env = os.Environ()
	c.boot(fmt.Sprintf(`# rdmabench's one-host test cluster (cmd/rdmabench/meshsrun_test.go)
ClusterName=loop
SlurmctldHost=%[1]s(127.0.0.1)
SlurmctldPort=%[2]s
SlurmdPort=%[3]s
FirstJobId=%[4]d
%[5]sNodeName=%[1]s NodeAddr=127.0.0.1 CPUs=%[6]d State=UNKNOWN
PartitionName=loop Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, host, testport.Free(t), testport.Free(t), srunFirstJob, slurmConfCommon(c.dir), n), host)
	return c
}

// rankExits are the ranks' exit statuses the wrapper wrote in dir (-1:
// none).
func rankExits(dir string, n int) []int {
	codes := make([]int, n)
	for r := range codes {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("exit.%d", r)))
		codes[r] = -1
		if err == nil {
			if c, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				codes[r] = c
			}
		}
	}
	return codes
}

// TestMeshSrun: N real ranks (16 by default) under srun on a Slurm of the
// test's, two jobs on one cluster: a healthy fabric, then rank 5 killed
// after round 3.
func TestMeshSrun(t *testing.T) {
	if testing.Short() {
		t.Skip("16 real ranks under a Slurm of the test's, twice: about 45 s")
	}
	n := srunRanks(t)
	c := startLocalSlurm(t, n)
	t.Run("healthy", func(t *testing.T) { srunHealthy(t, c, n, srunFirstJob) })
	t.Run("rank killed", func(t *testing.T) { srunRankKilled(t, c, n) })
}

// checkSrunRendezvous: rank 0 met on 127.0.0.1 (a step on one node) at the
// port derived from its job's id.
func checkSrunRendezvous(t *testing.T, stderr string, job int) {
	t.Helper()
	want := fmt.Sprintf("rdmabench mesh: rendezvous: 127.0.0.1:%d (derived from SLURM_STEP_NUM_NODES=1 and SLURM_JOB_ID)", srunPort(job))
	if !strings.Contains(stderr, want) {
		t.Errorf("the mesh did not meet where Slurm's variables say (%q):\n%s", want, tail(stderr, 10))
	}
}

// srunHealthy: a healthy fabric: nothing blamed, srun and every rank exit
// 0, every rank process seen on its host and NIC, met where Slurm's
// variables say.
func srunHealthy(t *testing.T, c *slurmCluster, n, job int) {
	res := fabricMesh{n: n, nics: fabricNICs(n), srun: c}.run(t, fabricLimit(n))
	checkFabricPlaces(t, res.doc, fabricNICs(n))
	if b := blamed(res.doc); len(b) > 0 || res.code != 0 {
		t.Errorf("a healthy fabric: srun exit %d, blamed %d:\n%s\n%s\n%s", res.code, len(b), strings.Join(b, "\n"), tail(res.out, 40), tail(res.stderr, 10))
	}
	for r, code := range res.exits {
		if code != 0 {
			t.Errorf("rank %d exit %d, want 0", r, code)
		}
	}
	if res.stats.ranks != n {
		t.Errorf("saw %d rank processes, want %d: %s", res.stats.ranks, n, res.stats)
	}
	checkSrunRendezvous(t, res.stderr, job)
}

// srunRankKilled: rank 5 killed after round 3 under srun -K0: rank 0
// reports it left in its round and exits 1, the other ranks finish and
// exit 0; srun says task 5 exited 137 (its wrapper's status: 128 +
// SIGKILL) and exits with it, the largest of the tasks'.
func srunRankKilled(t *testing.T, c *slurmCluster, n int) {
	const victim = 5
	nics := fabricNICs(n)
	kill := func(mr *meshRun) {
		for end := time.Now().Add(5 * time.Minute); !strings.Contains(mr.err[0].String(), "rdmabench mesh: 3/"); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("no third round in 5 minutes: %s", tail(mr.err[0].String(), 20))
			}
		}
		for _, pid := range meshPids(os.Args[0]) {
			if procRank(pid) == victim {
				syscall.Kill(pid, syscall.SIGKILL)
				return
			}
		}
		t.Errorf("no process of rank %d to kill", victim)
	}
	res := fabricMesh{n: n, nics: nics, srun: c, during: kill}.run(t, fabricLimit(n))
	if res.exits[0] != 1 || res.doc.Ranks[victim].Dead == "" || !strings.Contains(res.out, fmt.Sprintf("rank %d (node%d) left the mesh in round", victim, victim/nics)) {
		t.Errorf("rank %d killed: rank 0 exit %d, dead %q:\n%s", victim, res.exits[0], res.doc.Ranks[victim].Dead, tail(res.out, 30))
	}
	for r, code := range res.exits {
		if r != 0 && r != victim && code != 0 {
			t.Errorf("rank %d exit %d, want 0", r, code)
		}
	}
	for _, cu := range res.doc.Culprits {
		if cu.Rank != victim {
			t.Errorf("blamed rank %d beside the killed one: %+v", cu.Rank, cu)
		}
	}
	if res.code != 137 || !strings.Contains(res.stderr, fmt.Sprintf("task %d: Exited with exit code 137", victim)) {
		t.Errorf("srun exit %d, want 137 and task %d reported:\n%s", res.code, victim, tail(res.stderr, 10))
	}
	checkSrunRendezvous(t, res.stderr, srunFirstJob+1)
	t.Logf("srun exit %d; ranks' exits %v", res.code, res.exits)
}
