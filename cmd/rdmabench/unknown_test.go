package main

import "testing"

// An unknown command is one line on stderr and the usage exit status, 2,
// naming the command meant when it is a typo of one.
func TestUnknownCommand(t *testing.T) {
	for _, tc := range []struct{ typed, want string }{
		{"write-bx", `rdmabench: unknown command "write-bx"; did you mean write-bw?` + "\n"},
		{"wirte-lat", `rdmabench: unknown command "wirte-lat"; did you mean write-lat?` + "\n"},
		{"ib_write_bw", `rdmabench: unknown command "ib_write_bw"; did you mean write-bw?` + "\n"},
		{"docter", `rdmabench: unknown command "docter"; did you mean doctor?` + "\n"},
		{"sead-bw", `rdmabench: unknown command "sead-bw"; did you mean read-bw or send-bw?` + "\n"},
		{"frobnicate", `rdmabench: unknown command "frobnicate" (run 'rdmabench help' for the list)` + "\n"},
		{"lat", `rdmabench: unknown command "lat" (run 'rdmabench help' for the list)` + "\n"},
	} {
		code, out, errOut := run(tc.typed, "-s", "8")
		if code != 2 || out != "" || errOut != tc.want {
			t.Errorf("rdmabench %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", tc.typed, code, out, errOut, tc.want)
		}
	}
}
