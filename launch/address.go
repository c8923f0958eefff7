package launch

import (
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"strings"
)

// Rendezvous is where the processes of a run meet (rank 0's address) and
// how that was decided.
type Rendezvous struct {
	Addr string // host:port
	// From says where Addr came from, for the header ("--rendezvous",
	// "derived from SLURM_STEP_NODELIST and SLURM_JOB_ID", ...).
	From string
	// Derived is true when no one named the address: it was worked out
	// from the launcher's variables.
	Derived bool
	// Hint says where the port came from and how to choose another, for
	// when rank 0 cannot listen.
	Hint string
}

// Ports derived from a job's identity lie in [DerivedPortBase,
// DerivedPortBase+DerivedPorts): below Linux's ephemeral range (32768 and
// up), so an outgoing connection never holds one by chance.
const (
	DerivedPortBase = 20000
	DerivedPorts    = 10000
)

// slurmPort is the rendezvous port of a Slurm step: DerivedPortBase +
// (job id × 10 + step id mod 10) mod DerivedPorts. Consecutive jobs land 10
// ports apart, and up to ten concurrent steps of one job apart from each
// other.
func slurmPort(job, step uint64) int {
	return DerivedPortBase + int((job*10+step%10)%DerivedPorts)
}

// hashPort maps a job's name (Open MPI's job id or PMIx namespace) into the
// derived range.
func hashPort(job string) int {
	h := fnv.New32a()
	h.Write([]byte(job))
	return DerivedPortBase + int(h.Sum32()%DerivedPorts)
}

// FindRendezvous picks rank 0's host:port, in this order: --rendezvous;
// MASTER_ADDR with --rdzv-port (rdzvPort > 0) or MASTER_PORT (torchrun
// sets both); under Slurm (srun), the first node of the step's node list
// and a port from the job id; under Open MPI with every process on one
// host, 127.0.0.1 and a port from the job id; in a Kubernetes Indexed Job
// or JobSet, pod 0's name under the headless Service and a port from the
// Job's name. --rdzv-port replaces a derived port.
func FindRendezvous(flag string, rdzvPort int, env Env, getenv func(string) string) (Rendezvous, error) {
	if rdzvPort < 0 || rdzvPort > 65535 {
		return Rendezvous{}, fmt.Errorf("--rdzv-port %d is not a port", rdzvPort)
	}
	if flag != "" {
		if _, _, err := net.SplitHostPort(flag); err != nil {
			return Rendezvous{}, fmt.Errorf("--rendezvous %q: want host:port", flag)
		}
		return Rendezvous{Addr: flag, From: "from --rendezvous", Hint: "the port of --rendezvous is taken: pick a free one"}, nil
	}
	if getenv("MASTER_ADDR") != "" {
		return masterAddr(rdzvPort, getenv)
	}
	var (
		r   Rendezvous
		err error
	)
	switch env.Launcher {
	case Slurm:
		r, err = slurmRendezvous(env, getenv)
	case OpenMPI:
		r, err = ompiRendezvous(env, getenv)
	case Kubernetes:
		r, err = kubeRendezvous(getenv)
	default:
		err = fmt.Errorf("%s gives no address", env.Source)
	}
	if err != nil {
		return Rendezvous{}, fmt.Errorf("several processes need a rendezvous: pass --rendezvous host:port (rank 0's address) or set MASTER_ADDR and MASTER_PORT (%v)", err)
	}
	if rdzvPort > 0 {
		host, _, _ := net.SplitHostPort(r.Addr)
		r.Addr = net.JoinHostPort(host, strconv.Itoa(rdzvPort))
		r.From += ", port from --rdzv-port"
		r.Hint = "--rdzv-port is taken on rank 0's host: pick a free one"
	}
	r.Derived = true
	return r, nil
}

func masterAddr(rdzvPort int, getenv func(string) string) (Rendezvous, error) {
	h, p := getenv("MASTER_ADDR"), getenv("MASTER_PORT")
	r := Rendezvous{From: "from MASTER_ADDR and MASTER_PORT"}
	switch {
	case rdzvPort > 0:
		p, r.From, r.Hint = strconv.Itoa(rdzvPort), "from MASTER_ADDR and --rdzv-port", "--rdzv-port is taken on rank 0's host: pick a free one"
	case p == "":
		p, r.From, r.Hint = "29500", "from MASTER_ADDR and torchrun's default port", "torchrun's default port 29500 is taken: pass --rdzv-port PORT, the same on every process"
	case getenv("TORCHELASTIC_RUN_ID") != "":
		// Under torchrun the agent's own store already listens on
		// MASTER_PORT on rank 0's node: take the next port, if free.
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65534 {
			return Rendezvous{}, fmt.Errorf("MASTER_PORT=%q is not a port", p)
		}
		p = strconv.Itoa(n + 1)
		r.From = "from MASTER_ADDR and MASTER_PORT+1 (torchrun's store holds MASTER_PORT)"
		r.Hint = fmt.Sprintf("under torchrun the rendezvous uses MASTER_PORT+1 (%s), which is taken: pass --rdzv-port PORT, the same on every process", p)
	default:
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			// Not a port: said now, not by every rank at its rendezvous
			// timeout.
			return Rendezvous{}, fmt.Errorf("MASTER_PORT=%q is not a port (1..65535)", p)
		}
		r.Hint = "MASTER_PORT is taken: set another, or pass --rdzv-port PORT"
	}
	r.Addr = net.JoinHostPort(h, p)
	return r, nil
}

