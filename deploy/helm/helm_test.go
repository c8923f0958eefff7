package helm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const chartDir = "rdmabench"

// object is one rendered Kubernetes object, as JSON decodes it.
type object = map[string]any

// helmBin is the real helm that ci/kube-tools.sh builds; the tests skip
// without it, in one line.
func helmBin(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RDMABENCH_KUBE_TOOLS")
	if dir == "" {
		t.Skip("needs helm: RDMABENCH_KUBE_TOOLS=$(ci/kube-tools.sh) (ci/kube-tools.sh builds it)")
	}
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("needs helm in RDMABENCH_KUBE_TOOLS=%s (ci/kube-tools.sh builds it): %v", dir, err)
	}
	return bin
}

// runHelm runs helm with its caches in a temporary home, so that no
// user's repositories or plugins take part.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := helmBin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String() + errb.String(), err
	}
	return out.String(), nil
}

// template renders the chart as release "rb" in namespace "fabric" with
// the --set values given.
func template(t *testing.T, sets ...string) (string, error) {
	t.Helper()
	args := []string{"template", "rb", chartDir, "--namespace", "fabric"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	return runHelm(t, args...)
}

// render is template that must succeed, read back as objects.
func render(t *testing.T, sets ...string) []object {
	t.Helper()
	out, err := template(t, sets...)
	if err != nil {
		t.Fatalf("helm template --set %s: %v\n%s", strings.Join(sets, " --set "), err, out)
	}
	return yamlDocs(t, out)
}

// yamlDocs reads a stream of YAML documents (helm's output); empty
// documents are left out.
func yamlDocs(t *testing.T, text string) []object {
	t.Helper()
	r := k8syaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var docs []object
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return docs
		}
		if err != nil {
			t.Fatalf("reading helm's YAML: %v", err)
		}
		var o object
		if err := yaml.Unmarshal(doc, &o); err != nil {
			t.Fatalf("reading helm's YAML: %v\n%s", err, doc)
		}
		if o != nil {
			docs = append(docs, o)
		}
	}
}

// get walks a path of map keys and list indexes through an object;
// nil where it leads nowhere.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// find is the one object of kind and name; the test fails when there is
// not exactly one.
func find(t *testing.T, objs []object, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o["kind"] == kind && get(o, "metadata", "name") == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s named %s, want 1; have %v", len(found), kind, name, kinds(objs))
	}
	return found[0]
}

// kinds lists the objects as kind/name, in the order rendered.
func kinds(objs []object) []string {
	var l []string
	for _, o := range objs {
		l = append(l, fmt.Sprintf("%v/%v", o["kind"], get(o, "metadata", "name")))
	}
	return l
}
