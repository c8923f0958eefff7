package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	for _, t := range engine.Tests {
		register(t.Command(), t.Summary(), func(args []string, stdout, stderr io.Writer) int {
			return runTest(t, args, stdout, stderr)
		})
	}
	register("serve", "serve benchmark clients one after another (the server side)", runServe)
}

func runTest(test engine.Test, args []string, stdout, stderr io.Writer) int {
	name := test.Command()
	tc, err := parseTest(test, args, stderr)
	if errors.Is(err, pflag.ErrHelp) {
		tc.fs.SetOutput(stderr)
		tc.fs.Usage()
		return 0
	}
	if err == nil {
		err = tc.checkArgs()
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
		return exitcode.BadInput
	}
	cfg := engine.ClientConfig{Device: tc.dc, Plan: tc.plan}
	cfg.Device.Warnings = stderr
	if !*tc.loopback { // loopback's port lives as long as its one run: no token
		if cfg.Token, err = loadToken(*tc.tokenFile, stderr); err != nil {
			fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
			return exitcode.BadInput
		}
	}
	if code, err := tc.checkDevices(cfg.Device); err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
		return code
	}
	if !*tc.asJSON {
		table := render.Table{W: stdout, Opts: render.TextOptions{Gbits: *tc.gbits, PerQP: *tc.perQP, CPU: *tc.cpuUtil}}
		cfg.Observer = table
		if isTerminal(stdout) { // a pipe or a file gets the table alone
			cfg.Observer = &render.Progress{Inner: table, W: stdout, Total: tc.plan.Measurements() * *tc.out.repeat}
		}
	}
	var rawFile *os.File
	if *tc.raw != "" {
		f, err := os.Create(*tc.raw)
		if err != nil {
			fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
			return exitcode.BadInput
		}
		defer f.Close()
		fmt.Fprintln(f, "size,qp,iteration,latency_ns")
		rawFile, cfg.Raw = f, f
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	runs, err := tc.measureRepeats(ctx, cfg, stdout)
	run, err := finishRepeats(runs, *tc.out.repeat, err)
	if rawFile != nil {
		if cerr := rawFile.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if werr := tc.writeResults(ctx, run, stdout); werr != nil && err == nil {
		err = werr
	}
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench %s: %v\n", name, err)
		return runExitCode(err, len(runs) > 0)
	}
	return exitcode.OK
}

// checkArgs checks what the plan does not hold: -D against -n, the HOST
// or --loopback, and every output path, before the device is opened (a
// long run must not end by losing its results to a typo in a path).
func (tc *testCLI) checkArgs() error {
	fs := tc.fs
	switch {
	// As perftest, which refuses the two together (a --load's SPEC says
	// instead that both belong to the measurement).
	case fs.Changed("duration") && fs.Changed("iters"):
		return errors.New("-D and -n exclude each other: a size runs for a duration or for a number of iterations")
	case *tc.loopback && fs.NArg() > 0:
		return errors.New("--loopback takes no HOST")
	case !*tc.loopback && fs.NArg() != 1:
		return errors.New("give the server's HOST (or --loopback)")
	case (*tc.peerDev != "" || tc.peerCPUs != nil) && !*tc.loopback:
		return errors.New("--peer-dev and --peer-cpus need --loopback")
	case !*tc.loopback && isHostList(fs.Arg(0)):
		return fmt.Errorf("%q: the server is one host (run serve on one node and give its name; rdmabench mesh tests many)", fs.Arg(0))
	}
	var inputs []string
	if *tc.tokenFile != "" {
		inputs = append(inputs, *tc.tokenFile)
	}
	return publish.CheckOutputs([]publish.Output{{Flag: "--save", Path: *tc.out.save}, {Flag: "--metrics", Path: *tc.out.metrics},
		{Flag: "--hgrm", Path: *tc.hgrm}, {Flag: "--raw", Path: *tc.raw}}, inputs)
}

