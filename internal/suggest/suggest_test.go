package suggest

import (
	"strings"
	"testing"
)

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"abc", "", 3},
		{"write-bw", "write-bw", 0},
		{"write-bx", "write-bw", 1},  // substitution
		{"writebw", "write-bw", 1},   // insertion
		{"write--bw", "write-bw", 1}, // deletion
		{"wirte-bw", "write-bw", 1},  // swap of neighbours: one edit, Levenshtein says 2
		{"ca", "abc", 3},             // OSA, not full Damerau (which says 2)
		{"send-lat", "read-bw", 5},
	} {
		if got := Distance(tc.a, tc.b); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Distance(tc.b, tc.a); got != tc.want {
			t.Errorf("Distance(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
}

var rdmabench = []string{"atomic-bw", "atomic-lat", "compare", "devices", "doctor", "fleet", "health", "mesh", "plot",
	"read-bw", "read-lat", "send-bw", "send-lat", "serve", "version", "write-bw", "write-lat"}

func TestNearest(t *testing.T) {
	perftest := func(s string) string { return strings.ReplaceAll(strings.TrimPrefix(s, "ib_"), "_", "-") }
	for _, tc := range []struct {
		typed string
		norm  func(string) string
		want  string // joined with ","
	}{
		{"write-bx", nil, "write-bw"},
		{"wirte-bw", nil, "write-bw"},
		{"writebw", nil, "write-bw"},
		{"docter", nil, "doctor"},
		{"mseh", nil, "mesh"},               // a swap in a four-letter name
		{"sead-bw", nil, "read-bw,send-bw"}, // equally close: both named
		{"send-lta", nil, "send-lat"},
		{"sev", nil, ""}, // two edits from serve: too many for three letters
		{"lat", nil, ""}, // a part of a name is not a typo of it
		{"frobnicate", nil, ""},
		{"write-bw", nil, ""}, // the name itself is not a suggestion
		{"ib_write_bw", nil, ""},
		{"ib_write_bw", perftest, "write-bw"}, // perftest's spelling, through the tool's own rule
		{"ib_send_lat", perftest, "send-lat"},
	} {
		got := strings.Join(Nearest(tc.typed, rdmabench, tc.norm), ",")
		if got != tc.want {
			t.Errorf("Nearest(%q) = %q, want %q", tc.typed, got, tc.want)
		}
	}
}

func TestPhrase(t *testing.T) {
	for _, tc := range []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"write-bw"}, "; did you mean write-bw?"},
		{[]string{"read-bw", "send-bw"}, "; did you mean read-bw or send-bw?"},
		{[]string{"a", "b", "c"}, "; did you mean a, b or c?"},
	} {
		if got := Phrase(tc.names); got != tc.want {
			t.Errorf("Phrase(%q) = %q, want %q", tc.names, got, tc.want)
		}
	}
}

// Levenshtein is Distance without the swap: a transposition costs two.
func TestLevenshtein(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"write", "write", 0},
		{"wirte", "write", 2},
		{"kitten", "sitting", 3},
		{"NCCL_IB_HCA", "NCCL_IB_HAC", 2},
		{"NCCL_SOCKET_IFNAM", "NCCL_SOCKET_IFNAME", 1},
	} {
		if got := Levenshtein(tc.a, tc.b); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := Levenshtein(tc.b, tc.a); got != tc.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d (not symmetric)", tc.b, tc.a, got, tc.want)
		}
	}
	if Distance("wirte", "write") != 1 {
		t.Error("Distance no longer counts a swap as one edit")
	}
}
