package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReportLook holds the page to what issue 48 found wrong with make
// demo's report: headings that said the kind twice ("Mesh mesh", "Doctor
// doctor", "Health health"), a doctor verdict that said FAIL twice, no
// host on doctor's section, and 0.00 Gb/s for the small sizes.
func TestReportLook(t *testing.T) {
	// doctor.json as a real host writes it: with its name (the fixture's
	// sysfs tree has none).
	b, err := os.ReadFile(filepath.Join(reportDir, "doctor.json"))
	if err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(t.TempDir(), "doctor.json")
	if err := os.WriteFile(named, []byte(strings.Replace(string(b), `"hostname": ""`, `"hostname": "node07"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	// health.json as health writes it now, with its host.
	hb, err := os.ReadFile(filepath.Join(reportDir, "health.json"))
	if err != nil {
		t.Fatal(err)
	}
	healthNamed := filepath.Join(t.TempDir(), "health.json")
	if err := os.WriteFile(healthNamed, []byte(strings.Replace(string(hb), `"schema": 1,`, `"schema": 1, "host": "node08",`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	page, _ := report(t, append(demoDocPaths, named, filepath.Join(reportDir, "doctor.json"), filepath.Join(reportDir, "ncclbench.json"), healthNamed)...)
	for _, w := range []string{
		"<figcaption>Mesh of 4 ranks (mesh.json)</figcaption>", "<h3>Mesh of 4 ranks (mesh.json)</h3>",
		"<h3>Health: unhealthy (health.json)</h3>", "<h3>Doctor on node07 (doctor.json)</h3>", "<h3>Doctor, host not recorded (doctor.json)</h3>",
		`<p class="note">host: node07</p>`, `<p class="note">host: not recorded in the document</p>`,
		`<span class="sev">FAIL</span> <span class="doc">doctor (node07):</span> port.rate mlx5_2:1: 100 Gb/sec (4X EDR), expected 200 Gb/sec`,
		// write-bw at 2 B: 0.000498 Gb/s, not 0.00; its message rate 0.0311 Mpps.
		"<tr><td>2 B</td><td>1</td><td>50</td><td>0.000498</td><td>0.000498</td><td>0.0311</td></tr>",
		"<td>0.268</td>", // 8 MiB: three figures below 1
		"<h3>Health of node08: unhealthy (health.json)</h3>", `<p class="note">host: node08</p>`,
		`<span class="doc">health (node08):</span>`,
	} {
		if !strings.Contains(page, w) {
			t.Errorf("no %q in the page", w)
		}
	}
	for _, bad := range []string{">Mesh mesh<", ">Doctor doctor<", ">Health health<", `doctor:</span> FAIL `, `doctor (node07):</span> FAIL `} {
		if strings.Contains(page, bad) {
			t.Errorf("the page has %q", bad)
		}
	}
	// No figure of a table reads 0.00 but a true zero: the write-bw and
	// ncclbench tables are all above it.
	if n := len(regexp.MustCompile(`<td>0\.00</td>`).FindAllString(page, -1)); n > 0 {
		t.Errorf("%d cells read 0.00", n)
	}
}
