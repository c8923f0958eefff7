package mesh

import (
	"testing"

	"github.com/rdmabench/rdmabench/internal/leakcheck"
)

// TestMain is the leak tracer: no test may leave a goroutine behind.
func TestMain(m *testing.M) { leakcheck.Main(m) }
