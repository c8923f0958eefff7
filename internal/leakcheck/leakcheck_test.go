package leakcheck

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	Settle = 200 * time.Millisecond
	Main(m, func() string {
		if widgets != 0 {
			return fmt.Sprintf("open widgets: %d", widgets)
		}
		return ""
	})
}

func TestLeaks(t *testing.T) {
	defer func(s time.Duration) { Settle = s }(Settle)
	Settle = 200 * time.Millisecond
	stop := make(chan struct{})
	defer close(stop)
	for _, tc := range []struct {
		name   string
		start  func() // what the "test" leaves behind
		checks []Check
		want   []string // substrings, one a leak
	}{
		{"nothing", func() {}, nil, nil},
		{"a goroutine that ends within Settle", func() {
			go func() { time.Sleep(50 * time.Millisecond) }()
		}, nil, nil},
		{"a goroutine still running", func() {
			go parked(stop)
		}, nil, []string{"leakcheck.parked"}},
		{"a counter not zero", func() {}, []Check{
			func() string { return "" },
			func() string { return "open verbs objects: pd=1" },
		}, []string{"pd=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := Goroutines()
			tc.start()
			got := Leaks(before, tc.checks...)
			if len(got) != len(tc.want) {
				t.Fatalf("Leaks = %q, want %d leaks like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("leak %d = %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}

func parked(stop chan struct{}) { <-stop }

// Main itself: a test binary whose tests pass but leave a goroutine and a
// native object behind exits 1 and names both.
func TestMainFailsALeakyRun(t *testing.T) {
	if os.Getenv(childEnv) == "1" {
		t.Skip("the child runs TestLeakyChild only")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLeakyChild$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("child: %v, want exit status 1\n%s", err, out)
	}
	for _, want := range []string{"the tests passed but left behind", "leakcheck.TestLeakyChild", "open widgets: 1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child's output lacks %q:\n%s", want, out)
		}
	}
}

const childEnv = "LEAKCHECK_TEST_CHILD"

var widgets int

func TestLeakyChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("run by TestMainFailsALeakyRun")
	}
	widgets++
	go func() { select {} }()
}
