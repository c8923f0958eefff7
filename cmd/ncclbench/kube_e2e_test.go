package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKubeJobSet starts the 4 pods of a JobSet (one replicated Job of 2
// Jobs × 2 pods) on the fake NCCL with only what JobSet, the Job
// controller and the pod template give: JOBSET_NAME, REPLICATED_JOB_NAME,
// JOB_INDEX, REPLICATED_JOB_REPLICAS, JOB_COMPLETION_INDEX, HOSTNAME and
// RDMABENCH_WORLD_SIZE; no --rendezvous, no MASTER_ADDR, the subdomain
// left to its default (the JobSet's name). Rank 0's name
// <jobset>-<rjob>-0-0.<jobset> is mapped to 127.0.0.1 by RDMABENCH_RESOLVE.
func TestKubeJobSet(t *testing.T) {
	js := fmt.Sprintf("nccl%d", os.Getpid()) // a derived port of its own per run
	const jobs, pods = 2, 2
	var ps []*proc
	for j := range jobs {
		for i := range pods {
			ps = append(ps, spawn(t, []string{
				"JOBSET_NAME=" + js, "REPLICATED_JOB_NAME=w", "JOB_INDEX=" + strconv.Itoa(j), "REPLICATED_JOB_REPLICAS=" + strconv.Itoa(jobs),
				"JOB_COMPLETION_INDEX=" + strconv.Itoa(i), fmt.Sprintf("HOSTNAME=%s-w-%d-%d", js, j, i),
				"RDMABENCH_WORLD_SIZE=" + strconv.Itoa(jobs*pods),
				"RDMABENCH_RESOLVE=" + js + "-w-0-0." + js + "=127.0.0.1"},
				"all_reduce", "-b", "1K", "-e", "1K", "-n", "1"))
		}
	}
	wait(t, ps, 60*time.Second)
	for r, p := range ps {
		if p.code != 0 {
			t.Errorf("rank %d: exit %d\n%s%s", r, p.code, p.stdout.String(), p.stderr.String())
		}
	}
	out := ps[0].stdout.String() + ps[0].stderr.String()
	if len(rows(ps[0].stdout.String())) != 1 || !strings.Contains(out, "4 processes joined") ||
		!strings.Contains(out, "derived from JOBSET_NAME and REPLICATED_JOB_NAME (subdomain: the JobSet's name)") {
		t.Errorf("rank 0: want one row, 4 processes, a rendezvous derived from JobSet's variables:\n%s", out)
	}
	// rank = JOB_INDEX × pods + JOB_COMPLETION_INDEX: the r-th process
	// started (job r/2, pod r%2) is rank r.
	for r, p := range ps {
		if want := fmt.Sprintf("Rank %2d Group  0 Pid %6d", r, p.cmd.Process.Pid); !strings.Contains(out, want) {
			t.Errorf("no %q:\n%s", want, out)
		}
	}
}
