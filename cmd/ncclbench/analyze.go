package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

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
what it means.
`

// analyze exits 0 when the logs read, 3 when one cannot be read, 2 on a
// bad command line.
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
		return exitUsage
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "ncclbench analyze: no log file given (see --help)")
		return exitUsage
	}
	var files []ncclog.Named
	for _, path := range fs.Args() {
		f, err := os.Open(path)
		if err != nil {
			fmt.Fprintf(stderr, "ncclbench analyze: %v\n", err)
			return exitFail
		}
		defer f.Close()
		name := path
		if fs.NArg() == 1 {
			name = "" // one file: lines are cited by number
		}
		files = append(files, ncclog.Named{Name: name, R: f})
	}
	rep, err := ncclog.ParseFiles(files)
	if err != nil {
		fmt.Fprintf(stderr, "ncclbench analyze: %v\n", err)
		return exitFail
	}
	if *asJSON {
		log := *rep
		log.Analysis = nil // it is the document's top level
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(struct {
			Schema int `json:"schema"`
			*ncclog.Analysis
			Log     *ncclog.Report `json:"log"`
			Version *version.Info  `json:"version"`
		}{1, rep.Analysis, &log, toolInfo(nil, nil)})
	} else if err = rep.WriteText(stdout); err == nil {
		fmt.Fprintln(stdout)
		err = rep.Analysis.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ncclbench analyze: %v\n", err)
		return exitFail
	}
	return 0
}
