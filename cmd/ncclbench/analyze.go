package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/ncclog"
	"github.com/spf13/pflag"
)

const analyzeUsage = `usage: ncclbench analyze [--json] NCCL_LOG_FILE...

Reads NCCL_DEBUG=INFO logs (one file, or one per node or rank; launcher
prefixes such as mpirun's [1,N]<stdout>: are fine) and says, overall and per
host, which NCCL versions ran, the network and transport (ib, roce, socket),
whether NCCL fell back to TCP sockets (and whether NCCL_IB_DISABLE caused it),
whether GPUDirect RDMA was used (yes, no, partial), which hosts never finished
init, and what failed (completion errors, verbs calls, watchdog timeouts) with
what it means. A log may be gzip-compressed; lines over 1 MiB (application
output, never NCCL's) are skipped and counted.

Exit status, to gate CI on:
  0  the logs were read and nothing wrong was found
  1  findings: a fallback to TCP sockets, completion, verbs or async errors,
     timeouts, no GPUDirect RDMA, an init that never completed, mixed NCCL
     versions, other NCCL WARN lines (the last line says how many)
  2  bad input: a bad flag, a file that cannot be read, or one that is no
     NCCL log at all (empty, binary, compressed other than gzip, a JSON
     document, text without a single NCCL line)

`

// analyze exits 0 when the logs read and show nothing wrong, 1 with
// findings, 2 on a bad command line or a file that is no NCCL log.
func analyze(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("ncclbench analyze")
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "write one JSON document: the analysis overall and per host, and the parsed log")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, analyzeUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "ncclbench analyze: %v (see --help)\n", err)
		return exitcode.BadInput
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "ncclbench analyze: no log file given (see --help)")
		return exitcode.BadInput
	}
	var files []ncclog.Named
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "ncclbench analyze: %v\n", err)
			return exitcode.BadInput
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			fmt.Fprintf(stderr, "ncclbench analyze: %s is a directory; give the log files in it\n", path)
			return exitcode.BadInput
		}
		name := path
		if fs.NArg() == 1 {
			name = "" // one file: lines are cited by number
		}
		files = append(files, ncclog.Named{Name: name, R: f})
	}
	rep, err := ncclog.ParseFiles(files)
	if err == nil {
		err = rep.CheckLog()
	}
	if err != nil {
		// One file's lines are cited by number alone: name it here.
		if nl := (*ncclog.NotLogError)(nil); errors.As(err, &nl) && nl.Name == "" {
			nl.Name = fs.Arg(0)
		} else if nl == nil && fs.NArg() == 1 {
			err = fmt.Errorf("%s: %w", fs.Arg(0), err)
		}
		fmt.Fprintf(stderr, "ncclbench analyze: %v\n", err)
		return exitcode.BadInput
	}
	problems := rep.Analysis.Problems()
	if *asJSON {
		log := *rep
		log.Analysis = nil // it is the document's top level
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			Schema int `json:"schema"`
			*ncclog.Analysis
			// Problems: why the exit status is 1; empty with 0.
			Problems []string       `json:"problems"`
			Log      *ncclog.Report `json:"log"`
			Version  *version.Info  `json:"version"`
		}{1, rep.Analysis, problems, &log, toolInfo(nil, nil)})
	} else if err = rep.WriteText(stdout); err == nil {
		fmt.Fprintln(stdout)
		if err = rep.Analysis.WriteText(stdout); err == nil {
			err = writeVerdict(stdout, problems)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "ncclbench analyze: %v\n", err)
		return exitcode.BadInput
	}
	if len(problems) > 0 {
		return exitcode.Findings
	}
	return exitcode.OK
}

// writeVerdict ends the text with the exit status's reason.
func writeVerdict(w io.Writer, problems []string) error {
	if len(problems) == 0 {
		_, err := fmt.Fprintln(w, "Verdict:        OK: nothing wrong found (exit 0)")
		return err
	}
	_, err := fmt.Fprintf(w, "Verdict:        %d problem(s) found (exit 1): %s\n", len(problems), strings.Join(problems, "; "))
	return err
}
