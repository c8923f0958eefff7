package kubetest

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestKubeletRunsPod has the real kubelet run a hostNetwork pod of an
// image made here from the host's env, and reads its log through the API
// server: the variable the pod spec sets, and the service link the
// kubelet adds.
func TestKubeletRunsPod(t *testing.T) {
	if testing.Short() {
		t.Skip("a control plane, containerd and a kubelet: about a minute")
	}
	c := Start(t)
	start := time.Now()
	c.StartKubelet(t, "localhost")
	env, err := exec.LookPath("env")
	if err != nil {
		t.Fatal(err)
	}
	files := BinaryFiles(t, env, "/env")
	c.ImportImage(t, "kubetest.local/env:1", files, Image{Entrypoint: []string{"/env"}, Env: []string{LibraryPath(files)}})
	c.Apply(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "env", "namespace": "default"},
 "spec": {"hostNetwork": true, "restartPolicy": "Never", "containers": [{"name": "env",
  "image": "kubetest.local/env:1", "imagePullPolicy": "Never",
  "env": [{"name": "KUBETEST_NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}}`)
	took := c.WaitFor(t, "pod env Succeeded", 90*time.Second, func() (bool, error) {
		out, err := c.Kubectl(t, "get", "pod", "env", "-o", "jsonpath={.status.phase}")
		if out == "Failed" {
			return false, fmt.Errorf("pod env Failed")
		}
		return out == "Succeeded", err
	})
	logs, err := c.Kubectl(t, "logs", "env")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubelet up and pod done in %v (pod: %v)", time.Since(start).Round(time.Millisecond), took.Round(time.Millisecond))
	for _, want := range []string{"KUBETEST_NODE=localhost\n", "KUBERNETES_SERVICE_HOST=198.19.0.1\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the pod's log has no %q:\n%s", want, logs)
		}
	}
}

// TestKubeletSkipsWithoutRuntime: a host without containerd gets one
// line naming what installs it.
func TestKubeletSkipsWithoutRuntime(t *testing.T) {
	tools := t.TempDir()
	if err := os.WriteFile(tools+"/kubelet", []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Cluster{Tools: tools}).findKubeletTools(r)
	}()
	<-done
	if want := "kubetest: no containerd in PATH; ci/deps.sh installs containerd and runc\n"; !r.skipped || r.out.String() != want {
		t.Errorf("skipped %v with %q, want %q", r.skipped, r.out.String(), want)
	}
}
