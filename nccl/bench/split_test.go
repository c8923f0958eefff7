package bench

import (
	"fmt"
	"strings"
	"testing"
)

// The colors nccl-tests gives (common.cu: color = proc OP value), and the
// groups of processes they make.
func TestSplit(t *testing.T) {
	for _, tt := range []struct {
		mask, expr string
		procs      int
		want       string // the groups
	}{
		{"", "", 4, "<nil>"},
		{"0x1", "", 4, "[[0 2] [1 3]]"},
		{"1", "MOD 3", 4, "[[0 2] [1 3]]"}, // the mask wins
		{"", "AND 0x6", 8, "[[0 1] [2 3] [4 5] [6 7]]"},
		{"", "&1", 3, "[[0 2] [1]]"},
		{"", "mod 2", 6, "[[0 2 4] [1 3 5]]"},
		{"", "%3", 6, "[[0 3] [1 4] [2 5]]"},
		{"", "DIV 2", 5, "[[0 1] [2 3] [4]]"},
		{"", "/ 4", 8, "[[0 1 2 3] [4 5 6 7]]"},
		{"", "OR 1", 4, "[[0 1] [2 3]]"},
		{"", "|0", 2, "[[0] [1]]"},
	} {
		s, err := ParseSplit(tt.mask, tt.expr)
		if err != nil {
			t.Errorf("%q %q: %v", tt.mask, tt.expr, err)
			continue
		}
		got := "<nil>"
		if s != nil {
			got = fmt.Sprint(s.Groups(tt.procs))
		}
		if got != tt.want {
			t.Errorf("mask %q split %q over %d: %s, want %s", tt.mask, tt.expr, tt.procs, got, tt.want)
		}
	}
}

// What nccl-tests would read as 0 or divide by: one line each.
func TestSplitRefused(t *testing.T) {
	for _, tt := range []struct{ mask, expr, want string }{
		{"zz", "", "hexadecimal"},
		{"", "MOD 0", "MOD by zero"},
		{"", "/0", "/ by zero"},
		{"", "XOR 3", "want AND, OR, MOD or DIV"},
		{"", "AND", "non-negative number"},
		{"", "AND -1", "non-negative number"},
		{"", "MOD eight", "non-negative number"},
	} {
		_, err := ParseSplit(tt.mask, tt.expr)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("mask %q split %q: %v, want one line with %q", tt.mask, tt.expr, err, tt.want)
		}
	}
}
