package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// chromium is Debian's headless browser (ci/deps.sh installs it).
const chromium = "/usr/bin/chromium"

// browse opens page in headless Chromium with every name unresolvable and
// a proxy that refuses, takes a screenshot, and returns what the browser
// logged (its console among it) and the URLs the page itself asked the
// network for (requests whose top frame is the file: the browser's own
// background requests have none).
func browse(t *testing.T, page, screenshot string) (console []string, pageRequests []string) {
	t.Helper()
	tmp := t.TempDir()
	netLog := filepath.Join(tmp, "net.json")
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(tmp, "profile"), "--enable-logging=stderr", "--v=0",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9", "--log-net-log="+netLog,
		"--screenshot="+screenshot, "--window-size=1280,2000", "file://"+page)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("chromium did not finish within 90 s\n%s", stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Uncaught") {
			console = append(console, l)
		}
	}
	b, err := os.ReadFile(netLog)
	if err != nil {
		t.Fatal(err)
	}
	var log struct {
		Events []struct {
			Params struct {
				URL       string `json:"url"`
				Isolation string `json:"network_isolation_key"`
				Initiator string `json:"initiator"`
			} `json:"params"`
		} `json:"events"`
	}
	// The log of a browser killed mid-write lacks its closing brackets.
	if err := json.Unmarshal(b, &log); err != nil {
		t.Fatalf("net log %s: %v", netLog, err)
	}
	seen := map[string]bool{}
	for _, e := range log.Events {
		p := e.Params
		if p.URL == "" || seen[p.URL] || strings.HasPrefix(p.URL, "file:") || strings.HasPrefix(p.URL, "data:") {
			continue
		}
		if strings.HasPrefix(p.Isolation, "file://") || strings.HasPrefix(p.Initiator, "file://") {
			seen[p.URL] = true
			pageRequests = append(pageRequests, p.URL)
		}
	}
	return console, pageRequests
}

// moduleRoot is the folder of go.mod above the test's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = up
	}
}

// TestReportInChromium opens a report of every kind in a real browser: no
// console message, no request to the network, and a screenshot kept in
// build/report-screenshot.png to look at. A page that loads from the
// network and logs errors is opened first, to show both are seen.
func TestReportInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (ci/deps.sh installs Debian's chromium): the report is not opened in a browser", chromium)
	}
	tmp := t.TempDir()
	control := filepath.Join(tmp, "control.html")
	if err := os.WriteFile(control, []byte(`<!DOCTYPE html><html><body><img src="http://example.invalid/x.png">`+
		`<script>console.error("boom"); nosuch();</script></body></html>`), 0o644); err != nil {
		t.Fatal(err)
	}
	console, requests := browse(t, control, filepath.Join(tmp, "control.png"))
	if len(console) < 2 || len(requests) != 1 || requests[0] != "http://example.invalid/x.png" {
		t.Fatalf("the control page's console %q and requests %q: want its two console lines and its one image", console, requests)
	}

	page := filepath.Join(tmp, "report.html")
	files := append(demoDocPaths, filepath.Join(renderDir, "mesh.json"), filepath.Join(reportDir, "ncclbench.json"),
		filepath.Join(reportDir, "doctor.json"), filepath.Join(renderDir, "lat.json"))
	if code, _, stderr := run(append([]string{"report", "-o", page}, files...)...); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	shot := filepath.Join(moduleRoot(t), "build", "report-screenshot.png")
	if err := os.MkdirAll(filepath.Dir(shot), 0o755); err != nil {
		t.Fatal(err)
	}
	console, requests = browse(t, page, shot)
	if len(console) > 0 {
		t.Errorf("the console said:\n%s", strings.Join(console, "\n"))
	}
	if len(requests) > 0 {
		t.Errorf("the page asked the network for %q", requests)
	}
	st, err := os.Stat(shot)
	if err != nil || st.Size() < 10000 {
		t.Fatalf("screenshot %s: %v (want a page's worth of PNG)", shot, err)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, st.Size())
}
