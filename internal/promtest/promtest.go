// Package promtest is what tests share to check metrics with the real
// Prometheus tools a user runs: a Prometheus server and a Pushgateway of
// their own, promtool, and the textfile collector's rule that no two files
// may hold one series; and an OTLP receiver for the OpenTelemetry export.
// A tool that is absent skips the test; ci/deps.sh installs them.
package promtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Where Debian's packages put the tools (prometheus-pushgateway, prometheus).
const (
	PushgatewayBin = "/usr/bin/prometheus-pushgateway"
	PromtoolBin    = "/usr/bin/promtool"
)

func need(t testing.TB, bin, pkg string) {
	t.Helper()
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("needs %s (Debian package %s; ci/deps.sh installs it)", bin, pkg)
	}
}

// Pushgateway starts a Pushgateway on 127.0.0.1 with no persistence and
// returns its URL; it is stopped when the test ends.
func Pushgateway(t testing.TB) string {
	t.Helper()
	need(t, PushgatewayBin, "prometheus-pushgateway")
	// The port is found free, then handed over: another process may take it
	// in between, hence a few tries.
	var lastErr error
	for range 3 {
		url, err := startPushgateway(t)
		if err == nil {
			return url
		}
		lastErr = err
	}
	t.Fatalf("pushgateway: %v", lastErr)
	return ""
}

func startPushgateway(t testing.TB) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	var log bytes.Buffer
	// No persistence file: Debian's build defaults to one in /var/lib, which
	// would carry one test's pushes into the next.
	cmd := exec.Command(PushgatewayBin, "--web.listen-address="+addr, "--persistence.file=", "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	url := "http://" + addr
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return "", fmt.Errorf("exited before it was ready: %s", log.String())
		default:
		}
		if resp, err := client.Get(url + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Cleanup(stop)
				return url, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return "", fmt.Errorf("not ready within 15 s: %s", log.String())
}

// Scrape reads url's /metrics as Prometheus would: the text, and the
// families expfmt's parser makes of it.
func Scrape(t testing.TB, url string) ([]byte, map[string]*dto.MetricFamily) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return text, Parse(t, text)
}

// Parse reads text in the exposition format with the parser the textfile
// collector uses.
func Parse(t testing.TB, text []byte) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(text))
	if err != nil {
		t.Fatalf("the parser refused the metrics: %v", err)
	}
	return fams
}

// Promtool runs `promtool check metrics` on text, as an operator checks a
// textfile before node_exporter reads it: it returns promtool's complaints,
// empty when it has none.
func Promtool(t testing.TB, text []byte) string {
	t.Helper()
	need(t, PromtoolBin, "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, PromtoolBin, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		return err.Error()
	}
	return strings.TrimSpace(string(out))
}

// Series is one series' identity: its name and label pairs, sorted, with
// empty values left out (Prometheus reads them as no label).
func Series(name string, m *dto.Metric) string {
	var pairs []string
	for _, l := range m.GetLabel() {
		if l.GetValue() != "" {
			pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
		}
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// MergeTextfiles reads files in the text format with expfmt's parser and
// merges them as node_exporter's textfile collector does: a family must
// have one type and help in all of them, and a series that two files hold
// is the collector's gather error. It returns every series.
func MergeTextfiles(files map[string][]byte) (map[string]bool, error) {
	type fam struct {
		typ  dto.MetricType
		help string
		file string
	}
	fams := map[string]fam{}
	series := map[string]string{} // series → the file that holds it
	for _, name := range slices.Sorted(maps.Keys(files)) {
		p := expfmt.NewTextParser(model.UTF8Validation)
		parsed, err := p.TextToMetricFamilies(bytes.NewReader(files[name]))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		for fname, mf := range parsed {
			if f, ok := fams[fname]; ok && (f.typ != mf.GetType() || f.help != mf.GetHelp()) {
				return nil, fmt.Errorf("%s: %s has another type or help than in %s", name, fname, f.file)
			}
			fams[fname] = fam{mf.GetType(), mf.GetHelp(), name}
			for _, m := range mf.GetMetric() {
				s := Series(fname, m)
				if other, ok := series[s]; ok {
					return nil, fmt.Errorf("%s and %s both hold %s", other, name, s)
				}
				series[s] = name
			}
		}
	}
	all := make(map[string]bool, len(series))
	for s := range series {
		all[s] = true
	}
	return all, nil
}
