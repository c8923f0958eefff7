package launch

import (
	"strconv"
	"strings"
	"testing"
)

// TestDetectKube: an Indexed Job's and a JobSet's variables give the rank,
// the size and Launcher Kubernetes; the other launchers keep precedence
// inside a pod; partial or bad variables are one error.
func TestDetectKube(t *testing.T) {
	job := map[string]string{"JOB_COMPLETION_INDEX": "2", "RDMABENCH_WORLD_SIZE": "4", "HOSTNAME": "mesh-2", "RDMABENCH_SUBDOMAIN": "mesh"}
	with := func(m map[string]string, kv ...string) map[string]string {
		o := map[string]string{}
		for k, v := range m {
			o[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(o, kv[i])
			} else {
				o[kv[i]] = kv[i+1]
			}
		}
		return o
	}
	jobset := map[string]string{"JOB_COMPLETION_INDEX": "1", "RDMABENCH_WORLD_SIZE": "6", "HOSTNAME": "bench-workers-2-1",
		"JOBSET_NAME": "bench", "REPLICATED_JOB_NAME": "workers", "JOB_INDEX": "2", "REPLICATED_JOB_REPLICAS": "3"}
	tests := []struct {
		name       string
		env        map[string]string
		rank, size int
		launcher   Launcher
		err        string
	}{
		{"indexed job", job, 2, 4, Kubernetes, ""},
		{"indexed job, rank 0", with(job, "JOB_COMPLETION_INDEX", "0", "HOSTNAME", "mesh-0"), 0, 4, Kubernetes, ""},
		{"jobset: JOB_INDEX*pods-per-job+index", jobset, 5, 6, Kubernetes, ""},
		{"torchrun inside a pod wins", with(job, "RANK", "1", "WORLD_SIZE", "8"), 1, 8, Torchrun, ""},
		{"Open MPI inside a pod wins", with(job, "OMPI_COMM_WORLD_RANK", "3", "OMPI_COMM_WORLD_SIZE", "5"), 3, 5, OpenMPI, ""},
		{"Slurm step inside a pod wins", with(job, "SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_STEP_ID", "0"), 1, 2, Slurm, ""},
		{"none: alone", map[string]string{"HOSTNAME": "x-0"}, 0, 1, Alone, ""},
		{"index without size", with(job, "RDMABENCH_WORLD_SIZE", ""), 0, 0, 0, "JOB_COMPLETION_INDEX=2 is set (a Kubernetes Indexed Job) but RDMABENCH_WORLD_SIZE is not"},
		{"size without index", with(job, "JOB_COMPLETION_INDEX", ""), 0, 0, 0, "RDMABENCH_WORLD_SIZE=4 is set but JOB_COMPLETION_INDEX is not"},
		{"index not a number", with(job, "JOB_COMPLETION_INDEX", "x"), 0, 0, 0, `JOB_COMPLETION_INDEX="x" is not a completion index`},
		{"size not a number", with(job, "RDMABENCH_WORLD_SIZE", "0"), 0, 0, 0, `RDMABENCH_WORLD_SIZE="0" is not a number of ranks`},
		{"index out of range", with(job, "JOB_COMPLETION_INDEX", "4", "HOSTNAME", "mesh-4"), 0, 0, 0, "JOB_COMPLETION_INDEX=4 out of range for RDMABENCH_WORLD_SIZE=4"},
		{"hostname not <job>-<index>", with(job, "HOSTNAME", "mesh-7"), 0, 0, 0, `HOSTNAME="mesh-7" does not end in -2`},
		{"no hostname", with(job, "HOSTNAME", ""), 0, 0, 0, `HOSTNAME="" does not end in -2`},
		{"jobset partial", with(jobset, "REPLICATED_JOB_REPLICAS", ""), 0, 0, 0, "JobSet variables incomplete"},
		{"jobset JOB_INDEX alone", with(job, "JOB_INDEX", "0"), 0, 0, 0, "JobSet variables incomplete"},
		{"jobset size not a multiple", with(jobset, "RDMABENCH_WORLD_SIZE", "7"), 0, 0, 0, "RDMABENCH_WORLD_SIZE=7 is not a multiple of REPLICATED_JOB_REPLICAS=3"},
		{"jobset index out of range", with(jobset, "JOB_COMPLETION_INDEX", "2"), 0, 0, 0, "JobSet pod 2 of job 2 out of range for 3 jobs of 2 pods"},
	}
	for _, tt := range tests {
		e, err := Detect(envOf(tt.env))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if e.Rank != tt.rank || e.Size != tt.size || e.Launcher != tt.launcher {
			t.Errorf("%s: rank %d size %d launcher %d, want %d %d %d", tt.name, e.Rank, e.Size, e.Launcher, tt.rank, tt.size, tt.launcher)
		}
		if e.Launcher == Kubernetes && e.LocalKnown {
			t.Errorf("%s: local rank known; want it from the hosts at the rendezvous", tt.name)
		}
	}
}

