// Package launch finds this process's place in a multi-process run from
// the environment an existing launcher sets (Open MPI, Slurm, PMI, torchrun,
// a Kubernetes Indexed Job or JobSet)
// and runs the small TCP rendezvous used instead of MPI. For ncclbench rank
// 0 hands out the NCCL unique id, combines timings and error counts, and
// notices when a process disappears; for rdmabench mesh (KeepGoing) rank 0
// exchanges messages with each process and a lost one is reported alone.
package launch

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Env is this process's rank among the processes of the run.
type Env struct {
	Rank, Size, LocalRank int
	Source                string // which launcher's variables were used
	// LocalKnown is false when the launcher gave no local rank (PMI from
	// older launchers): derive it from the hosts at the rendezvous.
	LocalKnown bool
	Launcher   Launcher
}

// Launcher is the launcher whose variables gave the ranks.
type Launcher int

const (
	Alone Launcher = iota
	OpenMPI
	Torchrun
	PMI
	Slurm
	Kubernetes // an Indexed Job or a JobSet (kube.go)
)

type scheme struct {
	name                  string
	launcher              Launcher
	rank, size, localRank []string
	// guard must be set for the scheme to apply (Slurm sets SLURM_PROCID in
	// batch scripts too, where there is just one process).
	guard []string
}

var schemes = []scheme{
	{name: "Open MPI", launcher: OpenMPI, rank: []string{"OMPI_COMM_WORLD_RANK"}, size: []string{"OMPI_COMM_WORLD_SIZE"}, localRank: []string{"OMPI_COMM_WORLD_LOCAL_RANK"}},
	{name: "torchrun", launcher: Torchrun, rank: []string{"RANK"}, size: []string{"WORLD_SIZE"}, localRank: []string{"LOCAL_RANK"}},
	{name: "PMI", launcher: PMI, rank: []string{"PMI_RANK"}, size: []string{"PMI_SIZE"}, localRank: []string{"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
	{name: "Slurm", launcher: Slurm, rank: []string{"SLURM_PROCID"}, size: []string{"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, localRank: []string{"SLURM_LOCALID"}, guard: []string{"SLURM_STEP_ID", "SLURM_STEPID"}},
}

func first(getenv func(string) string, names []string) (string, string) {
	for _, n := range names {
		if v := getenv(n); v != "" {
			return n, v
		}
	}
	return "", ""
}

// Detect reads the launcher variables. With none set the process is alone:
// rank 0 of 1.
func Detect(getenv func(string) string) (Env, error) {
	for _, s := range schemes {
		rn, rv := first(getenv, s.rank)
		sn, sv := first(getenv, s.size)
		if rv == "" || sv == "" {
			continue
		}
		if len(s.guard) > 0 {
			if g, _ := first(getenv, s.guard); g == "" {
				continue
			}
		}
		rank, err := strconv.Atoi(rv)
		if err != nil {
			return Env{}, fmt.Errorf("%s=%q is not a number", rn, rv)
		}
		size, err := strconv.Atoi(sv)
		if err != nil {
			return Env{}, fmt.Errorf("%s=%q is not a number", sn, sv)
		}
		if size < 1 || rank < 0 || rank >= size {
			return Env{}, fmt.Errorf("%s rank %d out of range for size %d", s.name, rank, size)
		}
		local, known := 0, size == 1
		if ln, lv := first(getenv, s.localRank); lv != "" {
			if local, err = strconv.Atoi(lv); err != nil || local < 0 {
				return Env{}, fmt.Errorf("%s=%q is not a valid local rank", ln, lv)
			}
			known = true
		}
		return Env{Rank: rank, Size: size, LocalRank: local, Source: s.name, LocalKnown: known, Launcher: s.launcher}, nil
	}
	// Kubernetes last: its variables stay in a pod's environment whatever
	// launcher runs inside it.
	if j, ok, err := kubeDetect(getenv); err != nil {
		return Env{}, err
	} else if ok {
		src := "Kubernetes Indexed Job"
		if j.jobset {
			src = "Kubernetes JobSet"
		}
		// One rank per pod; pods on one node (hostNetwork) share it,
		// which the rendezvous works out from the hosts.
		return Env{Rank: j.rank, Size: j.size, Source: src, LocalKnown: j.size == 1, Launcher: Kubernetes}, nil
	}
	return Env{Rank: 0, Size: 1, Source: "single process", LocalKnown: true}, nil
}

// ShortHostname is this host's name without its domain: what a launcher's
// node lists and the reports show.
func ShortHostname() string {
	host, _ := os.Hostname()
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	return host
}
