package main

import "testing"

// The docs cover every command with the flags its own parser takes.
func TestDocsCoverEveryCommand(t *testing.T) {
	tl := tool()
	if len(tl.Commands) != len(commands) {
		t.Fatalf("%d commands documented, %d registered", len(tl.Commands), len(commands))
	}
	for _, c := range tl.Commands {
		if c.Name == "write-bw" && (c.Flags.Lookup("timeout") == nil || c.Flags.Lookup("load") == nil || c.Flags.Lookup("push-timeout") == nil) {
			t.Errorf("write-bw's documented flags lack --timeout, --load or --push-timeout")
		}
		if c.Name == "version" && c.Flags.Lookup("json") == nil {
			t.Errorf("version's documented flags lack --json")
		}
	}
	if flagSetMade != nil {
		t.Error("tool left the flag-set hook set")
	}
}