// TestFindRendezvousKube: rank 0 is pod 0 under the headless Service, the
// port comes from the Job's name, --rendezvous, MASTER_ADDR and
// --rdzv-port still win, and RDMABENCH_RESOLVE maps the name alone.
func TestFindRendezvousKube(t *testing.T) {
	job := map[string]string{"JOB_COMPLETION_INDEX": "3", "RDMABENCH_WORLD_SIZE": "4", "HOSTNAME": "nccl-a-3", "RDMABENCH_SUBDOMAIN": "svc"}
	jobset := map[string]string{"JOB_COMPLETION_INDEX": "0", "RDMABENCH_WORLD_SIZE": "4", "HOSTNAME": "js-w-1-0",
		"JOBSET_NAME": "js", "REPLICATED_JOB_NAME": "w", "JOB_INDEX": "1", "REPLICATED_JOB_REPLICAS": "2"}
	port := func(job string) string { return strconv.Itoa(hashPort(job)) }
	copyWith := func(m map[string]string, k, v string) map[string]string {
		o := map[string]string{k: v}
		for a, b := range m {
			if a != k {
				o[a] = b
			}
		}
		if v == "" {
			delete(o, k)
		}
		return o
	}
	tests := []struct {
		name, flag string
		rdzvPort   int
		env        map[string]string
		want, err  string
	}{
		{"indexed job", "", 0, job, "nccl-a-0.svc:" + port("nccl-a"), ""},
		{"HOSTNAME as FQDN", "", 0, copyWith(job, "HOSTNAME", "nccl-a-3.svc.ns.svc.cluster.local"), "nccl-a-0.svc:" + port("nccl-a"), ""},
		{"--rdzv-port", "", 29400, job, "nccl-a-0.svc:29400", ""},
		{"--rendezvous wins", "10.0.0.1:1234", 0, job, "10.0.0.1:1234", ""},
		{"MASTER_ADDR wins", "", 0, copyWith(job, "MASTER_ADDR", "h0"), "h0:29500", ""},
		{"jobset: subdomain defaults to the JobSet's name", "", 0, jobset, "js-w-0-0.js:" + port("js"), ""},
		{"jobset: subdomain set", "", 0, copyWith(jobset, "RDMABENCH_SUBDOMAIN", "net"), "js-w-0-0.net:" + port("js"), ""},
		{"RDMABENCH_RESOLVE", "", 0, copyWith(job, "RDMABENCH_RESOLVE", "nccl-a-0.svc=127.0.0.1"), "127.0.0.1:" + port("nccl-a"), ""},
		{"RDMABENCH_RESOLVE for another name", "", 0, copyWith(job, "RDMABENCH_RESOLVE", "other=127.0.0.1"), "nccl-a-0.svc:" + port("nccl-a"), ""},
		{"RDMABENCH_RESOLVE bad", "", 0, copyWith(job, "RDMABENCH_RESOLVE", "nccl-a-0.svc"), "", `RDMABENCH_RESOLVE="nccl-a-0.svc": want NAME=IP`},
		{"no subdomain", "", 0, copyWith(job, "RDMABENCH_SUBDOMAIN", ""), "", "RDMABENCH_SUBDOMAIN is not set"},
	}
	for _, tt := range tests {
		e, err := Detect(envOf(tt.env))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		r, err := FindRendezvous(tt.flag, tt.rdzvPort, e, envOf(tt.env))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || r.Addr != tt.want {
			t.Errorf("%s: %q (%s) %v, want %q", tt.name, r.Addr, r.From, err, tt.want)
		}
	}
}
