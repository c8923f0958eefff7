package main

import (
	"bytes"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/mesh/rank"
	"github.com/rdmabench/rdmabench/proto"
)

// The bound rank 0 gives one direction covers the engine's own worst case
// (issue 24: 62 s against write-bw's 84 s, so a stuck server got its
// healthy clients dropped), and the server's queue is a part of it, not
// the whole.
func TestMeshDirectionBound(t *testing.T) {
	bound := func(args ...string) (*meshOptions, time.Duration) {
		o, code, done := parseMeshFlags(args, io.Discard)
		if done {
			t.Fatalf("%q: exit %d", args, code)
		}
		return o, o.DirectionBound()
	}
	o, d := bound()
	// What a stuck server can make a client sit through, per test: the
	// accept, queued then accepted, the warm-up, the loops and the verdict.
	var stuck time.Duration
	for _, tt := range []engine.Test{engine.WriteBW, engine.SendLat} {
		p := o.Plan(tt, false)
		stuck += 2*max(proto.HandshakeTimeout, p.Timeout) + rank.QueueTimeout() + 3*engine.StepTime(p)
	}
	if d <= stuck || d < 84*time.Second {
		t.Errorf("direction bound %v, below the engine's worst case %v", d, stuck)
	}
	if rank.QueueTimeout() >= d/4 {
		t.Errorf("queue timeout %v is most of the direction's bound %v", rank.QueueTimeout(), d)
	}
	// --timeout is in each test's set-up (twice) and its steps (three
	// times): 40 s more is at least 10 × 40 s more bound.
	_, d60 := bound("--timeout", "60")
	if d60-d < 400*time.Second {
		t.Errorf("--timeout 20 → 60 raised the bound by %v only", d60-d)
	}
}

func TestMeshRuleFlags(t *testing.T) {
	o, code, done := parseMeshFlags([]string{"--sigmas", "5", "--expect-bw", "390"}, io.Discard)
	if done || o.rules.Sigmas != 5 || o.rules.ExpectBW != 390 {
		t.Fatalf("exit %d, rules %+v", code, o)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--sigmas", "0.5"}, "--sigmas 0.5 outside 1..100"},
		{[]string{"--expect-bw", "-1"}, "--expect-bw -1 outside"},
	} {
		var stderr strings.Builder
		if _, code, done := parseMeshFlags(tc.args, &stderr); !done || code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, stderr.String())
		}
	}
}

// --plan N says the schedule before anything runs: at 1000 ranks, 999
// rounds of 500 pairs, 999000 directions.
func TestMeshPlan(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runMesh([]string{"--plan", "1000"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"--plan 1000: 999 rounds of up to 500 pairs at once", "expected about 2h13m52s", "999000 directions"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q lacks %q", out.String(), want)
		}
	}
	pairs := writeFile(t, "pairs", "0 1\n2 3\n1 2\n")
	out.Reset()
	if code := runMesh([]string{"--plan", "4", "--pairs", pairs}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "; 6 directions") {
		t.Errorf("--pairs: exit %d %q", code, out.String())
	}
	errOut.Reset()
	if code := runMesh([]string{"--plan", "1"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "--plan 1 outside 2..") {
		t.Errorf("--plan 1: exit %d %q", code, errOut.String())
	}
}

// --screen: 1000 ranks in under 20 minutes of measurement where a
// direction's set-up is an HCA's (0.3 s): 999 rounds of both directions at
// once, 250 ms of write-bw and 100 ping-pongs (2 ms) each, 0.552 s a round,
// 9m11s; 8 controls and the outliers then at full length, 2.32 s each.
func TestMeshPlanScreen(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := runMesh([]string{"--plan", "1000", "--screen", "0.25", "--setup-estimate", "0.3"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"999 rounds of up to 500 pairs at once, screening both directions of each at once",
		"write-bw 1 MiB for 250ms and send-lat 8 B 100 times, + 300ms set-up = 552ms a round", "expected about 9m11s",
		"then 8 healthy directions (controls) and each outlier retested alone at full length (write-bw for 2s, send-lat 1000 times): about 2.3s each, 19s for the controls",
		// The retests' budget: a quarter of the rounds' 9m11s.
		"then the outliers' retests (their write-bw first 8 at a time, no rank or NIC in two; alone where slow there) within 2m18s"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("%q lacks %q", out.String(), want)
		}
	}
	// The same mesh measured in full: both directions one after the other,
	// 2 s each: 999 × 2 × 2.32 s.
	out.Reset()
	if code := runMesh([]string{"--plan", "1000", "--setup-estimate", "0.3"}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "expected about 1h17m15s") ||
		!strings.Contains(out.String(), "within 19m19s") {
		t.Errorf("full: exit %d %q", code, out.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--screen", "2"}, "--screen 2 outside 0.1 s..-D (2)"},
		{[]string{"--screen", "0.05"}, "--screen 0.05 outside"},
		{[]string{"--setup-estimate", "7200"}, "--setup-estimate 7200 outside"},
	} {
		var stderr strings.Builder
		if _, code, done := parseMeshFlags(tc.args, &stderr); !done || code != 2 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: exit %d, stderr %q", tc.args, code, stderr.String())
		}
	}
	// The rounds' tasks get the short plans, the retests (round 0) the
	// full ones; the key that every rank must share says --screen.
	o, _, _ := parseMeshFlags([]string{"--screen", "0.5", "--lat-iters", "3000"}, io.Discard)
	if p := o.Plan(engine.WriteBW, o.Screening(mesh.Task{Round: 3})); p.Duration != 500*time.Millisecond {
		t.Errorf("round 3: write-bw for %v", p.Duration)
	}
	if p := o.Plan(engine.SendLat, o.Screening(mesh.Task{Round: 3})); p.Iterations != 300 {
		t.Errorf("round 3: send-lat %d times", p.Iterations)
	}
	if p := o.Plan(engine.WriteBW, o.Screening(mesh.Task{Round: 0})); p.Duration != 2*time.Second {
		t.Errorf("retest: write-bw for %v", p.Duration)
	}
	if full, _, _ := parseMeshFlags(nil, io.Discard); full.Key() == o.Key() || !strings.Contains(o.Key(), "--screen 500ms") {
		t.Errorf("keys %q and %q", full.Key(), o.Key())
	}
}

// --analyze judges a saved mesh again: with the defaults rank 2 is the
// culprit; with looser thresholds it is not, and the report says what
// remains.
func TestMeshAnalyze(t *testing.T) {
	saved := filepath.Join("..", "..", "render", "testdata", "mesh.json")
	var out, errOut bytes.Buffer
	if code := runMesh([]string{"--analyze", saved}, &out, &errOut); code != 1 || !strings.Contains(out.String(), "LIKELY CULPRIT: rank 2 (node03)") {
		t.Errorf("defaults: exit %d %s\n%s", code, errOut.String(), out.String())
	}
	out.Reset()
	if code := runMesh([]string{"--analyze", saved, "--bw-fraction", "0.3", "--lat-multiple", "10"}, &out, &errOut); code != 1 || strings.Contains(out.String(), "CULPRIT") || !strings.Contains(out.String(), "LIKELY ONE DIRECTION: rank 1 (node02) -> rank 3") {
		t.Errorf("looser: exit %d\n%s", code, out.String())
	}
	errOut.Reset()
	if code := runMesh([]string{"--analyze", filepath.Join(t.TempDir(), "none.json")}, &out, &errOut); code != 2 || strings.Count(errOut.String(), "\n") != 1 {
		t.Errorf("missing file: exit %d %q", code, errOut.String())
	}
}
