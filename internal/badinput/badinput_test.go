package badinput

import (
	"reflect"
	"testing"
)

func TestSplitWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"a b  c", []string{"a", "b", "c"}},
		{`--name 'two words' "x \"y\"" a\ b`, []string{"--name", "two words", `x "y"`, "a b"}},
		{`''`, []string{""}},
		{`-o=$T/x`, []string{"-o=$T/x"}},
	} {
		got, err := SplitWords(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`'open`, `"open`} {
		if _, err := SplitWords(bad); err == nil {
			t.Errorf("SplitWords(%q): no error", bad)
		}
	}
}

func TestParseRow(t *testing.T) {
	r, err := parseRow(`2 | outside 0..100 | NCCL_IB_DISABLE=maybe A_1=x compare --confidence 150 $F/a.json`)
	if err != nil {
		t.Fatal(err)
	}
	want := Row{Code: 2, Want: "outside 0..100", Env: []string{"NCCL_IB_DISABLE=maybe", "A_1=x"}, Args: []string{"compare", "--confidence", "150", "$F/a.json"}}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("parseRow = %+v, want %+v", r, want)
	}
	r.Want = "$T/x"
	env, args, line := r.Expand(Dirs{Files: "/f", Generated: "/g"}, "/t")
	if env[0] != "NCCL_IB_DISABLE=maybe" || args[3] != "/f/a.json" || line != "/t/x" {
		t.Errorf("Expand: %q %q %q", env, args, line)
	}
	for _, bad := range []string{"2 | no args", "x | a | b", "2 | a | X=1"} {
		if _, err := parseRow(bad); err == nil {
			t.Errorf("parseRow(%q): no error", bad)
		}
	}
}

func TestCheck(t *testing.T) {
	r := Row{Code: 2, Want: "bad value"}
	for _, tc := range []struct {
		code           int
		stdout, stderr string
		ok             bool
	}{
		{2, "", "rdmabench x: bad value\n", true},
		{1, "", "rdmabench x: bad value\n", false},
		{2, "", "rdmabench x: bad value\nusage: ...\n", false},
		{2, "", "rdmabench x: other\n", false},
		{2, "", "rdmabench x: bad value", false},
		{2, "out", "rdmabench x: bad value\n", false},
		{2, "", "panic: bad value\n", false},
	} {
		if got := r.Check(tc.code, tc.stdout, tc.stderr) == ""; got != tc.ok {
			t.Errorf("Check(%d, %q, %q) ok = %v, want %v", tc.code, tc.stdout, tc.stderr, got, tc.ok)
		}
	}
	f := Row{Code: 1, Want: "FAIL"}
	if f.Check(1, "FAIL x\nmore\n", "") != "" || f.Check(1, "ok", "") == "" {
		t.Error("a findings row checks stdout and stderr together")
	}
}
