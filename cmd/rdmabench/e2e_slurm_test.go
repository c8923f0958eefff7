package main

// Slurm and Open MPI for real, on the two-node rxe target: Debian's munge,
// slurmctld on node 1 and slurmd on both nodes, then the mesh and
// ncclbench (stand-in NCCL) under srun, contrib's mesh.sbatch under sbatch,
// and contrib's HealthCheckProgram draining node 2 after a fault injected
// in that node's environment file and resuming it once fixed; and the mesh
// and ncclbench across both nodes under mpirun -H. The binaries are the
// ones make build writes (build/rdmabench, build/ncclbench) and the
// stand-in NCCL make builds beside them (build/fakenccl), as an operator
// runs them.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/results"
)

// slurmBuild is where make build left the binaries and the stand-in NCCL
// (the package directory is cmd/rdmabench of the repository).
type slurmBuild struct{ repo, rdmabench, ncclbench, fakeNCCL string }

func needBuild(t *testing.T) slurmBuild {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	b := slurmBuild{repo: repo, rdmabench: filepath.Join(repo, "build", "rdmabench"), ncclbench: filepath.Join(repo, "build", "ncclbench"),
		fakeNCCL: filepath.Join(repo, "build", "fakenccl", "libnccl.so.2")}
	for _, f := range []string{b.rdmabench, b.ncclbench, b.fakeNCCL} {
		if _, err := os.Stat(f); err != nil {
			skipOrFail(t, "%s missing: make rxe-test-two-node builds it (%v)", f, err)
		}
	}
	return b
}

// needCommands skips (fails where make test demands the two-node suite)
// unless every command is installed; ci/deps.sh installs them.
func needCommands(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			skipOrFail(t, "%s is not installed (ci/deps.sh installs slurmd, slurmctld, munge and openmpi-bin)", n)
		}
	}
}

func skipOrFail(t testing.TB, format string, a ...any) {
	t.Helper()
	if os.Getenv("RDMABENCH_REQUIRE_TWO_NODES") == "1" {
		t.Fatalf(format, a...)
	}
	t.Skipf(format, a...)
}

// slurmCluster is munge, slurmctld and two slurmd, each node's files in the
// same directory of its own tmpfs; or, oneNode, munge, slurmctld and one
// slurmd on this host (meshsrun_test.go).
type slurmCluster struct {
	t       *testing.T
	b       slurmBuild
	dir     string
	oneNode bool     // this host alone: no node 2
	env     []string // for srun, sbatch, sinfo and scontrol on node 1
	local   []*exec.Cmd
	remote  []string // pids on node 2
}

func (c *slurmCluster) path(name string) string { return filepath.Join(c.dir, name) }

// slurmConfCommon is the slurm.conf lines every test cluster shares: root
// runs it all, munge on the test's own socket, every file in dir, no
// cgroups, accounting nor switch, and each node's CPUs as the
// configuration says (config_overrides), not as counted.
func slurmConfCommon(dir string) string {
	return fmt.Sprintf(`SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=%[1]s/munge.sock
StateSaveLocation=%[1]s/state
SlurmdSpoolDir=%[1]s/spool
SlurmctldPidFile=%[1]s/slurmctld.pid
SlurmdPidFile=%[1]s/slurmd.pid
SlurmctldLogFile=%[1]s/slurmctld.log
SlurmdLogFile=%[1]s/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
SlurmdParameters=config_overrides
`, dir)
}

func (c *slurmCluster) config() string {
	return fmt.Sprintf(`# rdmabench's two-node test cluster (cmd/rdmabench/e2e_slurm_test.go)
ClusterName=rxe
SlurmctldHost=rxe-node1(%[2]s)
%[4]s# TCG guests are slow: generous timeouts, so that a busy node is not DOWN.
SlurmdTimeout=300
MessageTimeout=60
# Checked only while a node is idle, so that the checks do not share a
# vCPU with the jobs they would judge.
HealthCheckProgram=%[1]s/healthcheck
HealthCheckInterval=5
HealthCheckNodeState=IDLE
# Two CPUs a node, as configured, on guests of one vCPU each: --ntasks-per-node=2
# then fits without --overcommit.
NodeName=rxe-node1 NodeAddr=%[2]s CPUs=2 State=UNKNOWN
NodeName=rxe-node2 NodeAddr=%[3]s CPUs=2 State=UNKNOWN
PartitionName=rxe Nodes=ALL Default=YES MaxTime=INFINITE State=UP
`, c.dir, node1Addr, node2Addr, slurmConfCommon(c.dir))
}

