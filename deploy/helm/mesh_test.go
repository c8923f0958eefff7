package helm

import (
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The Indexed Job: every rank at once, never retried, under a headless
// Service that publishes each pod's name before it is Ready, with the
// variables launch/kube.go reads (docs/kubernetes.md).
func TestMeshIndexedJob(t *testing.T) {
	objs := render(t, "mesh.enabled=true", "mesh.size=6", "mesh.extraArgs={--save,/out/m.json}")
	job := find(t, objs, "Job", "rb-rdmabench-mesh")
	svc := find(t, objs, "Service", "rb-rdmabench-mesh")
	spec := job["spec"]
	for k, want := range map[string]any{"completionMode": "Indexed", "completions": 6.0, "parallelism": 6.0, "backoffLimit": 0.0} {
		if have := get(spec, k); have != want {
			t.Errorf("Job spec.%s = %v, want %v", k, have, want)
		}
	}
	pod := get(spec, "template", "spec")
	if get(pod, "subdomain") != "rb-rdmabench-mesh" || get(pod, "hostNetwork") != true ||
		get(pod, "dnsPolicy") != "ClusterFirstWithHostNet" || get(pod, "restartPolicy") != "Never" ||
		get(pod, "automountServiceAccountToken") != false {
		t.Errorf("pod spec %v", pod)
	}
	want := map[string]any{"clusterIP": "None", "publishNotReadyAddresses": true,
		"selector": map[string]any{"job-name": "rb-rdmabench-mesh"}}
	for k, v := range want {
		if have := get(svc, "spec", k); !reflect.DeepEqual(have, v) {
			t.Errorf("Service spec.%s = %v, want %v", k, have, v)
		}
	}
	c := container(job)
	wantEnv := map[string]string{
		"JOB_COMPLETION_INDEX": "fieldRef:metadata.annotations['batch.kubernetes.io/job-completion-index']",
		// hostNetwork pods get the node's hostname: the rank's own is set.
		"HOSTNAME":             "rb-rdmabench-mesh-$(JOB_COMPLETION_INDEX)",
		"RDMABENCH_WORLD_SIZE": "6",
		"RDMABENCH_SUBDOMAIN":  "rb-rdmabench-mesh",
		"RDMABENCH_TOKEN":      "secret:rb-rdmabench-token/token",
	}
	if have := env(c); !reflect.DeepEqual(have, wantEnv) {
		t.Errorf("env %v\nwant %v", have, wantEnv)
	}
	// $(JOB_COMPLETION_INDEX) expands only from a variable listed before it.
	var order []string
	for _, e := range get(c, "env").([]any) {
		order = append(order, get(e, "name").(string))
	}
	if slices.Index(order, "JOB_COMPLETION_INDEX") > slices.Index(order, "HOSTNAME") {
		t.Errorf("env order %v: JOB_COMPLETION_INDEX must come before HOSTNAME", order)
	}
	if have := strs(get(c, "args")); !slices.Equal(have, []string{"mesh", "--save", "/out/m.json"}) {
		t.Errorf("args %q", have)
	}
}

// The JobSet: replicas Jobs of size/replicas pods, the world size the
// whole set's.
func TestMeshJobSet(t *testing.T) {
	objs := render(t, "mesh.enabled=true", "mesh.jobset.enabled=true", "mesh.size=8", "mesh.jobset.replicas=4")
	js := find(t, objs, "JobSet", "rb-rdmabench-mesh")
	if js["apiVersion"] != "jobset.x-k8s.io/v1alpha2" || get(js, "spec", "network", "enableDNSHostnames") != true {
		t.Errorf("JobSet %v", js)
	}
	rj := get(js, "spec", "replicatedJobs", 0)
	if get(rj, "replicas") != 4.0 {
		t.Errorf("replicas %v, want 4", get(rj, "replicas"))
	}
	jspec := get(rj, "template", "spec")
	for k, want := range map[string]any{"completionMode": "Indexed", "completions": 2.0, "parallelism": 2.0, "backoffLimit": 0.0} {
		if have := get(jspec, k); have != want {
			t.Errorf("Job template spec.%s = %v, want %v", k, have, want)
		}
	}
	wantEnv := map[string]string{"RDMABENCH_WORLD_SIZE": "8", "RDMABENCH_SUBDOMAIN": "rb-rdmabench-mesh",
		"RDMABENCH_TOKEN": "secret:rb-rdmabench-token/token"}
	if have := env(container(js)); !reflect.DeepEqual(have, wantEnv) {
		t.Errorf("env %v\nwant %v", have, wantEnv)
	}
}

// deploy/examples/mpijob.yaml: mpirun starts as many ranks as the
// workers have slots, and --rendezvous names the first worker by the
// operator's Service, named after the MPIJob.
func TestMPIJobExample(t *testing.T) {
	b, err := os.ReadFile("../examples/mpijob.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs := yamlDocs(t, string(b))
	if len(docs) != 1 || docs[0]["kind"] != "MPIJob" || docs[0]["apiVersion"] != "kubeflow.org/v2beta1" {
		t.Fatalf("want one kubeflow.org/v2beta1 MPIJob, have %v", kinds(docs))
	}
	m := docs[0]
	name := get(m, "metadata", "name").(string)
	replicas, _ := get(m, "spec", "mpiReplicaSpecs", "Worker", "replicas").(float64)
	slots, _ := get(m, "spec", "slotsPerWorker").(float64)
	cmd := strs(get(m, "spec", "mpiReplicaSpecs", "Launcher", "template", "spec", "containers", 0, "command"))
	np := slices.Index(cmd, "-np")
	if np < 0 || np+1 >= len(cmd) || cmd[np+1] != strconv.Itoa(int(replicas*slots)) {
		t.Errorf("command %q: want -np %v (workers × slots)", cmd, replicas*slots)
	}
	mesh := slices.Index(cmd, "mesh")
	if mesh < 1 || cmd[mesh-1] != "rdmabench" || !slices.Contains(cmd, "RDMABENCH_TOKEN") {
		t.Errorf("command %q: want rdmabench mesh, the token passed on with -x", cmd)
	}
	r := slices.Index(cmd, "--rendezvous")
	if r < 0 || r+1 >= len(cmd) || !strings.HasPrefix(cmd[r+1], name+"-worker-0."+name+":") {
		t.Errorf("command %q: want --rendezvous %s-worker-0.%s:PORT", cmd, name, name)
	}
}
