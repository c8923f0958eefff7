package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/engine"
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
		return o, o.directionBound()
	}
	o, d := bound()
	// What a stuck server can make a client sit through, per test: the
	// accept, queued then accepted, the warm-up, the loops and the verdict.
	var stuck time.Duration
	for _, tt := range []engine.Test{engine.WriteBW, engine.SendLat} {
		p := o.plan(tt)
		stuck += 2*max(proto.HandshakeTimeout, p.Timeout) + meshQueue() + 3*engine.StepTime(p)
	}
	if d <= stuck || d < 84*time.Second {
		t.Errorf("direction bound %v, below the engine's worst case %v", d, stuck)
	}
	if meshQueue() >= d/4 {
		t.Errorf("queue timeout %v is most of the direction's bound %v", meshQueue(), d)
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
