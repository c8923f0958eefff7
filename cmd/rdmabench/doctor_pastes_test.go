package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pasteDir writes one ethtool -S paste of eth2 into a new directory.
func pasteDir(t *testing.T, stats string) string {
	t.Helper()
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, "ethtool-S.eth2.txt"), []byte("NIC statistics:\n"+stats), 0o644); err != nil {
		t.Fatal(err)
	}
	return d
}

// --pastes DIR --pastes-later DIR2 --watch N judges the counters' growth
// from the first save to the second, without waiting N for the Ethernet
// side; the same save twice grows nothing. The tree has no RDMA device,
// so port.counters has nothing to wait for either.
func TestDoctorPastesLater(t *testing.T) {
	first := pasteDir(t, "     rx_crc_errors_phy: 0\n     rx_prio3_pause: 10\n")
	later := pasteDir(t, "     rx_crc_errors_phy: 7\n     rx_prio3_pause: 10\n")
	noDevices := t.TempDir()
	for _, c := range []struct {
		name, later, want string
	}{
		{"errors grew", later, "FAIL  eth.errors"},
		{"same save twice", first, "PASS  eth.errors"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			_, stdout, stderr := runDoctorTest(t, nil, "--sysfs-root", noDevices, "--pastes", first, "--pastes-later", c.later, "--watch", "1m")
			line := lineWith(stdout, "eth.errors")
			if !strings.HasPrefix(line, c.want) {
				t.Errorf("eth.errors %q, want %q (stderr %q):\n%s", line, c.want, stderr, stdout)
			}
			if grew := strings.Contains(line, "rx_crc_errors_phy +7"); grew != (c.later == later) {
				t.Errorf("eth.errors %q: growth shown %v", line, grew)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("took %s: it waited --watch for saved outputs", took)
			}
		})
	}
}

func TestDoctorPastesLaterUsage(t *testing.T) {
	dir := pasteDir(t, "     rx_crc_errors_phy: 0\n")
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"without --pastes": {rxeArgs("--pastes-later", dir, "--watch", "1m"), "--pastes-later needs --pastes"},
		"without --watch":  {rxeArgs("--pastes", dir, "--pastes-later", dir), "--pastes-later needs --watch"},
		"missing DIR2":     {rxeArgs("--pastes", dir, "--pastes-later", filepath.Join(dir, "nope"), "--watch", "1m"), "--pastes-later: paste directory"},
	} {
		t.Run(name, func(t *testing.T) {
			code, stdout, stderr := runDoctorTest(t, nil, c.args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and one line with %q", code, stdout, stderr, c.want)
			}
		})
	}
}

// lineWith is the first line of out that holds s, trimmed.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}
