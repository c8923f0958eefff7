package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/nccl"
)

// toolInfo is what every JSON document says of the binary that wrote it
// and, when lib or loadErr is given, of the NCCL and CUDA runtime it found.
func toolInfo(lib *nccl.Lib, loadErr error) *version.Info {
	in := version.Get("ncclbench", false)
	switch {
	case loadErr != nil:
		in.NCCL = &version.Library{Error: loadErr.Error()}
	case lib != nil:
		in.NCCL = &version.Library{Path: lib.NCCLPath, Version: nccl.VersionString(lib.Version)}
		in.CUDART = &version.Library{Path: lib.CudartPath, Version: nccl.CudaVersionString(lib.RuntimeVersion())}
	}
	return &in
}

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("ncclbench version")
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	ncclLib := fs.String("nccl-lib", "", "libnccl.so.2 to load (file or directory)")
	cudartLib := fs.String("cudart-lib", "", "libcudart.so to load (file or directory)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprint(stdout, "usage: ncclbench version [--json] [--nccl-lib PATH] [--cudart-lib PATH]\n\nflags:\n"+fs.FlagUsages())
			return 0
		}
		fmt.Fprintf(stderr, "ncclbench version: %v\n", err)
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "ncclbench version: takes no arguments (got %q)\n", fs.Arg(0))
		return exitUsage
	}
	// The same loader a run uses; a missing NCCL is a fact to report here,
	// not a failure.
	lib, err := nccl.Open(nccl.Options{NCCLLib: *ncclLib, CudartLib: *cudartLib})
	in := toolInfo(lib, err)
	if lib != nil {
		defer lib.Close()
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(in)
	} else {
		err = in.WriteText(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "ncclbench version: %v\n", err)
		return exitFail
	}
	return 0
}
