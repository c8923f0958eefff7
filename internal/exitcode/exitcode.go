// Package exitcode is the exit-status contract that every rdmabench and
// ncclbench command follows, so that a script or a CI gate can tell a
// finding from a typo from a node that could not be measured at all.
// docs/exit-codes.md is its table; TestExitCodesDoc keeps the two alike.
package exitcode

// Code is a process exit status.
type Code = int

const (
	// OK: the command did what it was asked and found nothing wrong.
	OK Code = 0
	// Findings: it did its work and found something wrong: a doctor or
	// health FAIL, a regression, a mesh culprit, a fallback or an error in
	// an NCCL log, a run below its floor, a run cut short by a completion
	// error or a peer that died (the fabric's fault, as far as we can tell).
	Findings Code = 1
	// BadInput: nothing was measured or judged because the input was wrong:
	// a flag, a value, a file it cannot read or of the wrong kind, an
	// output it cannot create or that is also an input.
	BadInput Code = 2
	// NotMeasured: the input was fine but the command could not measure:
	// no RDMA device or no RDMA in the kernel, a device or peer it cannot
	// reach, a rendezvous that did not complete, a partial run refused as
	// a gate.
	NotMeasured Code = 3
	// Interrupted: Ctrl-C or SIGTERM ended it; what was measured so far
	// was printed and written (128 + SIGINT, as shells report it).
	Interrupted Code = 130
)

// Status is one exit status and what it means, as the docs show it.
type Status struct {
	Code    Code
	Meaning string
}

// Table is the contract as the man pages, docs/reference and
// docs/exit-codes.md show it, in order.
var Table = []Status{
	{OK, "clean: the command did what it was asked and found nothing wrong"},
	{Findings, "findings: a doctor or health FAIL, a regression, a mesh culprit or outlier, a fallback or error in an NCCL log, a run below its floor or cut short by a completion error or a peer that died"},
	{BadInput, "bad input: a flag, a value or a file it cannot read or of the wrong kind, or an output it cannot create or that is also an input; nothing was measured"},
	{NotMeasured, "could not measure: no RDMA device or no RDMA in the kernel, a device or peer it cannot reach, a rendezvous that did not complete, a partial run refused as a gate"},
	{Interrupted, "interrupted: Ctrl-C or SIGTERM; what was measured so far was printed and written"},
}
