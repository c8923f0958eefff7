package main

import (
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/agent/plan"
	"github.com/rdmabench/rdmabench/internal/durflag"
)

func init() {
	register("agent", "an always-on fabric monitor (--plan prints what one costs; the probing daemon is not built yet)", runAgent)
}

// agentNotBuilt is what the agent says without --plan: the daemon that
// probes over a UD QP is not built yet.
const agentNotBuilt = "rdmabench agent: the probing daemon is not built yet; --plan prints a plan"

func runAgent(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agent", stderr)
	d := plan.DefaultInput(0, 32)
	in := d
	fs.IntVar(&in.Nodes, "plan", 0, "print the probes, traffic, series and RNIC failure detection time of a fabric of N nodes' agents, without probing")
	fs.IntVar(&in.ToRSize, "tor-size", d.ToRSize, "nodes under one ToR (or rail) in the plan: each node probes the others under its ToR")
	fs.IntVar(&in.K, "k", d.K, "peers under other ToRs each node probes, drawn anew every --redraw")
	fs.Float64Var(&in.Rate, "rate", d.Rate, "probes a second to each peer")
	fs.Float64Var(&in.Budget, "budget", d.Budget, "probes a second a node may send to all its peers together; the rate per peer is lowered to fit")
	durflag.VarP(fs, &in.Redraw, "redraw", "", d.Redraw, "how often the remote peers are drawn anew")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rdmabench agent: takes no arguments (got %q)\n", fs.Arg(0))
		return 2
	}
	if !fs.Changed("plan") {
		fmt.Fprintln(stderr, agentNotBuilt)
		return 2
	}
	if err := in.Validate(); err != nil {
		fmt.Fprintf(stderr, "rdmabench agent: %v\n", err)
		return 2
	}
	if err := plan.Make(in).WriteText(stdout); err != nil {
		return fail(stderr, "agent: %v", err)
	}
	return 0
}
