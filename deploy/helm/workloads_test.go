package helm

import (
	"fmt"
	"reflect"
	"slices"
	"testing"
)

// container is the pod template's first container of a workload.
func container(o object) any {
	spec := get(o, "spec", "template", "spec")
	if o["kind"] == "JobSet" {
		spec = get(o, "spec", "replicatedJobs", 0, "template", "spec", "template", "spec")
	}
	return get(spec, "containers", 0)
}

// env reads a container's variables: a value as itself, a reference as
// "fieldRef:PATH" or "secret:NAME/KEY".
func env(c any) map[string]string {
	m := map[string]string{}
	l, _ := get(c, "env").([]any)
	for _, e := range l {
		name := fmt.Sprint(get(e, "name"))
		switch {
		case get(e, "value") != nil:
			m[name] = fmt.Sprint(get(e, "value"))
		case get(e, "valueFrom", "fieldRef") != nil:
			m[name] = "fieldRef:" + fmt.Sprint(get(e, "valueFrom", "fieldRef", "fieldPath"))
		case get(e, "valueFrom", "secretKeyRef") != nil:
			m[name] = fmt.Sprintf("secret:%v/%v", get(e, "valueFrom", "secretKeyRef", "name"), get(e, "valueFrom", "secretKeyRef", "key"))
		}
	}
	return m
}

func strs(v any) []string {
	l, _ := v.([]any)
	s := make([]string, len(l))
	for i, x := range l {
		s[i] = fmt.Sprint(x)
	}
	return s
}

// The agent finds its peers from its own Service's EndpointSlices, at the
// port named metrics, listening on the node's address that they list.
func TestAgentDaemonSet(t *testing.T) {
	objs := render(t, "agent.port=9555", "agent.extraArgs={--rate,20}")
	ds := find(t, objs, "DaemonSet", "rb-rdmabench-agent")
	svc := find(t, objs, "Service", "rb-rdmabench-agent")
	c := container(ds)
	want := []string{"agent", "--listen", "$(POD_IP):9555", "--kube-service", "rb-rdmabench-agent",
		"--kube-port-name", "metrics", "--token-file", "/etc/rdmabench/token", "--rate", "20"}
	if have := strs(get(c, "args")); !slices.Equal(have, want) {
		t.Errorf("args %q, want %q", have, want)
	}
	if p := get(svc, "spec", "ports", 0); get(p, "name") != "metrics" || get(p, "port") != 9555.0 {
		t.Errorf("Service port %v, want metrics 9555", p)
	}
	if get(svc, "spec", "clusterIP") != "None" || !reflect.DeepEqual(get(svc, "spec", "selector"), get(ds, "spec", "selector", "matchLabels")) {
		t.Errorf("Service %v: want headless, selecting the DaemonSet's pods", get(svc, "spec"))
	}
	wantEnv := map[string]string{"POD_IP": "fieldRef:status.podIP", "POD_NAMESPACE": "fieldRef:metadata.namespace", "NODE_NAME": "fieldRef:spec.nodeName"}
	if have := env(c); !reflect.DeepEqual(have, wantEnv) {
		t.Errorf("env %v, want %v", have, wantEnv)
	}
	pod := get(ds, "spec", "template", "spec")
	if get(pod, "hostNetwork") != true || get(pod, "dnsPolicy") != "ClusterFirstWithHostNet" || get(pod, "serviceAccountName") != "rb-rdmabench-agent" {
		t.Errorf("pod spec %v: want hostNetwork, ClusterFirstWithHostNet, its service account", pod)
	}
	if get(pod, "volumes", 0, "secret", "secretName") != "rb-rdmabench-token" {
		t.Errorf("token volume %v", get(pod, "volumes"))
	}
	role := find(t, objs, "Role", "rb-rdmabench-agent")
	wantRules := []any{map[string]any{"apiGroups": []any{"discovery.k8s.io"}, "resources": []any{"endpointslices"}, "verbs": []any{"list", "watch"}}}
	if !reflect.DeepEqual(role["rules"], wantRules) {
		t.Errorf("agent Role rules %v, want %v", role["rules"], wantRules)
	}
}