// healthWrapper is what /etc/default/rdmabench-health says on a real node:
// the checks to run (the node's NCCL environment file; no loopback rate:
// the health e2e tests measure it), then contrib's HealthCheckProgram.
func (c *slurmCluster) healthWrapper() string {
	return fmt.Sprintf(`#!/bin/sh
export PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_CONF=%[1]s/slurm.conf RDMABENCH=%[2]s
export RDMABENCH_HEALTH_ARGS="--no-bw --env-file %[1]s/nccl.env"
exec %[3]s/contrib/slurm/rdmabench-healthcheck
`, c.dir, c.b.rdmabench, c.b.repo)
}

// put writes a file on both nodes.
func (c *slurmCluster) put(name string, body []byte, mode os.FileMode) {
	c.t.Helper()
	if err := os.WriteFile(c.path(name), body, mode); err != nil {
		c.t.Fatal(err)
	}
	if !c.oneNode {
		c.putNode2(name, body, mode)
	}
}

func (c *slurmCluster) putNode2(name string, body []byte, mode os.FileMode) {
	c.t.Helper()
	out, code := onNode2(c.t, "sh", "-c", `echo "$2" | base64 -d >"$1" && chmod "$3" "$1"`, "put",
		c.path(name), base64.StdEncoding.EncodeToString(body), fmt.Sprintf("%o", mode))
	if code != 0 {
		c.t.Fatalf("writing %s on node 2: exit %d: %s", name, code, out)
	}
}

// daemon starts a command in the foreground on a node (1 or 2); cleanup
// stops it.
func (c *slurmCluster) daemon(node int, args ...string) {
	c.t.Helper()
	if node == 2 {
		out, code := onNode2(c.t, append([]string{"--bg"}, args...)...)
		pid := strings.TrimSpace(out)
		if code != 0 || pid == "" {
			c.t.Fatalf("starting %s on node 2: exit %d: %s", args[0], code, out)
		}
		c.remote = append(c.remote, pid)
		return
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = c.dir
	log, err := os.Create(c.path(filepath.Base(args[0]) + ".out"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "SLURM_CONF="+c.path("slurm.conf")) // for sweep
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", args[0], err)
	}
	log.Close()
	c.local = append(c.local, cmd)
}

func (c *slurmCluster) stop() {
	for i := len(c.local) - 1; i >= 0; i-- {
		c.local[i].Process.Kill()
		c.local[i].Wait()
	}
	c.sweep()
	if !c.oneNode {
		for _, pid := range c.remote {
			onNode2(c.t, "kill", "-9", pid)
		}
		onNode2(c.t, "rm", "-rf", c.dir)
	}
	os.RemoveAll(c.dir)
}

// sweep kills what the daemons left on this host: a step's slurmstepd
// (slurmd daemonizes it) and its tasks outlive a killed slurmd and srun.
// Each carries this cluster's SLURM_CONF in its environment (slurmd's, or
// srun's that the tasks inherit), and nothing else does. Bounded: a
// process that survives SIGKILL for 10 s is named, not waited on.
func (c *slurmCluster) sweep() {
	mark := []byte("SLURM_CONF=" + c.path("slurm.conf"))
	var left []int
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		for _, pid := range pidsWithEnv(mark) {
			if pid != os.Getpid() {
				syscall.Kill(pid, syscall.SIGKILL)
				left = append(left, pid)
			}
		}
		if len(left) == 0 {
			return
		}
	}
	c.t.Errorf("processes of the test's Slurm still running after SIGKILL: %v", left)
}

