package launch

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// Kubernetes: one rank per pod of an Indexed Job (or of a JobSet's
// replicated Job), with no sshd, MPI or wrapper script. The Job controller
// sets JOB_COMPLETION_INDEX and the pod's hostname <job-name>-<index>; the
// kubelet exports the hostname as HOSTNAME. JobSet adds JOBSET_NAME,
// REPLICATED_JOB_NAME, JOB_INDEX and REPLICATED_JOB_REPLICAS, and names its
// pods <jobset>-<replicated-job>-<job-index>-<pod-index>. What no
// controller tells a pod is the number of ranks and the headless Service
// its hostname lives under: the pod template sets them (docs/kubernetes.md).
const (
	// KubeSizeVar is the number of ranks: the Job's .spec.completions, or a
	// JobSet's replicas × completions.
	KubeSizeVar = "RDMABENCH_WORLD_SIZE"
	// KubeSubdomainVar is the pod template's .spec.subdomain, the headless
	// Service that gives each pod a DNS name (JobSet's default: the
	// JobSet's name).
	KubeSubdomainVar = "RDMABENCH_SUBDOMAIN"
	// KubeResolveVar maps rank 0's derived name to an address, NAME=IP,
	// without the name service: for tests and for clusters whose pods
	// cannot resolve each other's names.
	KubeResolveVar = "RDMABENCH_RESOLVE"
)

// kubeJob is what a pod's variables say about its Job.
type kubeJob struct {
	rank, size int
	rank0      string // rank 0's pod hostname
	job        string // the Job's (or JobSet's) name, for the port
	jobset     bool
}

// kubeDetect reads the Indexed Job and JobSet variables. ok is false when
// JOB_COMPLETION_INDEX and RDMABENCH_WORLD_SIZE are both unset: not a
// Kubernetes run. One of them without the other is an error.
func kubeDetect(getenv func(string) string) (kubeJob, bool, error) {
	iv, sv := getenv("JOB_COMPLETION_INDEX"), getenv(KubeSizeVar)
	switch {
	case iv == "" && sv == "":
		return kubeJob{}, false, nil
	case sv == "":
		return kubeJob{}, true, fmt.Errorf("JOB_COMPLETION_INDEX=%s is set (a Kubernetes Indexed Job) but %s is not: set it in the pod template to the number of ranks (the Job's .spec.completions)", iv, KubeSizeVar)
	case iv == "":
		return kubeJob{}, true, fmt.Errorf("%s=%s is set but JOB_COMPLETION_INDEX is not: run as an Indexed Job (completionMode: Indexed)", KubeSizeVar, sv)
	}
	index, err := strconv.Atoi(iv)
	if err != nil || index < 0 {
		return kubeJob{}, true, fmt.Errorf("JOB_COMPLETION_INDEX=%q is not a completion index", iv)
	}
	size, err := strconv.Atoi(sv)
	if err != nil || size < 1 {
		return kubeJob{}, true, fmt.Errorf("%s=%q is not a number of ranks", KubeSizeVar, sv)
	}
	host := getenv("HOSTNAME")
	if i := strings.IndexByte(host, '.'); i > 0 {
		host = host[:i]
	}
	j := kubeJob{rank: index, size: size}
	if js := getenv("JOBSET_NAME"); js != "" || getenv("JOB_INDEX") != "" {
		rj, jiv, rv := getenv("REPLICATED_JOB_NAME"), getenv("JOB_INDEX"), getenv("REPLICATED_JOB_REPLICAS")
		if js == "" || rj == "" || jiv == "" || rv == "" {
			return kubeJob{}, true, fmt.Errorf("JobSet variables incomplete: JOBSET_NAME=%q REPLICATED_JOB_NAME=%q JOB_INDEX=%q REPLICATED_JOB_REPLICAS=%q (JobSet sets all four)", js, rj, jiv, rv)
		}
		jobIndex, err := strconv.Atoi(jiv)
		if err != nil || jobIndex < 0 {
			return kubeJob{}, true, fmt.Errorf("JOB_INDEX=%q is not a job index", jiv)
		}
		replicas, err := strconv.Atoi(rv)
		if err != nil || replicas < 1 {
			return kubeJob{}, true, fmt.Errorf("REPLICATED_JOB_REPLICAS=%q is not a number of jobs", rv)
		}
		if size%replicas != 0 {
			return kubeJob{}, true, fmt.Errorf("%s=%d is not a multiple of REPLICATED_JOB_REPLICAS=%d: set it to replicas × completions", KubeSizeVar, size, replicas)
		}
		perJob := size / replicas
		if index >= perJob || jobIndex >= replicas {
			return kubeJob{}, true, fmt.Errorf("JobSet pod %d of job %d out of range for %d jobs of %d pods (%s=%d)", index, jobIndex, replicas, perJob, KubeSizeVar, size)
		}
		j.rank, j.jobset, j.job = jobIndex*perJob+index, true, js
		j.rank0 = fmt.Sprintf("%s-%s-0-0", js, rj)
		return j, true, nil
	}
	if index >= size {
		return kubeJob{}, true, fmt.Errorf("JOB_COMPLETION_INDEX=%d out of range for %s=%d", index, KubeSizeVar, size)
	}
	suffix := "-" + strconv.Itoa(index)
	if host == "" || !strings.HasSuffix(host, suffix) || len(host) == len(suffix) {
		return kubeJob{}, true, fmt.Errorf("HOSTNAME=%q does not end in -%d: not a pod of an Indexed Job (hostname <job-name>-<index>)", getenv("HOSTNAME"), index)
	}
	j.job = strings.TrimSuffix(host, suffix)
	j.rank0 = j.job + "-0"
	return j, true, nil
}

