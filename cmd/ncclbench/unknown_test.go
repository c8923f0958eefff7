package main

import (
	"bytes"
	"testing"
)

// An unknown command is one line and the usage exit status, naming the
// command meant when it is a typo of one.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct{ typed, want string }{
		{"all_reduc", `ncclbench: unknown command "all_reduc"; did you mean all_reduce?` + "\n"},
		{"all-gahter", `ncclbench: unknown command "all-gahter"; did you mean all_gather?` + "\n"},
		{"alltoal_perf", `ncclbench: unknown command "alltoal_perf"; did you mean alltoall?` + "\n"}, // nccl-tests' binary name, misspelt
		{"analyse", `ncclbench: unknown command "analyse"; did you mean analyze?` + "\n"},
		{"frobnicate", `ncclbench: unknown command "frobnicate" (want all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, sendrecv, analyze or version)` + "\n"},
	} {
		var out, errOut bytes.Buffer
		code := run([]string{"ncclbench", tc.typed, "-b", "8"}, &out, &errOut)
		if code != exitUsage || out.Len() != 0 || errOut.String() != tc.want {
			t.Errorf("ncclbench %s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.typed, code, out.String(), errOut.String(), exitUsage, tc.want)
		}
	}
}