// health's ClusterRole allows exactly what --node-condition needs, and
// nodes patch only with --taint; its pods tolerate the taint they set.
func TestHealthRBAC(t *testing.T) {
	rule := func(res, verb string) any {
		return map[string]any{"apiGroups": []any{""}, "resources": []any{res}, "verbs": []any{verb}}
	}
	for _, taint := range []bool{false, true} {
		objs := render(t, fmt.Sprintf("health.taint=%v", taint), "health.every=90s")
		want := []any{rule("nodes", "get"), rule("nodes/status", "patch")}
		wantArgs := []string{"health", "--node-condition", "--every", "90s"}
		if taint {
			want = append(want, rule("nodes", "patch"))
			wantArgs = append(wantArgs, "--taint")
		}
		cr := find(t, objs, "ClusterRole", "fabric-rb-rdmabench-health")
		if !reflect.DeepEqual(cr["rules"], want) {
			t.Errorf("taint %v: ClusterRole rules %v, want %v", taint, cr["rules"], want)
		}
		crb := find(t, objs, "ClusterRoleBinding", "fabric-rb-rdmabench-health")
		if get(crb, "subjects", 0, "name") != "rb-rdmabench-health" || get(crb, "subjects", 0, "namespace") != "fabric" || get(crb, "roleRef", "name") != "fabric-rb-rdmabench-health" {
			t.Errorf("ClusterRoleBinding %v", crb)
		}
		ds := find(t, objs, "DaemonSet", "rb-rdmabench-health")
		c := container(ds)
		if have := strs(get(c, "args")); !slices.Equal(have, wantArgs) {
			t.Errorf("taint %v: args %q, want %q", taint, have, wantArgs)
		}
		if have := env(c); !reflect.DeepEqual(have, map[string]string{"NODE_NAME": "fieldRef:spec.nodeName"}) {
			t.Errorf("health env %v", have)
		}
		tol := get(ds, "spec", "template", "spec", "tolerations", 0)
		if get(tol, "key") != "rdmabench.io/rdma-unhealthy" || get(tol, "effect") != "NoSchedule" {
			t.Errorf("health tolerations %v: want its own taint tolerated", tol)
		}
	}
}

// The RDMA devices: the device plugin's resource as request and limit
// (beside a section's own resources), none, or privileged.
func TestRDMAAccess(t *testing.T) {
	capLock := map[string]any{"capabilities": map[string]any{"add": []any{"IPC_LOCK"}}}
	both := func(name, n string) map[string]any {
		return map[string]any{"requests": map[string]any{name: n}, "limits": map[string]any{name: n}}
	}
	withMemory := both("rdma/hca", "2")
	withMemory["limits"].(map[string]any)["memory"] = "1Gi"
	cases := []struct {
		sets            []string
		agent, health   any
		securityContext any
	}{
		{nil, both("rdma/rdma_shared_device_a", "1"), both("rdma/rdma_shared_device_a", "1"), capLock},
		{[]string{"rdma.resourceName=rdma/hca", "rdma.resourceCount=2", "health.resources.limits.memory=1Gi"},
			both("rdma/hca", "2"), withMemory, capLock},
		{[]string{"rdma.resourceName=", "rdma.privileged=true"}, nil, nil, map[string]any{"privileged": true}},
	}
	for _, c := range cases {
		objs := render(t, c.sets...)
		for name, want := range map[string]any{"rb-rdmabench-agent": c.agent, "rb-rdmabench-health": c.health} {
			ct := container(find(t, objs, "DaemonSet", name))
			if res := get(ct, "resources"); !reflect.DeepEqual(res, want) {
				t.Errorf("--set %v: %s resources %v, want %v", c.sets, name, res, want)
			}
			if sc := get(ct, "securityContext"); !reflect.DeepEqual(sc, c.securityContext) {
				t.Errorf("--set %v: %s securityContext %v, want %v", c.sets, name, sc, c.securityContext)
			}
		}
	}
}
