package durflag

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Duration
		wantErr string // "" when the value is taken
	}{
		{"30", 30 * time.Second, ""},
		{"0", 0, ""},
		{"2.5", 2500 * time.Millisecond, ""},
		{"0.1", 100 * time.Millisecond, ""},
		{"1e3", 1000 * time.Second, ""},
		{"30s", 30 * time.Second, ""},
		{"1m", time.Minute, ""},
		{"1m30s", 90 * time.Second, ""},
		{"500ms", 500 * time.Millisecond, ""},
		{"0s", 0, ""},
		{"-1", 0, "must not be negative"},
		{"-1s", 0, "must not be negative"},
		{"-0.5", 0, "must not be negative"},
		{"", 0, "want seconds"},
		{"abc", 0, "want seconds"},
		{"30 s", 0, "want seconds"},
		{"10x", 0, "want seconds"},
		{"NaN", 0, "want seconds"},
		{"inf", 0, "want seconds"},
		{"1e300", 0, "too long"},
		{"9999999999999", 0, "too long"},
	} {
		got, err := Parse(tc.in)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("Parse(%q): %v, want %v", tc.in, err, tc.want)
		case tc.wantErr == "" && got != tc.want:
			t.Errorf("Parse(%q) = %v, want %v", tc.in, got, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("Parse(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
		}
	}
}

// The flag on a flag set: default, both forms, pflag's one-line refusal,
// and help that shows the default (and none for zero).
func TestFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    time.Duration
		wantErr string
	}{
		{nil, 2 * time.Minute, ""},
		{[]string{"--timeout", "30"}, 30 * time.Second, ""},
		{[]string{"--timeout=45s"}, 45 * time.Second, ""},
		{[]string{"-T", "1m"}, time.Minute, ""},
		{[]string{"-T", "-1"}, 0, `invalid argument "-1" for "-T, --timeout" flag: must not be negative`},
		{[]string{"--timeout", "soon"}, 0, `invalid argument "soon" for "-T, --timeout" flag: want seconds`},
	} {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(new(strings.Builder))
		d := P(fs, "timeout", "T", 2*time.Minute, "deadline")
		var z time.Duration
		VarP(fs, &z, "interval", "", 0, "every")
		err := fs.Parse(tc.args)
		switch {
		case tc.wantErr == "" && (err != nil || *d != tc.want):
			t.Errorf("%q: %v, %v; want %v", tc.args, *d, err, tc.want)
		case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%q: error %v, want one line starting %q", tc.args, err, tc.wantErr)
		}
		help := fs.FlagUsages()
		if !strings.Contains(help, "--timeout duration") || !strings.Contains(help, "(default 2m0s)") || strings.Contains(help, "every (default") {
			t.Errorf("help:\n%s", help)
		}
	}
}

func TestSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0", 1500 * time.Millisecond: "1.5", 24 * time.Hour: "86400"} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %q, want %q", d, got, want)
		}
	}
}
