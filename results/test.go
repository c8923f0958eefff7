package results

import "strings"

// Test is one of the benchmarks.
type Test string

const (
	SendBW   Test = "send_bw"
	WriteBW  Test = "write_bw"
	ReadBW   Test = "read_bw"
	SendLat  Test = "send_lat"
	WriteLat Test = "write_lat"
	ReadLat  Test = "read_lat"
	// Atomics: fetch-and-add or compare-and-swap on 8 aligned bytes.
	AtomicBW  Test = "atomic_bw"
	AtomicLat Test = "atomic_lat"
)

// Tests lists every test in the order the CLI shows them.
var Tests = []Test{SendBW, WriteBW, ReadBW, AtomicBW, SendLat, WriteLat, ReadLat, AtomicLat}

// AtomicOp is an atomic operation.
type AtomicOp string

const (
	FetchAndAdd AtomicOp = "FETCH_AND_ADD"
	CmpAndSwap  AtomicOp = "CMP_AND_SWAP"
)

// Transport is the QP type a plan runs over.
type Transport string

const (
	RC Transport = "RC"
	UC Transport = "UC"
	UD Transport = "UD"
)

// Operation is the verb a test exercises.
type Operation int

const (
	OpSend Operation = iota
	OpWrite
	OpRead
	OpAtomic
)

func (o Operation) String() string {
	return [...]string{"send", "write", "read", "atomic"}[o]
}

// IsLatency reports whether the test measures latency rather than bandwidth.
func (t Test) IsLatency() bool { return strings.HasSuffix(string(t), "_lat") }

// Op is the verb the test exercises.
func (t Test) Op() Operation {
	switch t {
	case WriteBW, WriteLat:
		return OpWrite
	case ReadBW, ReadLat:
		return OpRead
	case AtomicBW, AtomicLat:
		return OpAtomic
	}
	return OpSend
}

// Valid reports whether t is one of Tests (a plan from the wire may name anything).
func (t Test) Valid() bool {
	for _, k := range Tests {
		if k == t {
			return true
		}
	}
	return false
}
