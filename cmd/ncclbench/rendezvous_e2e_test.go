package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/launch"
)

// freeDerivedSlurmJob is a Slurm job id whose derived port (step 0) is
// free here: the rendezvous port of job J is 20000 + J*10 mod 10000.
func freeDerivedSlurmJob(t *testing.T) int {
	t.Helper()
	for i := 0; i < 200; i++ {
		port := launch.DerivedPortBase + 10*((os.Getpid()+i*37)%(launch.DerivedPorts/10))
		l, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		l.Close()
		return 100000 + (port-launch.DerivedPortBase)/10
	}
	t.Fatal("no free port in the derived range")
	return 0
}

// Without --rendezvous or MASTER_ADDR, the processes find rank 0 from the
// launcher's variables and the header says where they met and why.
func TestDerivedRendezvous(t *testing.T) {
	job := freeDerivedSlurmJob(t)
	port := launch.DerivedPortBase + (job*10)%launch.DerivedPorts
	slurm := func(r int) []string {
		// Two nodes named in the step's list, rank 0 on the first
		// (localhost here), as srun's block distribution places it.
		return []string{"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=2", "SLURM_LOCALID=" + strconv.Itoa(r), "SLURM_STEP_ID=0",
			"SLURM_JOB_ID=" + strconv.Itoa(job), "SLURM_STEP_NODELIST=localhost,ghost[01-02]", "SLURM_JOB_NODELIST=localhost,ghost[01-09]",
			"SLURM_STEP_NUM_NODES=2", "SLURMD_NODENAME=" + []string{"localhost", "ghost01"}[r]}
	}
	ps := []*proc{spawn(t, slurm(0), "all_reduce", "-b", "8", "-e", "8", "-n", "1"), spawn(t, slurm(1), "all_reduce", "-b", "8", "-e", "8", "-n", "1")}
	wait(t, ps, 60*time.Second)
	want := fmt.Sprintf("# rendezvous: localhost:%d (derived from SLURM_STEP_NODELIST and SLURM_JOB_ID)\n", port)
	if ps[0].code != 0 || ps[1].code != 0 || !strings.Contains(ps[0].stdout.String(), want) {
		t.Errorf("Slurm: exits %d %d; want %q in\n%s%s%s", ps[0].code, ps[1].code, want, ps[0].stdout.String(), ps[0].stderr.String(), ps[1].stderr.String())
	}

	// Rank 0 elsewhere than the list's first node: one line, at once.
	bad := slurm(0)
	bad[len(bad)-1] = "SLURMD_NODENAME=ghost02"
	start := time.Now()
	p := runOne(t, bad, "all_reduce", "--nccl-lib", fakeLib)
	if p.code != exitUsage || strings.Count(p.stderr.String(), "\n") != 1 || !strings.Contains(p.stderr.String(), "rank 0 runs on ghost02, not on localhost") || time.Since(start) > 10*time.Second {
		t.Errorf("misplaced rank 0: exit %d %q", p.code, p.stderr.String())
	}

	// Open MPI's variables with every process on this host.
	ns := fmt.Sprintf("ncclbench-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	ompi := func(r int) []string {
		return []string{"OMPI_COMM_WORLD_RANK=" + strconv.Itoa(r), "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=" + strconv.Itoa(r),
			"OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=" + ns}
	}
	ps = []*proc{spawn(t, ompi(0), "sendrecv", "-b", "1K", "-e", "1K", "-n", "1"), spawn(t, ompi(1), "sendrecv", "-b", "1K", "-e", "1K", "-n", "1")}
	wait(t, ps, 60*time.Second)
	want = "# rendezvous: 127.0.0.1:"
	if ps[0].code != 0 || ps[1].code != 0 || !strings.Contains(ps[0].stdout.String(), want) || !strings.Contains(ps[0].stdout.String(), "(derived from OMPI_COMM_WORLD_LOCAL_SIZE=2 (one host) and PMIX_NAMESPACE)") {
		t.Errorf("Open MPI: exits %d %d\n%s%s%s", ps[0].code, ps[1].code, ps[0].stdout.String(), ps[0].stderr.String(), ps[1].stderr.String())
	}
	// On several hosts Open MPI does not say where rank 0 is.
	two := append(ompi(1), "OMPI_COMM_WORLD_LOCAL_SIZE=1")
	p = runOne(t, two, "sendrecv", "--nccl-lib", fakeLib)
	if p.code != exitUsage || !strings.Contains(p.stderr.String(), "does not say which host rank 0 is on") {
		t.Errorf("Open MPI on two hosts: exit %d %q", p.code, p.stderr.String())
	}
}

// Under the real mpirun on one host (what `mpirun -np 4 ncclbench ...`
// does), nothing but the launcher is needed.
func TestMpirunDerivedRendezvous(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("needs mpirun (ci/deps.sh installs openmpi-bin)")
	}
	p := &proc{}
	p.cmd = exec.Command(mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "3", "-x", "NCCLBENCH_TEST_MAIN=1",
		os.Args[0], "all_gather", "-b", "96", "-e", "96", "-n", "2", "--nccl-lib", fakeLib)
	p.cmd.Env = cleanEnv("OMPI_MCA_pml=ob1", "OMPI_MCA_btl=self,tcp")
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	wait(t, []*proc{p}, 90*time.Second)
	out := p.stdout.String()
	if p.code != 0 || !strings.Contains(out, "# rendezvous: 127.0.0.1:") || !strings.Contains(out, "derived from OMPI_COMM_WORLD_LOCAL_SIZE=3 (one host)") || len(rows(out)) != 1 {
		t.Errorf("mpirun -np 3: exit %d\n%s%s", p.code, out, p.stderr.String())
	}
}
