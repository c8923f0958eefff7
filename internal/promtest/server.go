package promtest

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rdmabench/rdmabench/internal/syncbuf"
	"github.com/rdmabench/rdmabench/internal/testport"
)

// PrometheusBin is Debian's Prometheus server (package prometheus, which
// ci/deps.sh installs for promtool).
const PrometheusBin = "/usr/bin/prometheus"

// Server is a Prometheus server a test started, its web API on 127.0.0.1.
type Server struct {
	t    testing.TB
	Addr string
	cmd  *exec.Cmd
	log  *syncbuf.Buffer
	done chan struct{}
}

// ResultSeries is one series of an API result: a vector's value or a matrix's
// values, each [unix seconds, "value"].
type ResultSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// Sample reads one [time, "value"] pair.
func Sample(p []any) (ts, v float64) {
	if len(p) != 2 {
		return math.NaN(), math.NaN()
	}
	ts, _ = p[0].(float64)
	s, _ := p[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		v = math.NaN()
	}
	return ts, v
}

// Duration writes d as PromQL reads a range, whole seconds up.
func Duration(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10) + "s"
}

// StartPrometheus starts Prometheus with config (prometheus.yml's text) on
// a free port, its TSDB in the test's temporary folder, and waits until it
// is ready (within ready: a TCG guest takes a few seconds); the test is
// skipped where Debian's prometheus is not installed. A cleanup stops it,
// after logging its alerts and its log if the test failed.
func StartPrometheus(t testing.TB, config string, ready time.Duration) *Server {
	t.Helper()
	need(t, PrometheusBin, "prometheus")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Server{t: t, Addr: testport.Addr(t), log: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(PrometheusBin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+p.Addr, "--storage.tsdb.retention.time=1d")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("prometheus's alerts at the end:\n%s", p.Get("/api/v1/alerts"))
			t.Logf("prometheus's log (last 40 lines):\n%s", lastLines(p.log.String(), 40))
		}
		p.cmd.Process.Kill()
		<-p.done
	})
	for end := time.Now().Add(ready); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("prometheus exited at its start:\n%s", p.log.String())
		default:
		}
		if resp, err := (&http.Client{Timeout: 2 * time.Second}).Get("http://" + p.Addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
	}
	t.Fatalf("prometheus is not ready after %v:\n%s", ready, p.log.String())
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.SplitAfter(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "")
}

// Get is an API path's body, or why not (for the failure logs).
func (p *Server) Get(path string) string {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + p.Addr + path)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return string(b)
}

// Query runs an instant query now.
func (p *Server) Query(expr string) ([]ResultSeries, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + p.Addr + "/api/v1/query?" + url.Values{"query": {expr}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("%s: %s: %v", expr, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", expr, body.Error)
	}
	var out []ResultSeries
	if body.Data.ResultType != "vector" && body.Data.ResultType != "matrix" {
		return nil, fmt.Errorf("%s: a %s", expr, body.Data.ResultType)
	}
	if err := json.Unmarshal(body.Data.Result, &out); err != nil {
		return nil, fmt.Errorf("%s: %v", expr, err)
	}
	return out, nil
}

// MustQuery is Query, the test failed (and stopped) on an error.
func (p *Server) MustQuery(expr string) []ResultSeries {
	p.t.Helper()
	s, err := p.Query(expr)
	if err != nil {
		p.t.Fatalf("prometheus: %v", err)
	}
	return s
}

// Count is how many series expr has now.
func (p *Server) Count(expr string) int {
	p.t.Helper()
	return len(p.MustQuery(expr))
}

// Prometheus's own series that a test reads: its CPU time, and the rule
// evaluations it skipped because the one before overran its interval
// (over every group).
const (
	SelfCPUSeconds        = "process_cpu_seconds_total"
	SelfMissedEvaluations = "prometheus_rule_group_iterations_missed_total"
)

// Self reads Prometheus's own /metrics once and returns, for each name, the
// sum of its counter or gauge series; NaN for a name it lacks, or for all
// when /metrics cannot be read.
func (p *Server) Self(names ...string) []float64 {
	out := make([]float64, len(names))
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(p.Get("/metrics")))
	for i, name := range names {
		mf := fams[name]
		if err != nil || mf == nil {
			out[i] = math.NaN()
			continue
		}
		for _, m := range mf.GetMetric() {
			out[i] += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}
