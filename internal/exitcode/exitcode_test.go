package exitcode

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// docs/exit-codes.md shows the contract as Table says it, row for row.
func TestExitCodesDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/exit-codes.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	var want strings.Builder
	want.WriteString("| status | meaning |\n|---|---|\n")
	for _, s := range Table {
		fmt.Fprintf(&want, "| %d | %s |\n", s.Code, s.Meaning)
	}
	if !strings.Contains(doc, want.String()) {
		t.Errorf("docs/exit-codes.md does not hold the table exactly as internal/exitcode has it:\n%s", want.String())
	}
	seen := map[Code]bool{}
	for _, s := range Table {
		if seen[s.Code] {
			t.Errorf("status %d twice", s.Code)
		}
		seen[s.Code] = true
	}
	for _, c := range []Code{OK, Findings, BadInput, NotMeasured, Interrupted} {
		if !seen[c] {
			t.Errorf("status %d not in the table", c)
		}
	}
}