// kubeRendezvous: rank 0 is the pod with index 0 (JobSet: job 0, index 0),
// named <rank0-hostname>.<subdomain> by the headless Service; the port is
// derived from the Job's name, so that concurrent Jobs on hostNetwork pods
// do not meet on one port.
func kubeRendezvous(getenv func(string) string) (Rendezvous, error) {
	j, _, err := kubeDetect(getenv)
	if err != nil {
		return Rendezvous{}, err
	}
	sub := getenv(KubeSubdomainVar)
	from := fmt.Sprintf("derived from JOB_COMPLETION_INDEX, HOSTNAME and %s", KubeSubdomainVar)
	if j.jobset {
		from = fmt.Sprintf("derived from JOBSET_NAME, REPLICATED_JOB_NAME and %s", KubeSubdomainVar)
		if sub == "" {
			sub, from = getenv("JOBSET_NAME"), "derived from JOBSET_NAME and REPLICATED_JOB_NAME (subdomain: the JobSet's name)"
		}
	}
	if sub == "" {
		return Rendezvous{}, fmt.Errorf("%s is not set: set it in the pod template to the Job's subdomain (the headless Service's name)", KubeSubdomainVar)
	}
	host := j.rank0 + "." + sub
	if m := getenv(KubeResolveVar); m != "" {
		name, ip, ok := strings.Cut(m, "=")
		if !ok || net.ParseIP(ip) == nil {
			return Rendezvous{}, fmt.Errorf("%s=%q: want NAME=IP", KubeResolveVar, m)
		}
		if name == host {
			host, from = ip, from+", "+name+" from "+KubeResolveVar
		}
	}
	port := hashPort(j.job)
	return Rendezvous{
		Addr: net.JoinHostPort(host, strconv.Itoa(port)), From: from,
		Hint: fmt.Sprintf("the port derived from the Job's name %s (%d, in %d-%d) is taken on %s: pass --rdzv-port PORT, the same on every pod", j.job, port, DerivedPortBase, DerivedPortBase+DerivedPorts-1, host),
	}, nil
}
