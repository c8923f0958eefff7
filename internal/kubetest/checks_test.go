package kubetest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// checkPodEnv resolves each rank's environment from its Pod: status.podIP
// fails until a kubelet (here MarkPodRunning) posted an IP; then the
// variables are what the Job controller and the template set, and the
// real EndpointSlice controller lists the ranks under their Service.
func checkPodEnv(t *testing.T, c *Cluster, pods []pod) {
	for _, p := range pods {
		if p.index(t) == "0" {
			writeCapture(t, p.raw)
		}
		_, err := PodEnv(p.raw)
		if err == nil || !strings.Contains(err.Error(), "status.podIP") {
			t.Errorf("pod %s before it runs: %v, want an error naming status.podIP", p.Metadata.Name, err)
		}
		c.MarkPodRunning(t, "kubetest", p.Metadata.Name, ip(p.rank(t)), "198.18.1.1")
	}
	pods, err := c.pods(t, "job-name=mesh")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		idx := p.index(t)
		podIP := ip(p.rank(t))
		env, err := PodEnv(p.raw)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{"JOB_COMPLETION_INDEX": idx, "HOSTNAME": "mesh-" + idx, "NODE_NAME": p.Spec.NodeName,
			"POD_IP": podIP, "RDMABENCH_WORLD_SIZE": "3", "RDMABENCH_SUBDOMAIN": "mesh"}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("pod %s: %s=%q, want %q (env %v)", p.Metadata.Name, k, env[k], v, env)
			}
		}
		argv, err := PodCommand(p.raw, "rank", nil)
		// $(HOSTNAME) is the runtime's, not the kubelet's: left as written.
		wantArgv := []string{"rdmabench", "mesh", "--listen", podIP + ":7000", "--name", "$(HOSTNAME)"}
		if err != nil || !slices.Equal(argv, wantArgv) {
			t.Errorf("pod %s: command %q (%v), want %q", p.Metadata.Name, argv, err, wantArgv)
		}
	}
	took := c.WaitFor(t, "the mesh Service's EndpointSlice lists 3 ready ranks", time.Minute, func() (bool, error) {
		got, err := endpoints(c, t, "mesh")
		return slices.Equal(got, []string{"mesh-0=198.18.0.10", "mesh-1=198.18.0.11", "mesh-2=198.18.0.12"}), err
	})
	t.Logf("EndpointSlice complete %v after the pods were marked running", took.Round(time.Millisecond))
}

// endpoints is the ready endpoints of service's EndpointSlices as
// sorted "hostname=address" strings.
func endpoints(c *Cluster, t *testing.T, service string) ([]string, error) {
	out, err := c.Kubectl(t, "get", "endpointslices", "--namespace=kubetest",
		"--selector=kubernetes.io/service-name="+service, "-o", "json")
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Endpoints []struct {
				Addresses  []string `json:"addresses"`
				Hostname   string   `json:"hostname"`
				Conditions struct {
					Ready *bool `json:"ready"`
				} `json:"conditions"`
			} `json:"endpoints"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return nil, err
	}
	var got []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				got = append(got, e.Hostname+"="+strings.Join(e.Addresses, ","))
			}
		}
	}
	slices.Sort(got)
	return got, nil
}

// checkDaemonSet waits for the DaemonSet controller's pod on each RDMA
// node; a hostNetwork pod's HOSTNAME is its node's.
func checkDaemonSet(t *testing.T, c *Cluster) {
	var pods []pod
	took := c.WaitFor(t, "a DaemonSet pod bound on each node", time.Minute, func() (bool, error) {
		var err error
		pods, err = c.pods(t, "app=agent")
		return len(pods) == 2 && allBound(pods), err
	})
	t.Logf("DaemonSet pods bound after %v more", took.Round(time.Millisecond))
	var nodes []string
	for _, p := range pods {
		nodes = append(nodes, p.Spec.NodeName)
		env, err := PodEnv(p.raw)
		if err != nil || env["HOSTNAME"] != p.Spec.NodeName {
			t.Errorf("pod %s: HOSTNAME %q (%v), want its node's name %s", p.Metadata.Name, env["HOSTNAME"], err, p.Spec.NodeName)
		}
	}
	slices.Sort(nodes)
	if !slices.Equal(nodes, []string{"node-a", "node-b"}) {
		t.Errorf("DaemonSet pods on %v, want node-a and node-b", nodes)
	}
}

// checkServiceAccount acts as a service account through a TokenRequest
// token: it is who the apiserver says, and can do what its Role allows
// and nothing else.
func checkServiceAccount(t *testing.T, c *Cluster) {
	c.Apply(t, `
apiVersion: v1
kind: ServiceAccount
metadata: {name: reader, namespace: kubetest}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader, namespace: kubetest}
rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: reader, namespace: kubetest}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: ServiceAccount, name: reader, namespace: kubetest}]
`)
	kc := c.ServiceAccountKubeconfig(t, "kubetest", "reader")
	who, err := c.KubectlAs(t, kc, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil || who != "system:serviceaccount:kubetest:reader" {
		t.Errorf("whoami: %q (%v), want system:serviceaccount:kubetest:reader", who, err)
	}
	for _, tc := range []struct {
		verb, resource, want string
	}{
		{"list", "pods", "yes"},
		{"delete", "pods", "no"},
		{"list", "secrets", "no"},
		{"patch", "nodes/status", "no"},
	} {
		// can-i exits 1 for "no": the answer is its output.
		out, _ := c.KubectlAs(t, kc, "auth", "can-i", tc.verb, tc.resource)
		if got := strings.TrimSpace(out); got != tc.want {
			t.Errorf("can-i %s %s: %q, want %q", tc.verb, tc.resource, got, tc.want)
		}
	}
}
