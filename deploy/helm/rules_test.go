package helm

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

const (
	rulesLink   = "rdmabench/files/rdmabench-agent.rules.yml"
	contribRule = "../../contrib/prometheus/rdmabench-agent.rules.yml"
)

// One source for the rules: the chart's file is a link to contrib's, not
// a copy that could drift.
func TestRulesAreContribsLink(t *testing.T) {
	fi, err := os.Lstat(rulesLink)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("%s is a %v, want a symlink to %s", rulesLink, fi.Mode(), contribRule)
	}
	to, err := filepath.EvalSymlinks(rulesLink)
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.EvalSymlinks(contribRule)
	if err != nil {
		t.Fatal(err)
	}
	if to != want {
		t.Errorf("%s leads to %s, want %s", rulesLink, to, want)
	}
}

// The PrometheusRule's groups are contrib/prometheus's, as helm loads the
// link: both parsed, compared whole.
func TestPrometheusRuleGroups(t *testing.T) {
	objs := render(t, "agent.prometheusRule.enabled=true", "agent.prometheusRule.labels.release=kps")
	pr := find(t, objs, "PrometheusRule", "rb-rdmabench-agent")
	b, err := os.ReadFile(contribRule)
	if err != nil {
		t.Fatal(err)
	}
	file := yamlDocs(t, string(b))
	if len(file) != 1 || file[0]["groups"] == nil {
		t.Fatalf("%s: want one document with groups", contribRule)
	}
	if have, want := get(pr, "spec", "groups"), file[0]["groups"]; !reflect.DeepEqual(have, want) {
		t.Errorf("PrometheusRule groups differ from %s:\n have %v\n want %v", contribRule, have, want)
	}
	if pr["apiVersion"] != "monitoring.coreos.com/v1" || get(pr, "metadata", "labels", "release") != "kps" {
		t.Errorf("PrometheusRule %v", pr["metadata"])
	}
}

// The ServiceMonitor scrapes as the rules expect: job rdmabench-agent
// (the Service's label named by jobLabel), the port named metrics.
func TestServiceMonitor(t *testing.T) {
	objs := render(t, "agent.serviceMonitor.enabled=true")
	sm := find(t, objs, "ServiceMonitor", "rb-rdmabench-agent")
	svc := find(t, objs, "Service", "rb-rdmabench-agent")
	label, _ := get(sm, "spec", "jobLabel").(string)
	if label == "" || get(svc, "metadata", "labels", label) != "rdmabench-agent" {
		t.Errorf("jobLabel %q: the Service's labels %v must give it rdmabench-agent (rules.AgentJob)", label, get(svc, "metadata", "labels"))
	}
	sel, _ := get(sm, "spec", "selector", "matchLabels").(map[string]any)
	for k, v := range sel {
		if get(svc, "metadata", "labels", k) != v {
			t.Errorf("ServiceMonitor selector %v does not select the Service (labels %v)", sel, get(svc, "metadata", "labels"))
		}
	}
	ep := get(sm, "spec", "endpoints", 0)
	if get(ep, "port") != "metrics" || get(ep, "interval") != "1s" {
		t.Errorf("endpoint %v: want port metrics every 1s", ep)
	}
}

// helm package stores the rules themselves, not the link: the packaged
// chart, away from this repository, still makes the PrometheusRule.
func TestPackagedChartCarriesRules(t *testing.T) {
	dir := t.TempDir()
	if out, err := runHelm(t, "package", chartDir, "--destination", dir); err != nil {
		t.Fatalf("helm package: %v\n%s", err, out)
	}
	tgz := filepath.Join(dir, "rdmabench-0.1.0.tgz")
	out, err := runHelm(t, "template", "rb", tgz, "--namespace", "fabric", "--set", "agent.prometheusRule.enabled=true")
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", tgz, err, out)
	}
	pr := find(t, yamlDocs(t, out), "PrometheusRule", "rb-rdmabench-agent")
	groups, _ := get(pr, "spec", "groups").([]any)
	if len(groups) == 0 {
		t.Errorf("the packaged chart's PrometheusRule has no groups: %v", pr)
	}
}
