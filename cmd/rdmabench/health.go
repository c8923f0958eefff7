package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/health"
	"github.com/rdmabench/rdmabench/health/probe"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	rbplan "github.com/rdmabench/rdmabench/plan"
)

func init() {
	register("health", "check a node as Slurm's HealthCheckProgram or NHC would: doctor, loopback bandwidth, a one-node NCCL test; fault codes, a drain reason or a Kubernetes node condition", runHealth)
}

// healthFlags are health's own flags, beside doctor's.
type healthFlags struct {
	expectBW, minShare, expectBusBW float64
	baseline, size, ncclbench       string
	duration, ncclTimeout           time.Duration
	noBW, nccl, asJSON, oneline     bool
	ncclGPUs                        int
}

func runHealth(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("health", stderr)
	var hf healthFlags
	fs.BoolVar(&hf.asJSON, "json", false, "write one JSON document to stdout")
	fs.BoolVar(&hf.oneline, "oneline", false, `print only the drain reason, nothing when healthy: for scontrol update nodename=... state=drain reason="..."`)
	df := addDoctorFlags(fs)
	fs.Float64Var(&hf.expectBW, "expect-bw", 0, "expected loopback write bandwidth of each port NCCL uses, Gb/s (fault RB201 below --min-share of it)")
	fs.StringVar(&hf.baseline, "baseline", "", "a write-bw run of this node when healthy (rdmabench write-bw --loopback --save FILE): its figure for the size is the expectation")
	fs.Float64Var(&hf.minShare, "min-share", 0.9, "share of an expected figure a measurement must reach")
	fs.BoolVar(&hf.noBW, "no-bw", false, "skip the loopback bandwidth measurement")
	fs.StringVarP(&hf.size, "size", "s", "64K", "loopback write-bw message size")
	durflag.VarP(fs, &hf.duration, "duration", "D", 2*time.Second, "loopback write-bw duration per port")
	fs.BoolVar(&hf.nccl, "nccl", false, "also run ncclbench all_reduce across --nccl-gpus GPUs of this node with NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 (through the NICs)")
	fs.IntVar(&hf.ncclGPUs, "nccl-gpus", 0, "GPUs for --nccl (at least 2)")
	fs.Float64Var(&hf.expectBusBW, "expect-busbw", 0, "expected bus bandwidth of that all_reduce, GB/s (fault RB211 below --min-share of it)")
	fs.StringVar(&hf.ncclbench, "ncclbench", "", "the ncclbench binary (default: beside this one, else on PATH)")
	durflag.VarP(fs, &hf.ncclTimeout, "nccl-timeout", "", 5*time.Minute, "bound on the whole --nccl run")
	nf := addNodeFlags(fs)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageErr(stderr, "health", "unexpected argument %q", fs.Arg(0))
	}
	switch {
	case hf.expectBW < 0 || hf.expectBusBW < 0:
		return usageErr(stderr, "health", "--expect-bw and --expect-busbw must not be negative")
	case !(hf.minShare > 0 && hf.minShare <= 1):
		return usageErr(stderr, "health", "--min-share %g: want a share in (0, 1]", hf.minShare)
	case hf.baseline != "" && hf.expectBW > 0:
		return usageErr(stderr, "health", "--baseline and --expect-bw: give one expectation")
	case hf.nccl && hf.ncclGPUs < 2:
		return usageErr(stderr, "health", "--nccl needs --nccl-gpus 2 or more (NCCL then goes through the NICs)")
	case !hf.nccl && (hf.ncclGPUs != 0 || hf.expectBusBW != 0):
		return usageErr(stderr, "health", "--nccl-gpus and --expect-busbw go with --nccl")
	}
	kc, err := nf.client()
	if err != nil {
		return usageErr(stderr, "health", "%v", err)
	}
	size, err := rbplan.ParseSize(hf.size)
	if err != nil {
		return usageErr(stderr, "health", "--size: %v", err)
	}
	loopback := probe.Loopback{Size: size, Duration: hf.duration, MinShare: hf.minShare}
	switch {
	case hf.baseline != "":
		if loopback.Expect, err = probe.FromBaseline(hf.baseline, size); err != nil {
			return usageErr(stderr, "health", "--baseline: %v", err)
		}
	case hf.expectBW > 0:
		loopback.Expect = &probe.Expectation{Value: hf.expectBW, Source: "--expect-bw"}
	}
	dr, code := df.run("health", stderr)
	if dr == nil {
		return code
	}
	defer dr.close()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	for {
		rep, err := checkHealth(ctx, dr, loopback, hf)
		if err != nil {
			return usageErr(stderr, "health", "%v", err)
		}
		if err := writeHealth(stdout, rep, hf); err != nil {
			return fail(stderr, "health: %v", err)
		}
		if kc != nil && (ctx.Err() == nil || nf.every == 0) {
			if err := nf.publish(context.WithoutCancel(ctx), kc, rep, stderr); err != nil {
				fmt.Fprintf(stderr, "rdmabench health: %v\n", err)
				if nf.every == 0 {
					return exitcode.NotMeasured
				}
			}
		}
		if nf.every == 0 || !sleepCtx(ctx, nf.every) {
			return int(rep.Status())
		}
	}
}

// checkHealth is one pass of every check.
func checkHealth(ctx context.Context, dr *doctorRun, loopback probe.Loopback, hf healthFlags) (*health.Report, error) {
	drep, err := doctor.Run(dr.opts)
	if err != nil {
		return nil, err
	}
	var rep health.Report
	rep.AddDoctor(drep)
	if !hf.noBW {
		loopback.Run(ctx, &rep, drep.Facts, dr.live)
	}
	if hf.nccl {
		runNCCL(ctx, &rep, hf)
	}
	if ctx.Err() != nil {
		rep.AddUnchecked("health", "", "interrupted")
	}
	return &rep, nil
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// runNCCL is --nccl: ncclbench's one-node all_reduce, when there is one.
func runNCCL(ctx context.Context, rep *health.Report, hf healthFlags) {
	bin, err := probe.FindNCCLBench(hf.ncclbench)
	if err != nil {
		rep.AddUnchecked(health.CheckNCCL, "", err.Error())
		return
	}
	n := probe.NCCL{Bin: bin, GPUs: hf.ncclGPUs, Timeout: hf.ncclTimeout, MinShare: hf.minShare}
	if hf.expectBusBW > 0 {
		n.Expect = &probe.Expectation{Value: hf.expectBusBW, Source: "--expect-busbw"}
	}
	n.Run(ctx, rep)
}

func writeHealth(w io.Writer, rep *health.Report, hf healthFlags) error {
	switch {
	case hf.oneline:
		if r := rep.Reason(); r != "" {
			_, err := fmt.Fprintln(w, r)
			return err
		}
		return nil
	case hf.asJSON:
		host, _ := os.Hostname()
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(health.NewDocument(rep, host, toolInfo()))
	}
	return rep.WriteText(w)
}
