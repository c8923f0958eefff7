// Package launch finds this process's place in a multi-process run from
// the environment an existing launcher sets (Open MPI, Slurm, PMI, torchrun)
// and runs the small TCP rendezvous used instead of MPI. For ncclbench rank
// 0 hands out the NCCL unique id, combines timings and error counts, and
// notices when a process disappears; for rdmabench mesh (KeepGoing) rank 0
// exchanges messages with each process and a lost one is reported alone.
package launch

import (
	"fmt"
	"net"
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
}

type scheme struct {
	name                  string
	rank, size, localRank []string
	// guard must be set for the scheme to apply (Slurm sets SLURM_PROCID in
	// batch scripts too, where there is just one process).
	guard []string
}

var schemes = []scheme{
	{name: "Open MPI", rank: []string{"OMPI_COMM_WORLD_RANK"}, size: []string{"OMPI_COMM_WORLD_SIZE"}, localRank: []string{"OMPI_COMM_WORLD_LOCAL_RANK"}},
	{name: "torchrun", rank: []string{"RANK"}, size: []string{"WORLD_SIZE"}, localRank: []string{"LOCAL_RANK"}},
	{name: "PMI", rank: []string{"PMI_RANK"}, size: []string{"PMI_SIZE"}, localRank: []string{"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
	{name: "Slurm", rank: []string{"SLURM_PROCID"}, size: []string{"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, localRank: []string{"SLURM_LOCALID"}, guard: []string{"SLURM_STEP_ID", "SLURM_STEPID"}},
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
		return Env{Rank: rank, Size: size, LocalRank: local, Source: s.name, LocalKnown: known}, nil
	}
	return Env{Rank: 0, Size: 1, Source: "single process", LocalKnown: true}, nil
}

// RendezvousAddr picks host:port from --rendezvous, or MASTER_ADDR with
// --rdzv-port (rdzvPort > 0) or MASTER_PORT. The hint says where the port
// came from and how to choose another, for when rank 0 cannot listen.
func RendezvousAddr(flag string, rdzvPort int, getenv func(string) string) (addr, hint string, err error) {
	if rdzvPort < 0 || rdzvPort > 65535 {
		return "", "", fmt.Errorf("--rdzv-port %d is not a port", rdzvPort)
	}
	if flag != "" {
		if _, _, err := net.SplitHostPort(flag); err != nil {
			return "", "", fmt.Errorf("--rendezvous %q: want host:port", flag)
		}
		return flag, "the port of --rendezvous is taken: pick a free one", nil
	}
	h, p := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	if h == "" {
		return "", "", fmt.Errorf("several processes need a rendezvous: pass --rendezvous host:port (rank 0's address) or set MASTER_ADDR and MASTER_PORT")
	}
	switch {
	case rdzvPort > 0:
		p, hint = strconv.Itoa(rdzvPort), "--rdzv-port is taken on rank 0's host: pick a free one"
	case p == "":
		p, hint = "29500", "torchrun's default port 29500 is taken: pass --rdzv-port PORT, the same on every process"
	case getenv("TORCHELASTIC_RUN_ID") != "":
		// Under torchrun the agent's own store already listens on
		// MASTER_PORT on rank 0's node: take the next port, if free.
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65534 {
			return "", "", fmt.Errorf("MASTER_PORT=%q is not a port", p)
		}
		p = strconv.Itoa(n + 1)
		hint = fmt.Sprintf("under torchrun the rendezvous uses MASTER_PORT+1 (%s), which is taken: pass --rdzv-port PORT, the same on every process", p)
	default:
		hint = "MASTER_PORT is taken: set another, or pass --rdzv-port PORT"
	}
	return net.JoinHostPort(h, p), hint, nil
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
