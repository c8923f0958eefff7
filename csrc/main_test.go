package csrc

import (
	"fmt"
	"testing"

	"github.com/rdmabench/rdmabench/internal/leakcheck"
	"github.com/rdmabench/rdmabench/verbs"
)

// TestMain is the leak tracer: no test may leave a C loop running, a verbs
// object open or a goroutine behind.
func TestMain(m *testing.M) {
	leakcheck.Main(m, verbs.LeakReport, func() string {
		if n := Running(); n != 0 {
			return fmt.Sprintf("%d C loops running", n)
		}
		return ""
	})
}
