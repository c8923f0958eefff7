// Package leakcheck is the gate every test binary that can leak ends with
// (after cilium/ebpf's leak tracer in TestMain): it runs the tests, then
// fails a run that passed when a goroutine the tests started is still
// running, or when a package's count of live native objects (verbs
// objects, C loops, GPU buffers) is not zero. A leak found here is a bug
// to fix, never one to suppress: there is no list of goroutines to allow
// beyond the runtime's and testing's own.
//
// It imports none of the packages it checks, so that their own internal
// tests can use it: each passes its counters as Checks.
package leakcheck

import (
	"fmt"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// Check says what a package still holds once every test has returned, ""
// when nothing: "open verbs objects: pd=1", "2 C loops running".
type Check func() string

// Settle is how long goroutines that are ending get to end: a test's
// Close may return while a goroutine it stopped is still on its way out.
var Settle = 2 * time.Second

// Main runs the tests, then the checks, and exits: 1 with a list of what
// leaked when the tests passed and something leaked, else the tests' code.
func Main(m *testing.M, checks ...Check) {
	os.Exit(Run(m, checks...))
}

// Run is Main without the exit, for a TestMain with cleanups of its own
// to run before it exits.
func Run(m *testing.M, checks ...Check) int {
	before := goroutineIDs(stacks())
	code := m.Run()
	if code != 0 {
		return code // the failures say more than a leak would
	}
	if leaks := Leaks(before, checks...); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: the tests passed but left behind:\n  %s\n", strings.Join(leaks, "\n  "))
		return 1
	}
	return 0
}

// Leaks waits up to Settle for the goroutines not in before to end and the
// checks to report nothing, and returns what is left.
func Leaks(before map[string]bool, checks ...Check) []string {
	deadline := time.Now().Add(Settle)
	for {
		leaks := current(before, checks)
		if len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func current(before map[string]bool, checks []Check) []string {
	var leaks []string
	for _, c := range checks {
		if s := c(); s != "" {
			leaks = append(leaks, s)
		}
	}
	for _, g := range extra(before, stacks()) {
		leaks = append(leaks, "goroutine "+g)
	}
	return leaks
}

// Goroutines is a snapshot of the goroutines running now, to pass to Leaks.
func Goroutines() map[string]bool { return goroutineIDs(stacks()) }

func stacks() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(strings.TrimSpace(string(buf[:n])), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

var header = regexp.MustCompile(`^goroutine (\d+) `)

func goroutineIDs(gs []string) map[string]bool {
	ids := map[string]bool{}
	for _, g := range gs {
		if m := header.FindStringSubmatch(g); m != nil {
			ids[m[1]] = true
		}
	}
	return ids
}

// ours are the goroutines of the runtime and of testing, which outlive
// the tests by design (the first is the one running the check).
var ours = []string{
	"testing.(*M).",
	"testing.runTests",
	"os/signal.signal_recv",
	"os/signal.loop",
	"runtime.ensureSigM",
	"created by runtime.gc",
	"runtime/trace.",
}

// extra is the goroutines in gs not in before and not the runtime's or
// testing's, each as its header and the first frames of its stack.
func extra(before map[string]bool, gs []string) []string {
	var out []string
	for i, g := range gs {
		m := header.FindStringSubmatch(g)
		if i == 0 || m == nil || before[m[1]] || isOurs(g) {
			continue
		}
		out = append(out, summary(g))
	}
	sort.Strings(out)
	return out
}

func isOurs(g string) bool {
	for _, s := range ours {
		if strings.Contains(g, s) {
			return true
		}
	}
	return false
}

// summary is a goroutine's header, the frames of this module's code on
// its stack (the runtime's and the standard library's say little) and
// where it was created: enough to find the code that started it.
func summary(g string) string {
	lines := strings.Split(g, "\n")
	var funcs []string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "\t") {
			continue
		}
		if strings.HasPrefix(l, "created by ") || isModule(l) {
			funcs = append(funcs, l)
		}
	}
	if len(funcs) > 6 {
		funcs = append(funcs[:5], funcs[len(funcs)-1])
	}
	return strings.TrimPrefix(lines[0], "goroutine ") + "\n    " + strings.Join(funcs, "\n    ")
}

// isModule says whether a frame is outside the standard library, whose
// import paths have no dot in their first element.
func isModule(frame string) bool {
	first, _, _ := strings.Cut(frame, "/")
	return strings.Contains(first, ".") && strings.Contains(frame, "/")
}