// checkDevices opens nothing: it says whether -d (and --peer-dev) name a
// device and port here, with the exit code when not.
func (tc *testCLI) checkDevices(dc engine.DeviceConfig) (int, error) {
	if code, err := checkDevice(dc, "-d"); err != nil {
		return code, err
	}
	if *tc.loopback && *tc.peerDev != "" {
		peer := dc
		peer.Device = *tc.peerDev
		return checkDevice(peer, "--peer-dev")
	}
	return exitcode.OK, nil
}

// measureRepeats runs the measurement --repeat times, each on a new
// connection; the first failure ends the repeats and keeps what they
// measured.
func (tc *testCLI) measureRepeats(ctx context.Context, cfg engine.ClientConfig, stdout io.Writer) ([]*results.Run, error) {
	measure := func() (*results.Run, error) {
		if *tc.loopback {
			cfg.Mode = "loopback"
			peer := cfg.Device
			peer.CPUs = tc.peerCPUs
			if *tc.peerDev != "" {
				peer.Device = *tc.peerDev
			}
			return engine.RunLoopback(ctx, cfg, peer)
		}
		cfg.Addr = net.JoinHostPort(tc.fs.Arg(0), strconv.Itoa(*tc.df.tcpPort))
		return engine.RunClient(ctx, cfg)
	}
	var runs []*results.Run
	for i := range *tc.out.repeat {
		if *tc.out.repeat > 1 && cfg.Observer != nil {
			fmt.Fprintf(stdout, " Repeat %d of %d\n", i+1, *tc.out.repeat)
		}
		r, err := measure()
		if r != nil {
			runs = append(runs, r)
		}
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

// writeResults writes what was measured (nothing when run is nil): -J's
// document, --hgrm and --save, --metrics, --push; the first error.
func (tc *testCLI) writeResults(ctx context.Context, run *results.Run, stdout io.Writer) error {
	if run == nil {
		return nil
	}
	run.Version = toolInfo()
	var err error
	if *tc.asJSON {
		err = render.JSON(stdout, run)
	}
	if *tc.hgrm != "" {
		if herr := writeHgrms(*tc.hgrm, run); herr != nil && err == nil {
			err = herr
		}
	}
	if oerr := tc.out.write(ctx, run); oerr != nil && err == nil {
		err = oerr
	}
	return err
}

// runExitCode is a run command's status after err: Interrupted on Ctrl-C;
// NotMeasured when nothing was measured (no RDMA, the device or the port
// unusable, the server unreachable or refusing us at connect); Findings for
// a run that failed part way (a completion error, a peer that died).
func runExitCode(err error, measured bool) int {
	switch {
	case errors.Is(err, engine.ErrInterrupted):
		return exitcode.Interrupted
	case errors.Is(err, publish.ErrOutput):
		return exitcode.BadInput
	case !measured || isNoRDMA(err):
		return exitcode.NotMeasured
	}
	return exitcode.Findings
}

// isHostList: a Slurm host list (node[1-2]) or a comma-separated one given
// where one host goes. An IPv6 address in brackets ([fe80::1]) is one host.
func isHostList(host string) bool {
	if strings.Contains(host, ",") {
		return true
	}
	i := strings.Index(host, "[")
	return i > 0 && strings.Contains(host[i:], "]")
}

// finishRepeats merges the runs of a --repeat that asked for asked repeats
// and ended with err (nil when every repeat ran through), and writes into
// the document what compare needs to tell a whole run from a damaged one:
// how many repeats were asked, and the error that ended them. The engine sets the failing repeat's error in the run it returns,
// but a repeat that failed before it measured anything (the peer gone
// before the handshake) returns none, and the merged run would carry the
// last good repeat's: no error at all. err is returned joined with a
// failure to merge; run is nil when nothing was measured.
func finishRepeats(runs []*results.Run, asked int, err error) (*results.Run, error) {
	if len(runs) == 0 {
		return nil, err
	}
	run, merr := results.MergeRepeats(runs)
	if merr != nil {
		return nil, errors.Join(err, merr)
	}
	if asked > 1 {
		run.RepeatAsked = asked
	}
	if err != nil {
		run.Error = err.Error()
		run.Interrupted = run.Interrupted || errors.Is(err, engine.ErrInterrupted)
	}
	return run, err
}
