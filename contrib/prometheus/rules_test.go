// Package prometheus holds the agent's Prometheus rules. The rule file is
// written from agent/rules (the thresholds the simulation reads too); its
// tests run promtool on it: check rules, and the cases of
// rdmabench-agent*.test.yml that must fire and that must not.
package prometheus

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/agent/rules"
	"github.com/rdmabench/rdmabench/internal/golden"
	"github.com/rdmabench/rdmabench/internal/promtest"
)

const (
	ruleFile = "rdmabench-agent.rules.yml"
)

// testFiles are promtool's cases: the fast rules every second, the latency
// rules every minute over four hours.
var testFiles = []string{"rdmabench-agent.test.yml", "rdmabench-agent-latency.test.yml"}

// The committed rule file is what agent/rules writes: a threshold changed
// there fails here until -update writes the file again.
func TestRuleFileWritten(t *testing.T) {
	var b bytes.Buffer
	if err := rules.Default().WriteYAML(&b); err != nil {
		t.Fatal(err)
	}
	if golden.Update() {
		if err := os.WriteFile(ruleFile, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(ruleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Errorf("%s is not what agent/rules writes (go test ./contrib/prometheus -update rewrites it):\n%s", ruleFile, b.String())
	}
}

func promtool(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := os.Stat(promtest.PromtoolBin); err != nil {
		t.Skipf("needs %s (Debian package prometheus; ci/deps.sh installs it)", promtest.PromtoolBin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtest.PromtoolBin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPromtoolCheckRules(t *testing.T) {
	out := promtool(t, "check", "rules", ruleFile)
	if !strings.Contains(out, "SUCCESS") {
		t.Errorf("promtool check rules: %s", out)
	}
}

// The cases fire each alert where it should and keep it quiet where it
// must not (a peer down is not a path, a host's stall is not a host).
func TestPromtoolTestRules(t *testing.T) {
	promtool(t, append([]string{"test", "rules"}, testFiles...)...)
	// Every alert has a case that fires it and one that expects nothing.
	var text []byte
	for _, f := range testFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text = append(text, b...)
	}
	for _, a := range rules.Alerts {
		if n := strings.Count(string(text), "alertname: "+a.String()); n < 2 {
			t.Errorf("%s: %d cases, want one that fires and one that must not", a, n)
		}
	}
}
