package helm

import (
	"slices"
	"strings"
	"testing"
)

// The objects each value set makes, as kind/name (release "rb", so the
// prefix is rb-rdmabench).
func TestRenderedObjects(t *testing.T) {
	helmBin(t)
	base := []string{
		"Secret/rb-rdmabench-token",
		"ServiceAccount/rb-rdmabench-agent", "ServiceAccount/rb-rdmabench-health",
		"Role/rb-rdmabench-agent", "RoleBinding/rb-rdmabench-agent",
		"ClusterRole/fabric-rb-rdmabench-health", "ClusterRoleBinding/fabric-rb-rdmabench-health",
		"Service/rb-rdmabench-agent",
		"DaemonSet/rb-rdmabench-agent", "DaemonSet/rb-rdmabench-health",
	}
	cases := []struct {
		name string
		sets []string
		add  []string
		drop []string
	}{
		{name: "defaults"},
		{name: "monitoring", sets: []string{"agent.serviceMonitor.enabled=true", "agent.prometheusRule.enabled=true"},
			add: []string{"ServiceMonitor/rb-rdmabench-agent", "PrometheusRule/rb-rdmabench-agent"}},
		{name: "mesh job", sets: []string{"mesh.enabled=true"},
			add: []string{"Service/rb-rdmabench-mesh", "Job/rb-rdmabench-mesh"}},
		{name: "mesh jobset", sets: []string{"mesh.enabled=true", "mesh.jobset.enabled=true"},
			add: []string{"JobSet/rb-rdmabench-mesh"}},
		{name: "existing secret", sets: []string{"token.existingSecret=mine"},
			drop: []string{"Secret/rb-rdmabench-token"}},
		{name: "mesh only", sets: []string{"agent.enabled=false", "health.enabled=false", "mesh.enabled=true"},
			drop: base[1:], add: []string{"Service/rb-rdmabench-mesh", "Job/rb-rdmabench-mesh"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := slices.DeleteFunc(slices.Clone(base), func(s string) bool { return slices.Contains(c.drop, s) })
			want = append(want, c.add...)
			have := kinds(render(t, c.sets...))
			slices.Sort(want)
			slices.Sort(have)
			if !slices.Equal(have, want) {
				t.Errorf("objects:\n have %v\n want %v", have, want)
			}
		})
	}
}

// Values that cannot work are helm's error, naming them, not objects that
// fail in the cluster: values.schema.json for each value alone (types,
// ranges, names: a misspelt key too), the templates for what values do
// together.
func TestBadValues(t *testing.T) {
	cases := []struct {
		sets []string
		want string
	}{
		{[]string{"mesh.enabled=true", "mesh.size=1"}, "at '/mesh/size': minimum: got 1, want 2"},
		{[]string{"mesh.sise=3"}, "at '/mesh': additional properties 'sise' not allowed"},
		{[]string{"health.every=often"}, "at '/health/every'"},
		{[]string{"agent.port=70000"}, "at '/agent/port': maximum"},
		{[]string{"rdma.resourceCount=0"}, "at '/rdma/resourceCount': minimum"},
		{[]string{"image.pullPolicy=Sometimes"}, "at '/image/pullPolicy'"},
		{[]string{"mesh.enabled=true", "mesh.jobset.enabled=true", "mesh.size=5", "mesh.jobset.replicas=2"}, "mesh.size 5 and mesh.jobset.replicas 2"},
		{[]string{"mesh.enabled=true", "mesh.jobset.enabled=true", "mesh.jobset.replicas=0"}, "at '/mesh/jobset/replicas': minimum"},
	}
	for _, c := range cases {
		out, err := template(t, c.sets...)
		if err == nil {
			t.Errorf("--set %v rendered; want the error %q", c.sets, c.want)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("--set %v: %s\nwant it to say %q", c.sets, out, c.want)
		}
	}
}

// helm lint, strict (warnings fail), with each value set the tests render.
func TestLint(t *testing.T) {
	for _, sets := range [][]string{
		nil,
		{"agent.serviceMonitor.enabled=true", "agent.prometheusRule.enabled=true", "health.taint=true"},
		{"mesh.enabled=true", "rdma.privileged=true", "rdma.resourceName="},
		{"mesh.enabled=true", "mesh.jobset.enabled=true", "mesh.size=4", "mesh.jobset.replicas=2"},
	} {
		args := []string{"lint", "--strict", chartDir}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		if out, err := runHelm(t, args...); err != nil {
			t.Errorf("helm %v: %v\n%s", args, err, out)
		}
	}
}
