package main

import (
	"testing"

	"github.com/rdmabench/rdmabench/nccl/bench"
)

func TestDocsCoverEveryCommand(t *testing.T) {
	tl := tool()
	if len(tl.Commands) != len(bench.Collectives)+2 {
		t.Fatalf("%d commands documented, want %d collectives, analyze and version", len(tl.Commands), len(bench.Collectives))
	}
	for _, c := range tl.Commands {
		if c.Flags == nil || c.Flags.Lookup("json") == nil {
			t.Errorf("%s: documented flags lack --json", c.Name)
		}
		if c.Name == "all_reduce" && (c.Flags.ShorthandLookup("T") == nil || c.Flags.Lookup("rendezvous-timeout") == nil) {
			t.Errorf("all_reduce's documented flags lack -T or --rendezvous-timeout")
		}
	}
}
