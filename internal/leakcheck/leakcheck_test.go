package leakcheck

import (
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

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
