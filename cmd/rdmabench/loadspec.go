package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/results"
)

// loadFlags are the flags a --load SPEC may give: what shapes its traffic.
// The rest (device, peer, outputs, -n, -D) belong to the measurement.
var loadFlags = map[string]bool{
	"size": true, "tx-depth": true, "rx-depth": true, "inline-size": true, "mtu": true, "sl": true,
	"tclass": true, "qp-timeout": true, "cq-mod": true, "qp": true, "threads": true, "connection": true,
	"imm": true, "post-list": true, "atomic-type": true,
}

// parseLoadSpec reads one --load SPEC, "TEST FLAGS...", with the command
// line's own flag parser.
func parseLoadSpec(spec string) (engine.Plan, error) {
	f := strings.Fields(spec)
	if len(f) == 0 {
		return engine.Plan{}, errors.New(`--load "": want a bandwidth test and its flags, e.g. "write-bw -q 4 -s 1M"`)
	}
	test, ok := results.TestFromName(f[0])
	if !ok || test.IsLatency() {
		return engine.Plan{}, fmt.Errorf("--load %q: %q is not a bandwidth test (send-bw, write-bw, read-bw, atomic-bw)", spec, f[0])
	}
	for _, a := range f[1:] {
		if a == "--load" || strings.HasPrefix(a, "--load=") {
			return engine.Plan{}, fmt.Errorf("--load %q: a load has no loads of its own", spec)
		}
	}
	// The SPEC's parse prints nothing (not even --help's usage): its
	// error comes back as the one line.
	cli, err := parseTest(test, f[1:], io.Discard)
	if errors.Is(err, pflag.ErrHelp) {
		return engine.Plan{}, fmt.Errorf("--load %q: see %s --help for its flags", spec, f[0])
	}
	if err != nil {
		return engine.Plan{}, fmt.Errorf("--load %q: %w", spec, err)
	}
	if cli.fs.NArg() > 0 {
		return engine.Plan{}, fmt.Errorf("--load %q: takes no HOST (the load goes to the measurement's peer)", spec)
	}
	var bad []string
	cli.fs.Visit(func(fl *pflag.Flag) {
		if !loadFlags[fl.Name] {
			bad = append(bad, "--"+fl.Name)
		}
	})
	if len(bad) > 0 {
		verb := "belongs"
		if len(bad) > 1 {
			verb = "belong"
		}
		return engine.Plan{}, fmt.Errorf("--load %q: %s %s to the measurement, not to a load (a load takes -s -q -t -r -I -m -S -T -u -Q -c -l -A --threads --imm)", spec, strings.Join(bad, " "), verb)
	}
	return cli.plan, nil
}
