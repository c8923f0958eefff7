package publish

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/rdmabench/rdmabench/internal/promtest"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdmabench.prom")
	os.WriteFile(path, []byte("old\n"), 0o644)
	// A failed write leaves the old file and no temporary file behind.
	err := WriteFileAtomic(path, func(w io.Writer) error {
		io.WriteString(w, "half")
		return errors.New("boom")
	})
	if err == nil {
		t.Fatal("no error")
	}
	if b, _ := os.ReadFile(path); string(b) != "old\n" {
		t.Errorf("file after a failed write: %q", b)
	}
	if err := WriteFileAtomic(path, func(w io.Writer) error { _, err := io.WriteString(w, "new\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new\n" {
		t.Errorf("file %q", b)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (the collector must read it)", st.Mode())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files left in the directory, want 1", len(ents))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "no", "such", "dir"), func(io.Writer) error { return nil }); err == nil {
		t.Error("a missing directory was not reported")
	}
}

// gatherer holds one gauge, rdmabench_test_value{test=test} v.
func gatherer(test string, v float64) prometheus.Gatherer {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "rdmabench_test_value", Help: "test", ConstLabels: prometheus.Labels{"test": test}})
	g.Set(v)
	reg.MustRegister(g)
	return reg
}

var group = Group{Job: "rdmabench", Labels: map[string]string{"instance": "node1", "run": "write_bw-s65536-q1-0123abcd"}}

func TestPush(t *testing.T) {
	var method, path, body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		method, path, body = r.Method, r.URL.Path, string(b)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server on %s, want 127.0.0.1", srv.URL)
	}
	if err := Push(context.Background(), srv.URL, group, gatherer("write_bw", 42), time.Second); err != nil {
		t.Fatal(err)
	}
	// The grouping labels follow the job in any order.
	parts := strings.Split(strings.TrimPrefix(path, "/metrics/"), "/")
	got := map[string]string{}
	for i := 0; i+1 < len(parts); i += 2 {
		got[parts[i]] = parts[i+1]
	}
	want := map[string]string{"job": "rdmabench", "instance": "node1", "run": "write_bw-s65536-q1-0123abcd"}
	if method != http.MethodPut || !maps.Equal(got, want) || len(parts) != 6 || len(body) == 0 {
		t.Errorf("%s %s with %d bytes", method, path, len(body))
	}
}

// Every way a push fails is one error within the timeout, for the
// Pushgateway and the OTLP collector alike.
func TestPushFailures(t *testing.T) {
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusBadRequest)
	}))
	defer refuse.Close()
	block := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block }))
	defer hang.Close()
	defer close(block) // runs before hang.Close, which waits for handlers
	const timeout = 300 * time.Millisecond
	for _, p := range []struct {
		name, path, noURL string
		push              func(url string) error
	}{
		{"pushgateway", "", "no Pushgateway URL", func(url string) error {
			return Push(context.Background(), url, group, gatherer("write_bw", 1), timeout)
		}},
		{"otlp", "/v1/metrics", "no collector URL", func(url string) error {
			return PushOTLP(context.Background(), url, nil, gatherer("write_bw", 1), timeout)
		}},
	} {
		for _, tt := range []struct{ name, url, want string }{
			{"refused", refuse.URL + p.path, "400"},
			{"hangs", hang.URL + p.path, "no answer within"},
			{"no URL", "", p.noURL},
		} {
			t.Run(p.name+"/"+tt.name, func(t *testing.T) {
				start := time.Now()
				err := p.push(tt.url)
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("err %v, want %q", err, tt.want)
				}
				if d := time.Since(start); d > 3*time.Second {
					t.Errorf("took %v: the timeout did not bound it", d)
				}
			})
		}
	}
}

// value is the one rdmabench_test_value series of a Pushgateway's scrape in
// the group of instance and run, or -1 when there is none.
func value(t *testing.T, fams map[string]*dto.MetricFamily, instance, run string) float64 {
	t.Helper()
	v := -1.0
	for _, m := range fams["rdmabench_test_value"].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["instance"] == instance && l["run"] == run && l["job"] == "rdmabench" {
			if v != -1 {
				t.Errorf("two series for %s %s", instance, run)
			}
			v = m.GetGauge().GetValue()
		}
	}
	return v
}

// Against the real Pushgateway: two nodes each push two runs, and every
// series is there afterwards; pushing one run again replaces that run's
// series on that node and nothing else.
func TestPushGroupsOnPushgateway(t *testing.T) {
	url := promtest.Pushgateway(t)
	type push struct {
		instance, run string
		v             float64
	}
	pushAll := func(pushes ...push) {
		t.Helper()
		for _, p := range pushes {
			g := Group{Job: "rdmabench", Labels: map[string]string{"instance": p.instance, "run": p.run}}
			if err := Push(context.Background(), url, g, gatherer(strings.Split(p.run, "-")[0], p.v), 5*time.Second); err != nil {
				t.Fatal(err)
			}
		}
	}
	bw, lat := "write_bw-s65536-q1-0123abcd", "send_lat-s8-q1-89abcdef"
	pushAll(push{"node1", bw, 1}, push{"node1", lat, 2}, push{"node2", bw, 3}, push{"node2", lat, 4})
	_, fams := promtest.Scrape(t, url)
	for _, w := range []push{{"node1", bw, 1}, {"node1", lat, 2}, {"node2", bw, 3}, {"node2", lat, 4}} {
		if got := value(t, fams, w.instance, w.run); got != w.v {
			t.Errorf("%s %s: %v, want %v", w.instance, w.run, got, w.v)
		}
	}
	pushAll(push{"node1", bw, 10})
	_, fams = promtest.Scrape(t, url)
	for _, w := range []push{{"node1", bw, 10}, {"node1", lat, 2}, {"node2", bw, 3}, {"node2", lat, 4}} {
		if got := value(t, fams, w.instance, w.run); got != w.v {
			t.Errorf("after node1's second %s push: %s %s: %v, want %v", bw, w.instance, w.run, got, w.v)
		}
	}
	// A series that repeats a grouping label is refused before it is sent.
	g := Group{Job: "rdmabench", Labels: map[string]string{"instance": "node1", "test": "write_bw"}}
	if err := Push(context.Background(), url, g, gatherer("write_bw", 1), 5*time.Second); err == nil || !strings.Contains(err.Error(), "grouping label") {
		t.Errorf("a series with a grouping label: err %v", err)
	}
}
