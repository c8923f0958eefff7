package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/agent/plan"
)

func TestAgentCommand(t *testing.T) {
	want := func(in plan.Input) string {
		var b bytes.Buffer
		plan.Make(in).WriteText(&b)
		return b.String()
	}
	custom := plan.DefaultInput(5000, 16)
	custom.K, custom.Rate = 4, 20
	cases := []struct {
		args         []string
		code         int
		stdout, line string
	}{
		{[]string{"--plan", "10000", "--tor-size", "32"}, 0, want(plan.DefaultInput(10000, 32)), ""},
		{[]string{"--plan", "5000", "--tor-size", "16", "--k", "4", "--rate", "20"}, 0, want(custom), ""},
		{nil, 2, "", agentNotBuilt},
		{[]string{"--k", "3"}, 2, "", agentNotBuilt},
		{[]string{"--plan", "1"}, 2, "", "rdmabench agent: --plan 1 outside 2..1048576 nodes"},
		{[]string{"--plan", "100", "--tor-size", "101"}, 2, "", "rdmabench agent: --tor-size 101 outside 1..100 (the nodes)"},
		{[]string{"--plan", "100", "--rate", "0"}, 2, "", "rdmabench agent: --rate 0 outside (0, 1000] probes a second"},
		{[]string{"--plan", "100", "--redraw", "x"}, 2, "", `rdmabench agent: invalid argument "x" for "--redraw" flag: want seconds (30, 2.5) or a duration (30s, 1m30s, 500ms) (see --help)`},
		{[]string{"--plan", "100", "extra"}, 2, "", `rdmabench agent: takes no arguments (got "extra")`},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := runMain(append([]string{"agent"}, c.args...), &out, &errb)
		if code != c.code || out.String() != c.stdout || strings.TrimSuffix(errb.String(), "\n") != c.line {
			t.Errorf("agent %v: exit %d, stdout %q, stderr %q; want %d, %q, %q", c.args, code, out.String(), errb.String(), c.code, c.stdout, c.line)
		}
	}
}
