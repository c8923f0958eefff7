package kubetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// commandTimeout bounds one kubectl or helm run; an apply on the busy
// host takes well under a second.
const commandTimeout = 2 * time.Minute

// Kubectl runs the real kubectl as the admin and returns its stdout; the
// error carries its stderr.
func (c *Cluster) Kubectl(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return c.run(t, "", "kubectl", append([]string{"--kubeconfig=" + c.Kubeconfig}, args...))
}

// KubectlAs is Kubectl with another kubeconfig, such as a service
// account's from ServiceAccountKubeconfig.
func (c *Cluster) KubectlAs(t testing.TB, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	return c.run(t, "", "kubectl", append([]string{"--kubeconfig=" + kubeconfig}, args...))
}

// Helm runs helm against the plane, its cache and config in the test's
// temporary directory; it skips t when the tools have no helm.
func (c *Cluster) Helm(t testing.TB, args ...string) (string, error) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(c.Tools, "helm")); err != nil {
		t.Skipf("kubetest: no helm in %s; run ci/kube-tools.sh %s", c.Tools, c.Tools)
	}
	return c.run(t, "", "helm", append([]string{"--kubeconfig=" + c.Kubeconfig}, args...))
}

// Apply applies manifests (YAML or JSON, several separated by ---) and
// fails t when kubectl refuses them.
func (c *Cluster) Apply(t testing.TB, manifests string) {
	t.Helper()
	out, err := c.run(t, manifests, "kubectl", []string{"--kubeconfig=" + c.Kubeconfig, "apply", "-f", "-"})
	if err != nil {
		t.Fatalf("kubetest: kubectl apply: %v", err)
	}
	t.Logf("kubetest: %s", strings.TrimSpace(out))
}

// run runs one of the tools with stdin, and HOME and helm's directories
// in the test's temporary directory so that nothing is written under the
// user's own.
func (c *Cluster) run(t testing.TB, stdin, tool string, args []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(c.Tools, tool), args...)
	home := filepath.Join(c.dir, "home")
	cmd.Env = append(os.Environ(), "HOME="+home,
		"HELM_CACHE_HOME="+filepath.Join(home, "helm-cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "helm-config"),
		"HELM_DATA_HOME="+filepath.Join(home, "helm-data"))
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %v: %s", tool, strings.Join(args[1:], " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// WaitFor polls cond until it says true, and returns how long that took.
// It fails t, with the last error cond returned, when deadline passes
// first, and at once when a component of the plane has ended. An error
// from cond is not final: what a test waits for is often not there yet.
func (c *Cluster) WaitFor(t testing.TB, what string, deadline time.Duration, cond func() (bool, error)) time.Duration {
	t.Helper()
	start := time.Now()
	var last error
	for time.Since(start) < deadline {
		if p := c.dead(); p != nil {
			_, err := p.exited()
			t.Fatalf("kubetest: waiting for %s: %s ended (%v); its log's tail follows", what, p.name, err)
		}
		ok, err := cond()
		if ok && err == nil {
			return time.Since(start)
		}
		last = err
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("kubetest: %s: not after %v (last error: %v)", what, deadline, last)
	return 0
}

// ServiceAccountKubeconfig writes a kubeconfig that acts as service
// account sa of namespace, with a token from the TokenRequest API (what
// a pod's projected token is), and returns its path: a test runs a
// command with it to see exactly what the account's RBAC allows.
func (c *Cluster) ServiceAccountKubeconfig(t testing.TB, namespace, sa string) string {
	t.Helper()
	token, err := c.Kubectl(t, "create", "token", sa, "--namespace="+namespace, "--duration=1h")
	if err != nil {
		t.Fatalf("kubetest: token for %s/%s: %v", namespace, sa, err)
	}
	path := filepath.Join(c.dir, "sa-"+namespace+"-"+sa+".kubeconfig")
	user := userInfo{Token: strings.TrimSpace(token)}
	name := "system:serviceaccount:" + namespace + ":" + sa
	if err := writeKubeconfig(path, c.Server, c.pki.ca.certPEM, name, user, namespace); err != nil {
		t.Fatalf("kubetest: %v", err)
	}
	return path
}

// Objects reads ConfigMaps and Secrets through kubectl, for ContainerEnv.
func (c *Cluster) Objects(t testing.TB) Objects {
	t.Helper()
	return func(kind RefKind, namespace, name string) (map[string]string, bool, error) {
		out, err := c.Kubectl(t, "get", strings.ToLower(kind.String()), name,
			"--namespace="+namespace, "--ignore-not-found", "-o", "json")
		if err != nil || strings.TrimSpace(out) == "" {
			return nil, false, err
		}
		var obj struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &obj); err != nil {
			return nil, false, err
		}
		if kind == SecretRef {
			for k, v := range obj.Data {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return nil, false, fmt.Errorf("secret %s key %s: %w", name, k, err)
				}
				obj.Data[k] = string(b)
			}
		}
		return obj.Data, true, nil
	}
}
