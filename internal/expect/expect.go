// Package expect holds the assertions that tests across the project make
// of a command's or a writer's text, so that each is written once.
package expect

import (
	"strings"
	"testing"
)

// Contains fails t for each of wants that got lacks, showing got; what
// names the text in the message ("output", "page").
func Contains(t testing.TB, what, got string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, got)
		}
	}
}
