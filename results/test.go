package results

import (
	"fmt"
	"strings"
)

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

// testNames holds what each test is called outside the code: perftest's
// banner title and the one line the command list shows.
var testNames = map[Test]struct{ title, summary string }{
	SendBW:    {"Send BW Test", "SEND/RECV bandwidth"},
	WriteBW:   {"RDMA_Write BW Test", "RDMA WRITE bandwidth"},
	ReadBW:    {"RDMA_Read BW Test", "RDMA READ bandwidth"},
	AtomicBW:  {"Atomic BW Test", "atomic fetch-and-add / compare-and-swap rate"},
	SendLat:   {"Send Latency Test", "SEND/RECV latency"},
	WriteLat:  {"RDMA_Write Latency Test", "RDMA WRITE latency"},
	ReadLat:   {"RDMA_Read Latency Test", "RDMA READ latency"},
	AtomicLat: {"Atomic Latency Test", "atomic latency"},
}

// Command is the test's command name: write-bw for write_bw.
func (t Test) Command() string { return strings.ReplaceAll(string(t), "_", "-") }

// Perftest is the name of perftest's binary for the test: ib_write_bw.
func (t Test) Perftest() string { return "ib_" + string(t) }

// Title is perftest's banner title for the test ("RDMA_Write BW Test").
func (t Test) Title() string { return testNames[t].title }

// Summary is the test's line in the command list, with perftest's name.
func (t Test) Summary() string {
	return fmt.Sprintf("%s (%s)", testNames[t].summary, t.Perftest())
}

// CommandSpelling maps any spelling of a test's name to a command's:
// perftest's ib_write_bw and the JSON's write_bw both read write-bw. Names
// that are not tests are spelled the same way, so that a typo of
// perftest's name ("ib_write_bx") is still compared as a command's.
func CommandSpelling(s string) string {
	return strings.ReplaceAll(strings.TrimPrefix(s, "ib_"), "_", "-")
}

// TestFromName parses a test's name as a command (write-bw), the JSON
// (write_bw) or perftest (ib_write_bw) spell it.
func TestFromName(s string) (Test, bool) {
	t := Test(strings.ReplaceAll(CommandSpelling(s), "-", "_"))
	return t, t.Valid()
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
