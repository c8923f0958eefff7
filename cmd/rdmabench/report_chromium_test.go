package main

import (
	"encoding/json"
	"html"
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

// layoutScript measures the page as laid out: every SVG text inside its
// figure (a title the figure cuts off, "row writes to colun", is not), no
// two texts on one line overlapping, a line of n texts (two heat maps'
// titles) each within its share of the figure, and every preformatted
// block and table readable without a scroll bar. It writes what it found
// into the page as JSON, for --dump-dom to hand back.
const layoutScript = `<script>
(function () {
  var out = {width: document.documentElement.clientWidth, svgs: 0, texts: 0, titles: [], clipped: [], overlaps: [], tooWide: [], scrolls: [], pres: []};
  function r2(x) { return Math.round(x * 10) / 10; }
  document.querySelectorAll("figure svg").forEach(function (svg, i) {
    out.svgs++;
    var b = svg.getBoundingClientRect(), fig = svg.closest("figure").querySelector("figcaption").textContent;
    var texts = Array.prototype.slice.call(svg.querySelectorAll("text")).filter(function (t) { return t.textContent.trim() !== ""; });
    var lines = {};
    texts.forEach(function (t) {
      out.texts++;
      var r = t.getBoundingClientRect(), what = fig + ": " + JSON.stringify(t.textContent);
      if (r.left < b.left - 1 || r.right > b.right + 1 || r.top < b.top - 1 || r.bottom > b.bottom + 1) {
        out.clipped.push(what + " at x " + r2(r.left - b.left) + ".." + r2(r.right - b.left) + ", y " + r2(r.top - b.top) + ".." + r2(r.bottom - b.top) +
          " of a figure " + r2(b.width) + " x " + r2(b.height) + " px");
      }
      if (parseFloat(getComputedStyle(t).fontSize) >= 12 && r.top - b.top < b.height / 8) {
        out.titles.push({figure: fig, text: t.textContent, width: r2(r.width), left: r2(r.left - b.left), figureWidth: r2(b.width)});
      }
      var k = Math.round(r.top);
      (lines[k] = lines[k] || []).push({t: t, r: r, what: what});
    });
    Object.keys(lines).forEach(function (k) {
      var l = lines[k];
      l.forEach(function (a, i) {
        if (a.r.width > b.width / l.length + 1) {
          out.tooWide.push(a.what + ": " + r2(a.r.width) + " px, one of " + l.length + " on its line in " + r2(b.width) + " px");
        }
        l.slice(i + 1).forEach(function (c) {
          if (a.r.left < c.r.right - 1 && c.r.left < a.r.right - 1) { out.overlaps.push(a.what + " and " + c.what); }
        });
      });
    });
  });
  document.querySelectorAll("pre, table").forEach(function (e) {
    var s = getComputedStyle(e), what = e.tagName + " under " + JSON.stringify((e.previousElementSibling || {}).textContent || "");
    if (e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > out.width + 1) {
      out.scrolls.push(what + ": " + e.scrollWidth + " px of content in " + e.clientWidth + " px, right edge at " + r2(e.getBoundingClientRect().right));
    }
    if (e.tagName === "PRE") { out.pres.push({under: what, fontSize: parseFloat(s.fontSize), width: e.clientWidth}); }
  });
  var p = document.createElement("pre");
  p.id = "layout";
  p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
})();
</script>`

// pageLayout is what layoutScript found.
type pageLayout struct {
	Width  float64 `json:"width"`
	SVGs   int     `json:"svgs"`
	Texts  int     `json:"texts"`
	Titles []struct {
		Figure, Text             string
		Width, Left, FigureWidth float64
	} `json:"titles"`
	Clipped  []string `json:"clipped"`
	Overlaps []string `json:"overlaps"`
	TooWide  []string `json:"tooWide"`
	Scrolls  []string `json:"scrolls"`
	Pres     []struct {
		Under    string  `json:"under"`
		FontSize float64 `json:"fontSize"`
		Width    float64 `json:"width"`
	} `json:"pres"`
}

// layout opens a copy of page with layoutScript in a 1280 px wide window
// and returns what the script measured.
func layout(t *testing.T, page string) pageLayout {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	measured := filepath.Join(tmp, "measured.html")
	if err := os.WriteFile(measured, []byte(strings.Replace(string(b), "</body>", layoutScript+"\n</body>", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(tmp, "profile"), "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
		"--window-size=1280,2000", "--dump-dom", "file://"+measured)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("chromium --dump-dom: %v\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("chromium --dump-dom did not finish within 90 s\n%s", stderr.String())
	}
	dom := stdout.String()
	i := strings.Index(dom, `<pre id="layout">`)
	if i < 0 {
		t.Fatalf("the script wrote no results into the page (did it run?)\n%s", stderr.String())
	}
	dom = dom[i+len(`<pre id="layout">`):]
	dom = html.UnescapeString(dom[:strings.Index(dom, "</pre>")])
	var l pageLayout
	if err := json.Unmarshal([]byte(dom), &l); err != nil {
		t.Fatalf("the script's results %q: %v", dom, err)
	}
	return l
}

// TestReportLayoutInChromium lays the report out at 1280 px, a laptop's
// window: no SVG text cut off by its figure or running into another (the
// heat maps' titles, "row writes to colun" before), and the mesh's text
// and the tables readable (14 px or more) without a scroll bar.
func TestReportLayoutInChromium(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no %s (ci/deps.sh installs Debian's chromium): the report is not laid out in a browser", chromium)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	files := append(demoDocPaths, filepath.Join(renderDir, "mesh.json"), filepath.Join(reportDir, "ncclbench.json"),
		filepath.Join(reportDir, "doctor.json"), filepath.Join(renderDir, "lat.json"))
	if code, _, stderr := run(append([]string{"report", "-o", page}, files...)...); code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	l := layout(t, page)
	t.Logf("window %.0f px: %d figures, %d texts in them", l.Width, l.SVGs, l.Texts)
	for _, ti := range l.Titles {
		t.Logf("title %q in %q: %.1f px wide at %.1f of %.1f", ti.Text, ti.Figure, ti.Width, ti.Left, ti.FigureWidth)
	}
	for _, p := range l.Pres {
		t.Logf("pre %s: %.0f px font, %.0f px wide", p.Under, p.FontSize, p.Width)
		if p.FontSize < 14 {
			t.Errorf("pre %s: a %.1f px font: want 14 px or more", p.Under, p.FontSize)
		}
	}
	if l.Width < 1200 || l.SVGs < 5 || l.Texts < 50 || len(l.Titles) < 4 || len(l.Pres) < 2 {
		t.Fatalf("measured a window %.0f px wide, %d figures, %d texts, %d titles, %d pre: want 1280 px and make demo's figures", l.Width, l.SVGs, l.Texts, len(l.Titles), len(l.Pres))
	}
	for _, what := range [][]string{l.Clipped, l.Overlaps, l.TooWide, l.Scrolls} {
		for _, s := range what {
			t.Error(s)
		}
	}
}
