// Package engine runs benchmarks: it sets up each side (device, memory,
// QPs), speaks the control protocol (proto/) as client or server, and runs
// the warm-up and measured phases with their statistics. It produces
// results (results/) and shows none: render/ does, through an Observer.
// Plans and their validation are plan/'s; the native work happens in verbs/
// and csrc/.
package engine

import (
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

// The engine runs plans (plan/: the model, its limits and validation,
// without cgo). Its code names its parameters plan, hence the short names.
type (
	Plan       = rbplan.Plan
	MemorySpec = rbplan.MemorySpec
)

// The plan speaks the result model's vocabulary: a result names its test,
// transport and atomic operation with the same types the plan runs. They
// are aliases so that the plan, the wire and every caller keep the names
// engine.Test, engine.WriteBW, ... (results/ owns them: the model cannot
// import engine, which imports it).
type (
	Test      = results.Test
	AtomicOp  = results.AtomicOp
	Transport = results.Transport
	Operation = results.Operation
)

const (
	SendBW    = results.SendBW
	WriteBW   = results.WriteBW
	ReadBW    = results.ReadBW
	SendLat   = results.SendLat
	WriteLat  = results.WriteLat
	ReadLat   = results.ReadLat
	AtomicBW  = results.AtomicBW
	AtomicLat = results.AtomicLat

	FetchAndAdd = results.FetchAndAdd
	CmpAndSwap  = results.CmpAndSwap

	RC = results.RC
	UC = results.UC
	UD = results.UD

	OpSend   = results.OpSend
	OpWrite  = results.OpWrite
	OpRead   = results.OpRead
	OpAtomic = results.OpAtomic
)

// Tests lists every test in the order the CLI shows them.
var Tests = results.Tests
