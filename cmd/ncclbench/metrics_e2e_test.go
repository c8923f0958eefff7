package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/internal/promtest"
)

// --metrics and --push from a two-process run: rank 0 writes the text
// file (node_exporter's collector reads it) and pushes the same series to
// a real Pushgateway, under the job, the instance and the run.
func TestMetricsAndPush(t *testing.T) {
	url := promtest.Pushgateway(t)
	file := filepath.Join(t.TempDir(), "ncclbench.prom")
	ps := runRanks(t, 2, nil, "all_reduce", "-b", "1K", "-e", "2K", "-f", "2", "-n", "2", "-w", "1",
		"--metrics", file, "--push", url, "--push-instance", "node7")
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d: %s", r, p.code, p.stderr.String())
		}
	}
	text, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if out := promtest.Promtool(t, text); out != "" {
		t.Errorf("promtool: %s", out)
	}
	fams := promtest.Parse(t, text)
	if f := fams["ncclbench_bus_bandwidth_bytes_per_second"]; f == nil || len(f.GetMetric()) != 4 {
		t.Fatalf("--metrics: %d bus bandwidth series, want 2 sizes × 2 halves:\n%s", len(f.GetMetric()), text)
	}
	_, pushed := promtest.Scrape(t, url)
	f := pushed["ncclbench_bus_bandwidth_bytes_per_second"]
	if f == nil || len(f.GetMetric()) != 4 {
		t.Fatalf("--push: %v", f)
	}
	s := promtest.Series(f.GetName(), f.GetMetric()[0])
	for _, want := range []string{`job="ncclbench"`, `instance="node7"`, `collective="all_reduce"`, `nranks="2"`, `run="all_reduce-b1024-e2048-n2-`} {
		if !strings.Contains(s, want) {
			t.Errorf("pushed series %s lacks %s", s, want)
		}
	}
}
