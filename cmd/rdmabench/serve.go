package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	rbplan "github.com/rdmabench/rdmabench/plan"
)

func runServe(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("serve", stderr)
	df := addDeviceFlags(fs)
	bind := fs.String("bind", "", "address to listen on (default: all)")
	cpus := fs.String("cpus", "", "pin the server's loop threads to these CPUs in turn (default: the NIC's NUMA node)")
	maxClients := fs.Int("max-clients", 0, "exit after serving this many clients (default: serve forever)")
	maxMem := fs.String("max-mem", "", "refuse plans that register more memory than this, e.g. 4G (default: a quarter of RAM, or the memlock limit when lower)")
	maxQPs := fs.Int("max-qps", rbplan.MaxQPs, "refuse plans with more QPs")
	maxThreads := fs.Int("max-threads", engine.DefaultMaxThreads, "refuse plans that need more loop threads")
	tokenFile := fs.String("token-file", "", "serve only clients that prove they hold the token in FILE (default $"+tokenEnv+")")
	maxHandshakes := fs.Int("max-handshakes", engine.DefaultMaxHandshakes, "connections in their handshake or waiting for their turn at once; more are closed at once")
	queueTimeout := durflag.P(fs, "queue-timeout", "", engine.DefaultQueueTimeout, "how long a client waits while another client's run holds the device, then is told the server is busy")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if err := df.validate(); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.BadInput
	}
	if fs.NArg() > 0 || *maxClients < 0 {
		fmt.Fprintln(stderr, "rdmabench serve: takes no arguments, and --max-clients must be ≥ 0")
		return exitcode.BadInput
	}
	dc := df.config()
	dc.Warnings = stderr
	var err error
	if dc.CPUs, err = parseCPUFlag("--cpus", *cpus); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.BadInput
	}
	budget := engine.Budget{MaxQPs: *maxQPs, MaxThreads: *maxThreads}
	if *maxMem != "" {
		if budget.MaxMem, err = rbplan.ParseBytes(*maxMem); err != nil {
			fmt.Fprintf(stderr, "rdmabench serve: --max-mem: %v\n", err)
			return exitcode.BadInput
		}
	}
	if *maxQPs < 1 || *maxThreads < 1 || *maxHandshakes < 1 {
		fmt.Fprintln(stderr, "rdmabench serve: --max-qps, --max-threads and --max-handshakes must be at least 1")
		return exitcode.BadInput
	}
	if *queueTimeout <= 0 || *queueTimeout > rbplan.MaxDuration {
		fmt.Fprintf(stderr, "rdmabench serve: --queue-timeout %v outside (0, %v]\n", *queueTimeout, rbplan.MaxDuration)
		return exitcode.BadInput
	}
	token, err := loadToken(*tokenFile, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.BadInput
	}
	// perftest fails at start without its device: so do we, rather than
	// listen forever and tell only the first client.
	if code, err := checkDevice(dc, "-d"); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return code
	}
	addr := net.JoinHostPort(*bind, strconv.Itoa(*df.tcpPort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return exitcode.NotMeasured
	}
	fmt.Fprintf(stdout, "rdmabench serve: listening on %s\n", ln.Addr())
	if token == nil {
		fmt.Fprintf(stderr, "rdmabench serve: no token (--token-file or %s): anyone who can reach %s can run plans on this server\n", tokenEnv, ln.Addr())
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	scfg := engine.ServerConfig{Device: dc, Log: stdout, MaxClients: *maxClients, Budget: budget,
		Token: token, MaxHandshakes: *maxHandshakes, QueueTimeout: *queueTimeout}
	if err := engine.Serve(ctx, ln, scfg); err != nil {
		fmt.Fprintf(stderr, "rdmabench serve: %v\n", err)
		return 1
	}
	if ctx.Err() != nil { // Serve stopped the client's loops and freed everything
		fmt.Fprintln(stderr, "rdmabench serve: interrupted")
		return 130
	}
	return 0
}
