package kubetest

import (
	"testing"

	"github.com/rdmabench/rdmabench/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }
