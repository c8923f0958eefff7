package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// digestT is a *testing.T that says its failures once more, together, as
// the test's last lines: a long test's failures otherwise sit far above
// the agents' logs and the evidence it prints when it fails, and CI shows
// only the tail of the output.
type digestT struct {
	*testing.T
	mu    sync.Mutex
	fails []string
}

// withDigest wraps t; call it first, so that its cleanup runs last.
func withDigest(t *testing.T) *digestT {
	d := &digestT{T: t}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.fails) == 0 {
			t.Logf("FAILED: see above (a helper's failure)")
			return
		}
		t.Logf("FAILED, %d failure(s), again:\n  %s", len(d.fails), strings.Join(d.fails, "\n  "))
	})
	return d
}

func (d *digestT) note(msg string) {
	d.mu.Lock()
	d.fails = append(d.fails, msg)
	d.mu.Unlock()
}

func (d *digestT) Errorf(format string, args ...any) {
	d.T.Helper()
	d.note(fmt.Sprintf(format, args...))
	d.T.Errorf(format, args...)
}

func (d *digestT) Error(args ...any) {
	d.T.Helper()
	d.note(fmt.Sprint(args...))
	d.T.Error(args...)
}

func (d *digestT) Fatalf(format string, args ...any) {
	d.T.Helper()
	d.note(fmt.Sprintf(format, args...))
	d.T.Fatalf(format, args...)
}

func (d *digestT) Fatal(args ...any) {
	d.T.Helper()
	d.note(fmt.Sprint(args...))
	d.T.Fatal(args...)
}
