// Package grafana holds the Grafana dashboard for rdmabench's metrics; its
// test keeps the dashboard to series and labels rdmabench exports.
package grafana

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/rdmabench/rdmabench/agent/metrics"
	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/render"
)

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		Targets []struct {
			Expr   string `json:"expr"`
			Legend string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

var (
	metricRef = regexp.MustCompile(`\brdmabench_[a-zA-Z0-9_:]+`) // with a recording rule's colons
	// A label in a matcher (name="…", name=~"…"), a by/on list, a legend.
	legendRef  = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)
	matcherRef = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*"`)
	listRef    = regexp.MustCompile(`\b(?:by|on|without|ignoring)\s*\(([^)]*)\)`)
	nameRef    = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*`)
)

// refs are the metric and label names a PromQL expression (or label_values
// query) names.
func refs(expr string) (metrics, labels []string) {
	metrics = metricRef.FindAllString(expr, -1)
	for _, m := range matcherRef.FindAllStringSubmatch(expr, -1) {
		labels = append(labels, m[1])
	}
	for _, m := range listRef.FindAllStringSubmatch(expr, -1) {
		labels = append(labels, nameRef.FindAllString(m[1], -1)...)
	}
	return metrics, labels
}

// The extraction itself finds what a typo would leave behind.
func TestRefs(t *testing.T) {
	m, l := refs(`sum by (instance, devce) (rdmabench_bandwith_bytes_per_second{stat="p99",tst=~"$t"})`)
	if !slices.Equal(m, []string{"rdmabench_bandwith_bytes_per_second"}) || !slices.Equal(l, []string{"stat", "tst", "instance", "devce"}) {
		t.Errorf("metrics %v, labels %v", m, l)
	}
}

// Every series and label the dashboard queries is one rdmabench exports
// (render's names), and it shows the health, bandwidth and latency trends.
func TestDashboardReferencesExportedSeries(t *testing.T) {
	b, err := os.ReadFile("rdmabench.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("rdmabench.json: %v", err)
	}
	// render's series, the agent's and the agent's recorded series.
	known := append(append(render.MetricNames(), metrics.Names()...), rules.Default().RecordNames()...)
	labels := append(append(render.LabelNames(), metrics.LabelNames()...), "instance", "job", render.RunGroupLabel)
	exprs := map[string]string{} // expression → where
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, q := range p.Targets {
			exprs[q.Expr] = "panel " + p.Title
			for _, m := range legendRef.FindAllStringSubmatch(q.Legend, -1) {
				if !slices.Contains(labels, m[1]) {
					t.Errorf("panel %s: legend label %s is on no series rdmabench exports", p.Title, m[1])
				}
			}
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			exprs[v.Definition] = "variable " + v.Name
		}
	}
	used := map[string]bool{}
	for expr, where := range exprs {
		ms, ls := refs(expr)
		if len(ms) == 0 {
			t.Errorf("%s: %q names no rdmabench series", where, expr)
		}
		for _, m := range ms {
			used[m] = true
			if !slices.Contains(known, m) {
				t.Errorf("%s: %s is not a series rdmabench exports", where, m)
			}
		}
		for _, l := range ls {
			if !slices.Contains(labels, l) {
				t.Errorf("%s: label %s is on no series rdmabench exports", where, l)
			}
		}
	}
	for _, m := range []string{"rdmabench_agent:peer_unreached:ratio", "rdmabench_agent:agent_up", "rdmabench_agent:pair_loss:ratio_rate1m", "rdmabench_run_success", "rdmabench_bandwidth_bytes_per_second", "rdmabench_latency_seconds", "rdmabench_mesh_bandwidth_bytes_per_second"} {
		if !used[m] {
			t.Errorf("the dashboard does not show %s", m)
		}
	}
}
