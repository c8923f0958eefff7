package engine

// Hooks are faults only tests inject, to prove that a check catches them;
// the shipped binaries never set TestHooks, so nothing a user's
// environment holds can trigger them.
type Hooks struct {
	// CorruptMessage is the message (from 1) whose bytes are damaged:
	// --verify's own test.
	CorruptMessage uint64
	// StallAt is the message (from 1, counted over a responder's call,
	// warm-up included) before which a ping-pong responder pauses stallFor:
	// the coordinated-omission test.
	StallAt uint64
	// SlowQP is the QP index held to one request in flight, posted 5 ms
	// apart: the per-QP figures' test. Negative: none.
	SlowQP int
}

// TestHooks, set by a test binary, says which hooks a run applies. It is
// asked at each step, so a test may change them between runs.
var TestHooks func() Hooks

func hooks() Hooks {
	if TestHooks == nil {
		return Hooks{SlowQP: -1}
	}
	return TestHooks()
}
