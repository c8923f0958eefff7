package helm

import (
	"testing"

	"github.com/rdmabench/rdmabench/internal/golden"
)

// The whole rendering of two value sets, for review: a change to any
// template shows here (go test ./deploy/helm -update rewrites them). The
// token is given, as a random one would differ every run.
func TestGoldenRender(t *testing.T) {
	cases := []struct {
		file string
		sets []string
	}{
		{"defaults.golden.yaml", []string{"token.value=not-a-secret"}},
		{"everything.golden.yaml", []string{"token.value=not-a-secret", "agent.serviceMonitor.enabled=true",
			"agent.prometheusRule.enabled=true", "health.taint=true", "mesh.enabled=true", "mesh.size=4",
			"health.extraEnv[0].name=KUBERNETES_SERVICE_HOST", "health.extraEnv[0].value=10.0.0.1"}},
		{"jobset.golden.yaml", []string{"token.existingSecret=fabric-token", "agent.enabled=false", "health.enabled=false",
			"mesh.enabled=true", "mesh.jobset.enabled=true", "mesh.size=4", "mesh.jobset.replicas=2"}},
	}
	for _, c := range cases {
		out, err := template(t, c.sets...)
		if err != nil {
			t.Fatalf("helm template %v: %v\n%s", c.sets, err, out)
		}
		golden.Check(t, c.file, []byte(out))
	}
}
