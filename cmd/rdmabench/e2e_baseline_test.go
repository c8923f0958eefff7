package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rdmabench/rdmabench/results"
)

// Flags of --save, --repeat and the metrics are checked before any device
// is opened: one line and exit 2.
func TestOutputFlagsRefused(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"write-bw", "--loopback", "--repeat", "0"}, "--repeat 0 outside 1..1000"},
		{[]string{"write-bw", "--loopback", "--repeat", "1001"}, "--repeat 1001 outside"},
		{[]string{"send-lat", "--loopback", "--push-timeout", "0s"}, "--push-timeout"},
		{[]string{"send-lat", "--loopback", "--push-job", ""}, "--push-job"},
	}
	for _, tt := range tests {
		code, _, errOut := run(tt.args...)
		if code != 2 || !strings.Contains(errOut, tt.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tt.args, code, errOut, tt.want)
		}
	}
}

// A repeated run is saved with every repeat's figures, exported as metrics
// the Prometheus parser reads, and compares with itself as no regression.
func TestE2ERepeatSaveMetricsCompare(t *testing.T) {
	needRDMA(t)
	dir := t.TempDir()
	save, prom := filepath.Join(dir, "base.json"), filepath.Join(dir, "rdmabench.prom")
	code, out, errOut := run("write-bw", "--loopback", "-s", "4K", "-n", "200", "--warmup", "20", "--repeat", "3", "--save", save, "--metrics", prom)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(out, "BW average[MiB/sec]") != 3 || !strings.Contains(out, " Repeat 3 of 3") {
		t.Errorf("want three tables on stdout:\n%s", out)
	}
	b, err := os.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeRun(t, string(b))
	if r.Repeat != 3 || len(r.Results) != 1 || len(r.Results[0].Repeats) != 3 {
		t.Fatalf("saved run: repeat %d, results %+v", r.Repeat, r.Results)
	}
	f, err := os.Open(prom)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil || fams["rdmabench_bandwidth_bytes_per_second"] == nil {
		t.Fatalf("metrics: %v, %v", err, fams)
	}
	// Labelled by what was asked, not by the port the kernel picked.
	for _, m := range fams["rdmabench_run_success"].GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["peer"] != "loopback" || got["sizes"] != "4096" || got["test"] != "write_bw" {
			t.Errorf("run labels %v", got)
		}
	}
	if code, out, errOut := run("compare", save, save); code != 0 || !strings.Contains(out, "0 regression(s)") {
		t.Errorf("compare with itself: exit %d\n%s%s", code, out, errOut)
	}
}

// --json on stdout with --save writes the same document twice.
func TestE2ESaveMatchesJSON(t *testing.T) {
	needRDMA(t)
	save := filepath.Join(t.TempDir(), "lat.json")
	code, out, errOut := run("send-lat", "--loopback", "-s", "8", "-n", "200", "--json", "--save", save)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(save)
	if err != nil || string(b) != out {
		t.Errorf("--save differs from --json (%v)", err)
	}
}

// Every destination is tried, and their failures make one line.
func TestOutputsWriteFailuresOneLine(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no", "such")
	save, metrics, push, job, instance, otlp, timeout := missing+"/a.json", missing+"/m.prom", "http://127.0.0.1:1", "rdmabench", "", "http://127.0.0.1:1/v1/metrics", 200*time.Millisecond
	o := outputFlags{save: &save, metrics: &metrics, push: &push, pushJob: &job, instance: &instance, otlp: &otlp, pushTimeout: &timeout}
	run := &results.Run{Test: results.WriteBW, Results: []results.Result{{Size: 8, QPs: 1, BWAvgGbps: 1}}}
	err := o.write(context.Background(), run)
	if err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err %q, want one line", err)
	}
	for _, w := range []string{"--save", "--metrics", "--push", "--otlp"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not name %s", err, w)
		}
	}
	// And when they work: the saved document reads back, the metrics parse.
	save, metrics, push, otlp = filepath.Join(dir, "a.json"), filepath.Join(dir, "m.prom"), "", ""
	if err := o.write(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if r, err := results.ReadFile(save); err != nil || r.Results[0].BWAvgGbps != 1 {
		t.Errorf("saved: %v %+v", err, r)
	}
	f, _ := os.Open(metrics)
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(f); err != nil {
		t.Errorf("metrics: %v", err)
	}
}