// pidsWithEnv are the live processes (not zombies) whose environment holds
// the entry kv.
func pidsWithEnv(kv []byte) []int {
	return procPids(func(dir string) bool {
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		return slices.ContainsFunc(bytes.Split(env, []byte{0}), func(e []byte) bool { return bytes.Equal(e, kv) })
	})
}

// logs are the queue and both nodes' daemon logs, for a failure.
func (c *slurmCluster) logs() string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sq := exec.CommandContext(ctx, "squeue", "-a", "-o", "%i %j %T %r %N")
	sq.Env = c.env
	if out, err := sq.CombinedOutput(); err == nil {
		fmt.Fprintf(&b, "--- squeue:\n%s", out)
	}
	for _, f := range []string{"slurmctld.log", "slurmd.log", "munged.out", "slurmctld.out", "slurmd.out"} {
		if data, err := os.ReadFile(c.path(f)); err == nil {
			fmt.Fprintf(&b, "--- node 1 %s:\n%s", f, lastLines(string(data), 40))
		}
	}
	if c.oneNode {
		return b.String()
	}
	out, _ := onNode2(c.t, append([]string{"sh", "-c", `d=$1; shift; tail -n 40 "$d/slurmd.log"; for p; do echo "--- node 2 pid $p:"; tail -n 20 /tmp/rxe-node/$p.log; done`, "logs", c.dir}, c.remote...)...)
	fmt.Fprintf(&b, "--- node 2 slurmd.log:\n%s", out)
	return b.String()
}

