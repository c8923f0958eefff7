package engine

import "testing"

// A binary that sets no TestHooks (every shipped one) injects nothing,
// whatever its environment says: the variables the tests use are theirs.
func TestNoHooksOutsideTests(t *testing.T) {
	t.Setenv("RDMABENCH_VERIFY_CORRUPT", "1")
	t.Setenv("RDMABENCH_STALL_AT", "1")
	t.Setenv("RDMABENCH_SLOW_QP", "0")
	if h := hooks(); h != (Hooks{SlowQP: -1}) {
		t.Errorf("hooks without TestHooks: %+v", h)
	}
	TestHooks = func() Hooks { return Hooks{CorruptMessage: 7, SlowQP: 2} }
	defer func() { TestHooks = nil }()
	if h := hooks(); h.CorruptMessage != 7 || h.SlowQP != 2 {
		t.Errorf("hooks with TestHooks: %+v", h)
	}
}
