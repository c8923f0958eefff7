package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/promtest"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// pushRun is a run as one node's cron job makes it: a bandwidth or a
// latency test, bw its headline figure.
func pushRun(test results.Test, bw float64) *results.Run {
	r := &results.Run{Test: test, Device: "mlx5_0", Port: 1, Transport: results.RC, Mode: "client", Peer: "server:18515",
		QPs: []int{1}, Sizes: []int{65536}, Threads: 1, PostList: 1, TxDepth: 128, CQMod: 100, MTU: 4096}
	res := results.Result{Size: 65536, QPs: 1, Iterations: 1000, BWAvgGbps: bw, BWBurstGbps: bw, MsgRateMpps: 1}
	if test.IsLatency() {
		res = results.Result{Size: 65536, QPs: 1, Iterations: 1000, Lat: &results.LatencyStats{Min: bw, P50: bw, P99: bw, Max: bw, Mean: bw}}
	}
	r.Results = []results.Result{res}
	return r
}

// scraped is every rdmabench series of a Pushgateway's scrape (its own and
// push_time_seconds left out), by identity, with its value.
func scraped(t *testing.T, url string) ([]byte, map[string]float64) {
	t.Helper()
	text, fams := promtest.Scrape(t, url)
	got := map[string]float64{}
	for name, mf := range fams {
		if !strings.HasPrefix(name, "rdmabench_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			got[promtest.Series(name, m)] = m.GetGauge().GetValue()
		}
	}
	var keep []string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, "rdmabench_run_success") || strings.HasPrefix(l, "rdmabench_bandwidth_bytes_per_second") || strings.HasPrefix(l, "rdmabench_latency_seconds{") && strings.Contains(l, `stat="p99"`) {
			keep = append(keep, l)
		}
	}
	return []byte(strings.Join(keep, "\n")), got
}

// Two nodes each push a write-bw and a send-lat run through --push, to the
// real Pushgateway: every series of all four is there afterwards, each with
// the instance and run it was pushed under. A second push of one node's
// write-bw replaces that run's series only.
func TestPushTwoNodesTwoTests(t *testing.T) {
	url := promtest.Pushgateway(t)
	job, timeout, metrics := "rdmabench", 5*time.Second, ""
	push := func(node string, r *results.Run) map[string]bool {
		t.Helper()
		o := outputFlags{save: new(string), metrics: &metrics, push: &url, pushJob: &job, instance: &node, otlp: new(string), pushTimeout: &timeout}
		if err := o.write(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		// What the push must leave: the run's series with the grouping
		// labels the Pushgateway adds.
		var b bytes.Buffer
		if err := render.Metrics(&b, r, render.MetricsOptions{}); err != nil {
			t.Fatal(err)
		}
		fams := promtest.Parse(t, b.Bytes())
		want := map[string]bool{}
		for name, mf := range fams {
			for _, m := range mf.GetMetric() {
				s := promtest.Series(name, m)
				extra := fmt.Sprintf("instance=%q,job=%q,", node, job)
				s = strings.Replace(s, "{", "{"+extra, 1)
				want[sortSeries(s, render.RunGroup(r))] = true
			}
		}
		return want
	}
	want := map[string]bool{}
	for _, node := range []string{"node1", "node2"} {
		for _, test := range []results.Test{results.WriteBW, results.SendLat} {
			for s := range push(node, pushRun(test, 1)) {
				want[s] = true
			}
		}
	}
	text, got := scraped(t, url)
	for s := range want {
		if _, ok := got[s]; !ok {
			t.Errorf("missing after four pushes: %s", s)
		}
	}
	for s := range got {
		if !want[s] {
			t.Errorf("on the Pushgateway, not pushed: %s", s)
		}
	}
	t.Logf("the Pushgateway's /metrics after two nodes pushed two tests (excerpt):\n%s", text)
	// node1's write-bw again, with another figure: its series change, every
	// other stays as it was.
	again := push("node1", pushRun(results.WriteBW, 2))
	_, after := scraped(t, url)
	if len(after) != len(got) {
		t.Errorf("%d series after the second push, want %d", len(after), len(got))
	}
	changed := 0
	for s, v := range after {
		switch {
		case again[s] && strings.HasPrefix(s, "rdmabench_bandwidth_bytes_per_second"):
			if v != 2e9/8 {
				t.Errorf("node1's write-bw was not replaced: %s %v", s, v)
			}
			changed++
		case !again[s] && v != got[s]:
			t.Errorf("another group changed: %s %v, was %v", s, v, got[s])
		}
	}
	if changed != 1 {
		t.Errorf("%d bandwidth series replaced, want 1", changed)
	}
}

// sortSeries adds run=group to a series identity and sorts its labels again.
func sortSeries(s, group string) string {
	open := strings.IndexByte(s, '{')
	pairs := strings.Split(strings.TrimSuffix(s[open+1:], "}"), ",")
	pairs = append(pairs, fmt.Sprintf("%s=%q", render.RunGroupLabel, group))
	slices.Sort(pairs)
	return s[:open] + "{" + strings.Join(pairs, ",") + "}"
}

// --otlp with --push-instance: the run's gauges reach the collector under
// a resource naming the node and the kind of run.
func TestOTLPFromFlags(t *testing.T) {
	rc := promtest.OTLPReceiver(t)
	job, node, timeout, none := "rdmabench", "node7", 5*time.Second, ""
	o := outputFlags{save: &none, metrics: &none, push: &none, pushJob: &job, instance: &node, otlp: &rc.URL, pushTimeout: &timeout}
	r := pushRun(results.WriteBW, 8)
	if err := o.write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	pts := rc.Gauges()["rdmabench_bandwidth_bytes_per_second"]
	if len(pts) != 1 {
		t.Fatalf("%d bandwidth points, want 1", len(pts))
	}
	p := pts[0]
	if p.Value != 1e9 || p.Attrs["size"] != "65536" || p.Attrs["test"] != "write_bw" ||
		p.Resource["host.name"] != "node7" || p.Resource["rdmabench.run"] != render.RunGroup(r) {
		t.Errorf("point %+v", p)
	}
}