// slurmRendezvous: srun starts task 0 on the first node of the step's node
// list (block and cyclic distributions alike), so rank 0 is there; a step
// on one node meets on the loopback, which needs no name service. Rank 0
// checks that it is on that node (SLURMD_NODENAME, which srun sets, is
// the node list's name for it; the host name may differ), so that a
// different placement fails at once, in one line, instead of at the
// others' timeout.
func slurmRendezvous(env Env, getenv func(string) string) (Rendezvous, error) {
	listVar, list := first(getenv, []string{"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"})
	if list == "" {
		return Rendezvous{}, fmt.Errorf("Slurm set no SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST")
	}
	jobVar, jobS := first(getenv, []string{"SLURM_JOB_ID", "SLURM_JOBID"})
	job, err := strconv.ParseUint(jobS, 10, 64)
	if err != nil {
		return Rendezvous{}, fmt.Errorf("SLURM_JOB_ID=%q is not a job id", jobS)
	}
	_, stepS := first(getenv, []string{"SLURM_STEP_ID", "SLURM_STEPID"})
	step, _ := strconv.ParseUint(stepS, 10, 64) // a batch or interactive step's id is not a number: 0
	host, err := FirstHost(list)
	if err != nil {
		return Rendezvous{}, fmt.Errorf("%s: %v", listVar, err)
	}
	port := slurmPort(job, step)
	from := fmt.Sprintf("derived from %s and %s", listVar, jobVar)
	if _, nodes := first(getenv, []string{"SLURM_STEP_NUM_NODES"}); nodes == "1" {
		host, from = "127.0.0.1", fmt.Sprintf("derived from SLURM_STEP_NUM_NODES=1 and %s", jobVar)
	} else if self := getenv("SLURMD_NODENAME"); env.Rank == 0 && self != "" && !sameHost(self, host) {
		return Rendezvous{}, fmt.Errorf("rank 0 runs on %s, not on %s, the first node of %s", self, host, listVar)
	}
	return Rendezvous{
		Addr: net.JoinHostPort(host, strconv.Itoa(port)), From: from,
		Hint: fmt.Sprintf("the port derived from %s (%d, in %d-%d) is taken on %s: pass --rdzv-port PORT, the same on every process", jobVar, port, DerivedPortBase, DerivedPortBase+DerivedPorts-1, host),
	}, nil
}

// ompiRendezvous: with every process on this host, rank 0 is on this host.
// Open MPI does not tell a process which host rank 0 is on.
func ompiRendezvous(env Env, getenv func(string) string) (Rendezvous, error) {
	ls := getenv("OMPI_COMM_WORLD_LOCAL_SIZE")
	local, err := strconv.Atoi(ls)
	if err != nil {
		return Rendezvous{}, fmt.Errorf("Open MPI set no OMPI_COMM_WORLD_LOCAL_SIZE")
	}
	if local != env.Size {
		return Rendezvous{}, fmt.Errorf("Open MPI runs %d of the %d processes on this host and does not say which host rank 0 is on", local, env.Size)
	}
	jobVar, job := first(getenv, []string{"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"})
	if job == "" {
		return Rendezvous{}, fmt.Errorf("Open MPI set no PMIX_NAMESPACE nor OMPI_MCA_ess_base_jobid to derive a port from")
	}
	port := hashPort(job)
	return Rendezvous{
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		From: fmt.Sprintf("derived from OMPI_COMM_WORLD_LOCAL_SIZE=%d (one host) and %s", local, jobVar),
		Hint: fmt.Sprintf("the port derived from %s (%d, in %d-%d) is taken: pass --rdzv-port PORT, the same on every process", jobVar, port, DerivedPortBase, DerivedPortBase+DerivedPorts-1),
	}, nil
}

// sameHost compares host names without their domains.
func sameHost(a, b string) bool {
	short := func(s string) string {
		if i := strings.IndexByte(s, '.'); i > 0 {
			return s[:i]
		}
		return s
	}
	return strings.EqualFold(short(a), short(b))
}
