package render

import (
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/results"
)

// Table prints the perftest-style table as a run is measured: the header
// when it starts, a row as each result arrives (so that an interrupted run
// still shows what was measured), a line per --interval, the closing rule.
// It is what engine's client calls back; the methods follow its Observer.
type Table struct {
	W    io.Writer
	Opts TextOptions
}

// Start writes the banner and the header row.
func (t Table) Start(r *results.Run) error { return TextHeader(t.W, r, t.Opts) }

// Measured writes one result's row.
func (t Table) Measured(r *results.Run, res results.Result) error {
	return TextRow(t.W, r, res, t.Opts)
}

// Interval writes one --interval line, as iperf3 does.
func (t Table) Interval(size int, iv results.Interval) {
	fmt.Fprintf(t.W, " [%7.2f-%7.2f s] %10d B %12d msgs %10.3f Gb/sec\n", iv.StartS, iv.EndS, size, iv.Messages, iv.Gbps)
}

// End closes the table.
func (t Table) End(*results.Run) error { return TextFooter(t.W) }
