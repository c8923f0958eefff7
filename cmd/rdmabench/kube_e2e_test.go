package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestKubeIndexedJobMesh starts the pods of an Indexed Job as real
// rdmabench mesh processes, each with exactly what the Job controller and
// the pod template (docs/kubernetes.md) give it: JOB_COMPLETION_INDEX,
// HOSTNAME=<job>-<index>, RDMABENCH_WORLD_SIZE and RDMABENCH_SUBDOMAIN,
// no --rendezvous and no MASTER_ADDR. Rank 0's name <job>-0.<subdomain>
// is mapped to 127.0.0.1 by RDMABENCH_RESOLVE, so no name is looked up.
// Each pod is a host of its own on the zero-cost NIC's fabric.
func TestKubeIndexedJobMesh(t *testing.T) {
	if testing.Short() {
		t.Skip("3 real ranks on the fake fabric: a few seconds")
	}
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skip("no C compiler (cc): the zero-cost NIC cannot be built")
	}
	const n, svc = 3, "bench"
	job := fmt.Sprintf("mesh-e2e-%d", os.Getpid()) // a derived port of its own per run
	lib, dir := fakeLib(t), t.TempDir()
	fabric := filepath.Join(dir, "fabric")
	if err := os.WriteFile(fabric, []byte(fabricDefault), 0o644); err != nil {
		t.Fatal(err)
	}
	mr := &meshRun{save: filepath.Join(dir, "mesh.json"), start: time.Now()}
	for i := range n {
		pod := job + "-" + strconv.Itoa(i)
		args := append([]string{"mesh", "--host", pod, "--save", mr.save}, fabricMeshArgs...)
		startCmd(t, mr, os.Args[0], args, []string{
			// The Job controller and the kubelet:
			"JOB_COMPLETION_INDEX=" + strconv.Itoa(i), "HOSTNAME=" + pod,
			// The pod template:
			"RDMABENCH_WORLD_SIZE=" + strconv.Itoa(n), "RDMABENCH_SUBDOMAIN=" + svc, "RDMABENCH_TOKEN=kube-e2e-token",
			// The test: rank 0's name, and each pod's NIC on the fabric.
			"RDMABENCH_RESOLVE=" + job + "-0." + svc + "=127.0.0.1",
			"LD_LIBRARY_PATH=" + lib, "FAKEVERBS_FABRIC=" + fabric, "FAKEVERBS_HOST=" + pod, "FAKEVERBS_NAME=mlx5_0"})
	}
	codes := mr.wait(t, 3*time.Minute)
	m := mr.doc(t)
	checkFullMesh(t, m, n, "Kubernetes Indexed Job", codes[0])
	for r := range n {
		if codes[r] != 0 {
			t.Errorf("rank %d: exit %d: %s", r, codes[r], tail(mr.err[r].String(), 5))
		}
		if want := fmt.Sprintf("%s-%d", job, r); m.Ranks[r].Host != want {
			t.Errorf("rank %d on %q, want %q (JOB_COMPLETION_INDEX is the rank)", r, m.Ranks[r].Host, want)
		}
	}
	if e := mr.err[0].String(); !strings.Contains(e, "derived from JOB_COMPLETION_INDEX, HOSTNAME and RDMABENCH_SUBDOMAIN") {
		t.Errorf("rank 0 does not say where the rendezvous came from:\n%s", tail(e, 20))
	}
}
