package kubetest

import (
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// realPod is rank 0 of TestControlPlane's Indexed Job as kube-apiserver
// v1.37.2 returned it (see testdata/README.md): bound by the scheduler,
// never run.
const realPod = "testdata/indexed-job-pod.json"

// podCase changes the real pod, as a test of one rule, and says what
// ContainerEnv must give: the variables in want, or an error holding
// wantErr.
type podCase struct {
	name    string
	edit    func(p map[string]any)
	objects Objects
	want    map[string]string
	absent  []string
	wantErr string
}

func TestContainerEnv(t *testing.T) {
	base, err := os.ReadFile(realPod)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range podCases() {
		t.Run(tc.name, func(t *testing.T) {
			var p map[string]any
			if err := json.Unmarshal(base, &p); err != nil {
				t.Fatal(err)
			}
			tc.edit(p)
			pod, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			env, err := ContainerEnv(pod, "", tc.objects)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one holding %q (env %v)", err, tc.wantErr, env)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got, ok := env[k]; !ok || got != v {
					t.Errorf("%s=%q (set %v), want %q", k, got, ok, v)
				}
			}
			for _, k := range tc.absent {
				if v, ok := env[k]; ok {
					t.Errorf("%s=%q, want it left out", k, v)
				}
			}
		})
	}
}

func TestContainerEnvBadInput(t *testing.T) {
	for _, tc := range []struct{ name, pod, container, wantErr string }{
		{"not JSON", "{", "", "pod:"},
		{"no containers", `{"metadata":{"name":"p"},"spec":{}}`, "", "has no containers"},
		{"no such container", `{"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]}}`, "b", `no container "b"`},
	} {
		if _, err := ContainerEnv([]byte(tc.pod), tc.container, nil); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want an error holding %q", tc.name, err, tc.wantErr)
		}
	}
}

// running is what MarkPodRunning posts.
func running(p map[string]any) {
	st := p["status"].(map[string]any)
	st["podIP"], st["podIPs"] = "198.18.0.10", []any{map[string]any{"ip": "198.18.0.10"}}
	st["hostIP"], st["hostIPs"] = "198.18.1.1", []any{map[string]any{"ip": "198.18.1.1"}, map[string]any{"ip": "fd00::1"}}
}

func spec(p map[string]any) map[string]any { return p["spec"].(map[string]any) }

func container0(p map[string]any) map[string]any {
	return spec(p)["containers"].([]any)[0].(map[string]any)
}

// addEnv appends env entries (as JSON) to the first container's env.
func addEnv(p map[string]any, entries ...string) {
	c := container0(p)
	env, _ := c["env"].([]any)
	for _, e := range entries {
		var v any
		if err := json.Unmarshal([]byte(e), &v); err != nil {
			panic(e + ": " + err.Error())
		}
		env = append(env, v)
	}
	c["env"] = env
}

func both(edits ...func(map[string]any)) func(map[string]any) {
	return func(p map[string]any) {
		for _, e := range edits {
			e(p)
		}
	}
}

// fakeObjects holds one ConfigMap and one Secret in namespace kubetest.
func fakeObjects(kind RefKind, namespace, name string) (map[string]string, bool, error) {
	objs := map[string]map[string]string{
		"ConfigMap/kubetest/settings": {"SIZE": "3", "MODE": "mesh"},
		"Secret/kubetest/token":       {"TOKEN": "s3cret"},
	}
	data, ok := objs[kind.String()+"/"+namespace+"/"+name]
	return maps.Clone(data), ok, nil
}

// The kubelet expands a container's command and arguments from its
// variables, not from the runtime's HOSTNAME.
func TestPodCommand(t *testing.T) {
	base, err := os.ReadFile(realPod)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PodCommand(base, "rank", nil); err == nil || !strings.Contains(err.Error(), "status.podIP") {
		t.Errorf("before the pod runs: %v, want an error naming status.podIP", err)
	}
	var p map[string]any
	if err := json.Unmarshal(base, &p); err != nil {
		t.Fatal(err)
	}
	running(p)
	pod, _ := json.Marshal(p)
	argv, err := PodCommand(pod, "rank", nil)
	want := []string{"rdmabench", "mesh", "--listen", "198.18.0.10:7000", "--name", "$(HOSTNAME)"}
	if err != nil || !slices.Equal(argv, want) {
		t.Errorf("command %q (%v), want %q", argv, err, want)
	}
}
