package health

import (
	"bytes"
	"fmt"
	"io"
)

// The checks health measures itself, beside doctor's, and their codes.
const (
	CheckLoopback = "bw.loopback"
	CheckNCCL     = "nccl.allreduce"

	CodeLoopbackBelow  Code = "RB201"
	CodeLoopbackFailed Code = "RB202"
	CodeNCCLBelow      Code = "RB211"
	CodeNCCLFailed     Code = "RB212"
)

// WriteText writes the report as a person reads it: a line a fault,
// a check not run and a measurement, then the status and the reason.
func (r *Report) WriteText(w io.Writer) error {
	var b bytes.Buffer
	for _, f := range r.Faults {
		fmt.Fprintf(&b, "FAULT     %s  %-14s %s\n", f.Code, f.Check, withSubject(f))
	}
	for _, f := range r.Unchecked {
		fmt.Fprintf(&b, "UNCHECKED %s  %-14s %s\n", f.Code, f.Check, withSubject(f))
	}
	for _, m := range r.Measurements {
		fmt.Fprintln(&b, measurementLine(m))
	}
	st := r.Status()
	fmt.Fprintf(&b, "rdmabench health: %s (exit %d)\n", st, int(st))
	if reason := r.Reason(); reason != "" {
		fmt.Fprintf(&b, "reason: %s\n", reason)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// measurementLine is the measurement's MEASURED line.
func measurementLine(m Measurement) string {
	if m.Err != "" {
		return fmt.Sprintf("MEASURED  %-5s  %-14s %s failed", "", m.Check, m.Subject)
	}
	line := fmt.Sprintf("MEASURED  %-5s  %-14s %s %.4g %s", "", m.Check, m.Subject, m.Value, m.Unit)
	if m.Expected > 0 {
		return line + fmt.Sprintf(" (expected %.4g from %s, at least %.0f%% of it)", m.Expected, m.Source, 100*m.MinShare)
	}
	return line + " (no expectation: --expect-bw, --baseline or --expect-busbw)"
}

func withSubject(f Fault) string {
	if f.Subject == "" {
		return f.Detail
	}
	return f.Subject + " " + f.Detail
}