// run runs a Slurm client command on node 1 (bounded) and returns its
// output and exit status.
func (c *slurmCluster) run(limit time.Duration, args ...string) (string, int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir, cmd.Env, cmd.WaitDelay = c.dir, c.env, 5*time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		c.t.Fatalf("%s did not finish within %v:\n%s\n%s", strings.Join(args, " "), limit, out.String(), c.logs())
	}
	if err != nil && cmd.ProcessState == nil {
		c.t.Fatalf("%s: %v", args[0], err)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// waitFor polls cond (bounded) and fails with what the last poll saw.
func (c *slurmCluster) waitFor(what string, limit time.Duration, cond func() (bool, string)) {
	c.t.Helper()
	var last string
	for end := time.Now().Add(limit); time.Now().Before(end); time.Sleep(time.Second) {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
	}
	c.t.Fatalf("%s: not within %v; last seen:\n%s\n%s", what, limit, last, c.logs())
}

// nodeStates is sinfo's one line per node: "rxe-node1 idle".
func (c *slurmCluster) nodeStates() string {
	out, _ := c.run(30*time.Second, "sinfo", "-h", "-N", "-o", "%N %T")
	return out
}

func startSlurm(t *testing.T) *slurmCluster {
	t.Helper()
	needTwoNodes(t)
	needCommands(t, "munged", "slurmctld", "slurmd", "srun", "sbatch", "sinfo", "scontrol")
	ensureLink(t)
	c := newSlurmCluster(t, fmt.Sprintf("/tmp/rdmabench-slurm-%d", os.Getpid()), false)
	c.b = needBuild(t)
	// The guests have cgroup v2 but no systemd to ask for a scope.
	c.put("cgroup.conf", []byte("CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n"), 0o644)
	c.put("healthcheck", []byte(c.healthWrapper()), 0o755)
	c.put("nccl.env", []byte("# this node's NCCL environment\nNCCL_IB_HCA=rxe0\n"), 0o644)
	// systemd's slice, where slurmd (IgnoreSystemd) puts its stepd scope.
	slice := "/sys/fs/cgroup/system.slice"
	if err := os.MkdirAll(slice, 0o755); err != nil {
		t.Fatalf("cgroup: %v", err)
	}
	if out, code := onNode2(t, "mkdir", "-p", slice); code != 0 {
		t.Fatalf("cgroup on node 2: %s", out)
	}
	c.env = append(os.Environ(), "PATH="+filepath.Dir(c.b.rdmabench)+":"+os.Getenv("PATH"))
	c.boot(c.config(), "rxe-node1", "rxe-node2")
	return c
}

// newSlurmCluster makes the cluster's state and spool directories in dir
// (on both nodes unless oneNode) and stops it when the test ends.
func newSlurmCluster(t *testing.T, dir string, oneNode bool) *slurmCluster {
	t.Helper()
	c := &slurmCluster{t: t, dir: dir, oneNode: oneNode}
	for _, d := range []string{"state", "spool"} {
		if err := os.MkdirAll(c.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !oneNode {
		if out, code := onNode2(t, "mkdir", "-p", c.path("state"), c.path("spool")); code != 0 {
			t.Fatalf("mkdir on node 2: %s", out)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Slurm's logs:\n%s", c.logs())
		}
		c.stop()
	})
	return c
}

// boot writes a new munge key and conf as slurm.conf, starts munged (on
// each node), slurmctld and a slurmd for each node (the first here, the
// second on node 2), and waits until every node is idle. c.env gets
// SLURM_CONF.
func (c *slurmCluster) boot(conf string, nodes ...string) {
	t := c.t
	t.Helper()
	key := make([]byte, 1024)
	rand.Read(key)
	c.put("munge.key", key, 0o600)
	c.put("slurm.conf", []byte(conf), 0o644)
	c.env = append(c.env, "SLURM_CONF="+c.path("slurm.conf"))
	munged := []string{"munged", "-F", "--key-file=" + c.path("munge.key"), "--socket=" + c.path("munge.sock"),
		"--pid-file=" + c.path("munged.pid"), "--seed-file=" + c.path("munged.seed"), "--log-file=" + c.path("munged.log")}
	for n := range nodes {
		c.daemon(n+1, munged...)
	}
	c.waitFor("munged's socket on every node", 30*time.Second, func() (bool, string) {
		_, err1 := os.Stat(c.path("munge.sock"))
		if c.oneNode {
			return err1 == nil, fmt.Sprintf("%v", err1)
		}
		out, code := onNode2(t, "test", "-S", c.path("munge.sock"))
		return err1 == nil && code == 0, fmt.Sprintf("node 1: %v; node 2: exit %d %s", err1, code, out)
	})
	f := "-f" + c.path("slurm.conf")
	c.daemon(1, "slurmctld", "-D", f)
	var idle strings.Builder
	for n, name := range nodes {
		c.daemon(n+1, "slurmd", "-D", f, "-N", name)
		idle.WriteString(name + " idle\n")
	}
	c.waitFor("every node idle in sinfo", 120*time.Second, func() (bool, string) {
		s := c.nodeStates()
		return s == idle.String(), s
	})
}

// TestTwoNodeSlurm: the mesh, ncclbench, sbatch and the health drain/resume
// cycle on a real Slurm.
func TestTwoNodeSlurm(t *testing.T) {
	c := startSlurm(t)
	// Ranks meet where Slurm's own variables say (the step's first node,
	// a port from the job id): no --rendezvous, no token, as users run it.
	meshFlags := []string{"-s", "64K", "-D", "2", "--lat-iters", "100", "--timeout", "30s", "--max-retests", "2", "--rendezvous-timeout", "60"}

	t.Run("srun mesh", func(t *testing.T) {
		save := c.path("mesh.json")
		start := time.Now()
		out, code := c.run(5*time.Minute, append([]string{"srun", "-N2", "-n4", "--time=10", c.b.rdmabench, "mesh", "--save", save}, meshFlags...)...)
		m, err := results.ReadMeshFile(save)
		if err != nil {
			t.Fatalf("srun -N2 -n4 rdmabench mesh: exit %d, %v\n%s", code, err, out)
		}
		t.Logf("srun -N2 -n4 rdmabench mesh: %v, exit %d; median %.3f Gb/s, %.1f us", time.Since(start).Round(time.Second), code, m.MedianBW, m.MedianLat)
		checkFullMesh(t, m, 4, "Slurm", code)
		checkTwoHosts(t, m, 2)
		if !regexp.MustCompile(`rdmabench mesh: rendezvous: rxe-node1:\d+ \(derived from SLURM_STEP_NODELIST and SLURM_JOB_ID\)`).MatchString(out) {
			t.Errorf("the mesh does not say it met at the step's first node (derived from Slurm's variables):\n%s", out)
		}
	})

	t.Run("srun ncclbench", func(t *testing.T) {
		out, code := c.run(5*time.Minute, "srun", "-N2", "--ntasks-per-node=2", "--time=10",
			"--export=ALL,NCCL_SOCKET_IFNAME="+os.Getenv("RXE_NETDEV"),
			c.b.ncclbench, "all_reduce", "-b", "16", "-e", "1M", "-f", "4", "-n", "5", "-w", "1", "--nccl-lib", c.b.fakeNCCL)
		checkNCCLAcrossNodes(t, "srun -N2 --ntasks-per-node=2 ncclbench all_reduce", out, code, 4, "derived from SLURM_STEP_NODELIST and SLURM_JOB_ID")
	})

	t.Run("sbatch mesh.sbatch", func(t *testing.T) {
		script := filepath.Join(c.b.repo, "contrib", "slurm", "mesh.sbatch")
		out, code := c.run(5*time.Minute, "sbatch", "-N2", "--wait", "--parsable", "-D", c.dir,
			"--export=ALL,RDMABENCH="+c.b.rdmabench+",MESH_ARGS="+strings.Join(meshFlags, " "), script)
		job := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
		jobOut, _ := os.ReadFile(c.path("rdmabench-mesh-" + job + ".out"))
		m, err := results.ReadMeshFile(c.path("rdmabench-mesh-" + job + ".json"))
		if code != 0 || err != nil {
			t.Fatalf("sbatch -N2 --wait mesh.sbatch: exit %d, %v\n%s\njob output:\n%s", code, err, out, jobOut)
		}
		checkFullMesh(t, m, 2, "Slurm", 0)
		checkTwoHosts(t, m, 1)
		t.Logf("sbatch job %s: %d ranks on rxe-node1 and rxe-node2, median %.3f Gb/s", job, len(m.Ranks), m.MedianBW)
	})

	t.Run("health check drains and resumes node 2", func(t *testing.T) {
		// The fault: a GID index that is not RoCE v2 over IPv4, set in
		// node 2's environment file (fault code RB121).
		c.putNode2("nccl.env", []byte("NCCL_IB_HCA=rxe0\nNCCL_IB_GID_INDEX=0\n"), 0o644)
		var drained string
		c.waitFor("node 2 drained by the health check", 90*time.Second, func() (bool, string) {
			out, _ := c.run(30*time.Second, "sinfo", "-R", "-h", "-o", "%n|%E")
			drained = out
			return strings.HasPrefix(out, "rxe-node2|rdmabench: RB121"), out
		})
		reasons, _ := c.run(30*time.Second, "sinfo", "-R")
		t.Logf("sinfo -R during the drain:\n%s(the whole reason: %s)", reasons, strings.TrimSpace(drained))
		if strings.Contains(drained, "rxe-node1") || strings.Count(drained, "\n") != 1 {
			t.Errorf("only node 2 should be drained, with one line:\n%s", drained)
		}
		c.putNode2("nccl.env", []byte("NCCL_IB_HCA=rxe0\n"), 0o644)
		c.waitFor("node 2 resumed once fixed", 90*time.Second, func() (bool, string) {
			r, _ := c.run(30*time.Second, "sinfo", "-R", "-h")
			s := c.nodeStates()
			return r == "" && s == "rxe-node1 idle\nrxe-node2 idle\n", r + s
		})
	})
}

// checkTwoHosts: the ranks are on rxe-node1 and rxe-node2, perNode each.
func checkTwoHosts(t *testing.T, m *results.Mesh, perNode int) {
	t.Helper()
	hosts := map[string]int{}
	for _, r := range m.Ranks {
		hosts[r.Host]++
	}
	if len(hosts) != 2 || hosts["rxe-node1"] != perNode || hosts["rxe-node2"] != perNode {
		t.Errorf("ranks on hosts %v, want %d on each of rxe-node1 and rxe-node2", hosts, perNode)
	}
}

// checkNCCLAcrossNodes: every rank listed on its node, rank 0 met where the
// launcher's variables say, results correct, the log analysis sees two
// nodes over the link's interface.
func checkNCCLAcrossNodes(t *testing.T, what, out string, code, ranks int, derived string) {
	t.Helper()
	onNode := regexp.MustCompile(`(?m)^#\s+Rank\s+(\d+) Group\s+0 Pid\s+\d+ on\s+(\S+) device`).FindAllStringSubmatch(out, -1)
	hosts := map[string]int{}
	for _, m := range onNode {
		hosts[m[2]]++
	}
	switch {
	case code != 0:
		t.Errorf("%s: exit %d\n%s", what, code, out)
	case len(onNode) != ranks || hosts["rxe-node1"] != ranks/2 || hosts["rxe-node2"] != ranks/2:
		t.Errorf("%s: ranks on %v, want %d on each node\n%s", what, hosts, ranks/2, out)
	case derived != "" && !regexp.MustCompile(`# rendezvous: rxe-node1:\d+ \(`+regexp.QuoteMeta(derived)).MatchString(out):
		t.Errorf("%s: want the rendezvous %q on rxe-node1\n%s", what, derived, out)
	case !strings.Contains(out, "# Out of bounds values : 0 OK") || !regexp.MustCompile(`(?m)^\s+1048576\s`).MatchString(out):
		t.Errorf("%s: no correct 1 MiB row\n%s", what, out)
	case !strings.Contains(out, "Nodes:          2"):
		t.Errorf("%s: the log analysis does not see two nodes\n%s", what, out)
	}
}

// TestTwoNodeOpenMPI: mpirun -H across both nodes (Open MPI starts its
// daemon on node 2 through ci/guest/rxe-rsh, the target's ssh).
func TestTwoNodeOpenMPI(t *testing.T) {
	needTwoNodes(t)
	needCommands(t, "mpirun")
	ensureLink(t)
	b := needBuild(t)
	needCommands(t, "rxe-rsh")
	dir := t.TempDir()
	mpirun := func(limit time.Duration, args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		base := []string{"--allow-run-as-root", "-H", "rxe-node1,rxe-node2", "-np", "2", "--mca", "plm_rsh_agent", "rxe-rsh",
			"--mca", "oob_tcp_if_include", "198.18.0.0/24", "--mca", "btl_tcp_if_include", "198.18.0.0/24", "-x", "PATH"}
		cmd := exec.CommandContext(ctx, "mpirun", append(base, args...)...)
		cmd.WaitDelay = 5 * time.Second
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ctx.Err() != nil {
			t.Fatalf("mpirun %s did not finish within %v:\n%s", strings.Join(args, " "), limit, out.String())
		}
		if err != nil && cmd.ProcessState == nil {
			t.Fatalf("mpirun: %v", err)
		}
		return out.String(), cmd.ProcessState.ExitCode()
	}

	t.Run("mesh", func(t *testing.T) {
		save := filepath.Join(dir, "mesh.json")
		rdv := net.JoinHostPort("rxe-node1", testport.Free(t))
		out, code := mpirun(5*time.Minute, b.rdmabench, "mesh", "--rendezvous", rdv, "--save", save,
			"-s", "64K", "-D", "2", "--lat-iters", "100", "--timeout", "30s", "--max-retests", "2", "--rendezvous-timeout", "60")
		m, err := results.ReadMeshFile(save)
		if err != nil {
			t.Fatalf("mpirun -H rxe-node1,rxe-node2 rdmabench mesh: exit %d, %v\n%s", code, err, out)
		}
		checkFullMesh(t, m, 2, "Open MPI", code)
		checkTwoHosts(t, m, 1)
	})

	t.Run("ncclbench", func(t *testing.T) {
		rdv := net.JoinHostPort("rxe-node1", testport.Free(t))
		out, code := mpirun(5*time.Minute, "-x", "NCCL_SOCKET_IFNAME="+os.Getenv("RXE_NETDEV"), b.ncclbench, "all_reduce", "--rendezvous", rdv,
			"-b", "16", "-e", "1M", "-f", "4", "-n", "5", "-w", "1", "--nccl-lib", b.fakeNCCL)
		checkNCCLAcrossNodes(t, "mpirun -H rxe-node1,rxe-node2 ncclbench all_reduce", out, code, 2, "")
	})
}
