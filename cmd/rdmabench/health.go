package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rdmabench/rdmabench/rdmasys"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/health"
	"github.com/rdmabench/rdmabench/internal/durflag"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	register("health", "check a node as Slurm's HealthCheckProgram or NHC would: doctor, loopback bandwidth, a one-node NCCL test; fault codes and a drain reason", runHealth)
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
	size, err := rbplan.ParseSize(hf.size)
	if err != nil {
		return usageErr(stderr, "health", "--size: %v", err)
	}
	var expect *expectation
	switch {
	case hf.baseline != "":
		if expect, err = baselineExpectation(hf.baseline, size); err != nil {
			return usageErr(stderr, "health", "--baseline: %v", err)
		}
	case hf.expectBW > 0:
		expect = &expectation{gbps: hf.expectBW, source: "--expect-bw"}
	}
	dr, code := df.run("health", stderr)
	if dr == nil {
		return code
	}
	defer dr.close()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()

	drep, err := doctor.Run(dr.opts)
	if err != nil {
		return usageErr(stderr, "health", "%v", err)
	}
	var rep health.Report
	rep.AddDoctor(drep)
	if !hf.noBW {
		measureLoopback(ctx, &rep, drep.Facts, dr.live, size, hf, expect)
	}
	if hf.nccl {
		measureNCCL(ctx, &rep, hf)
	}
	if ctx.Err() != nil {
		rep.AddUnchecked("health", "", "interrupted")
	}
	if err := writeHealth(stdout, &rep, hf); err != nil {
		return fail(stderr, "health: %v", err)
	}
	return int(rep.Status())
}

// expectation is what a loopback figure is held against.
type expectation struct {
	gbps   float64
	source string
}

// baselineExpectation is a saved write-bw run's figure at size.
func baselineExpectation(path string, size int) (*expectation, error) {
	run, err := results.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if run.Test != engine.WriteBW {
		return nil, fmt.Errorf("%s is a %s run; health measures write-bw", path, run.Test)
	}
	for _, r := range run.Results {
		if r.Size == size && r.BWAvgGbps > 0 {
			return &expectation{gbps: r.BWAvgGbps, source: "baseline " + filepath.Base(path)}, nil
		}
	}
	return nil, fmt.Errorf("%s has no %d-byte figure (health measures -s %d)", path, size, size)
}

// measureLoopback runs write-bw in loopback on each ACTIVE port NCCL uses.
func measureLoopback(ctx context.Context, rep *health.Report, facts *doctor.Facts, live bool, size int, hf healthFlags, expect *expectation) {
	if !live {
		rep.AddUnchecked("bw.loopback", "", "a captured tree: there is no device to measure (--no-bw)")
		return
	}
	measured := 0
	for _, hca := range facts.HCAs {
		for _, p := range hca.Ports {
			if !p.Used || p.State != rdmasys.PortActive {
				continue // doctor judges a port that is down
			}
			if ctx.Err() != nil {
				return
			}
			subject := fmt.Sprintf("%s:%d", hca.Name, p.Port)
			m := health.Measurement{Check: "bw.loopback", Subject: subject, Unit: "Gb/s", MinShare: hf.minShare}
			if expect != nil {
				m.Expected, m.Source = expect.gbps, expect.source
			}
			plan := rbplan.DefaultPlan(engine.WriteBW)
			plan.Sizes, plan.Duration, plan.Iterations = []int{size}, hf.duration, 0
			plan.CapSignalBytes(1 << 20)
			dev := engine.DeviceConfig{Device: hca.Name, Port: p.Port, GIDIndex: -1}
			if p.GIDIndex != nil {
				dev.GIDIndex = *p.GIDIndex
			}
			run, err := engine.RunLoopback(ctx, engine.ClientConfig{Device: dev, Plan: plan, Mode: "loopback"}, dev)
			switch {
			case err != nil:
				m.Err = err.Error()
			case len(run.Results) == 0 || !(run.Results[0].BWAvgGbps > 0):
				m.Err = "no figure"
			default:
				m.Value = run.Results[0].BWAvgGbps
			}
			rep.AddMeasurement(m, "RB201", "RB202")
			measured++
		}
	}
	if measured == 0 {
		rep.AddUnchecked("bw.loopback", "", "no ACTIVE port that NCCL uses to measure")
	}
}

// measureNCCL runs ncclbench's one-node all_reduce with NCCL's shared
// memory and peer-to-peer paths off, so that it goes through the NICs.
func measureNCCL(ctx context.Context, rep *health.Report, hf healthFlags) {
	m := health.Measurement{Check: "nccl.allreduce", Subject: "host", Unit: "GB/s", MinShare: hf.minShare}
	if hf.expectBusBW > 0 {
		m.Expected, m.Source = hf.expectBusBW, "--expect-busbw"
	}
	bin, err := findNCCLBench(hf.ncclbench)
	if err != nil {
		rep.AddUnchecked("nccl.allreduce", "", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(ctx, hf.ncclTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "all_reduce", "-b", "64M", "-e", "64M", "-n", "20", "-w", "5", "-g", strconv.Itoa(hf.ncclGPUs), "--json")
	cmd.Env = append(os.Environ(), "NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	var doc struct {
		NotGPU   bool    `json:"not_gpu_measurement"`
		AvgBusBW float64 `json:"avg_bus_bandwidth_gbps"`
		Error    string  `json:"error"`
	}
	jsonErr := json.Unmarshal(out.Bytes(), &doc)
	switch {
	case ctx.Err() == context.DeadlineExceeded:
		m.Err = fmt.Sprintf("ncclbench did not finish within %v", hf.ncclTimeout)
	case runErr != nil && jsonErr == nil && doc.Error != "":
		m.Err = "ncclbench: " + doc.Error
	case runErr != nil:
		m.Err = fmt.Sprintf("ncclbench: %v: %s", runErr, lastLine(errOut.String()))
	case jsonErr != nil:
		m.Err = fmt.Sprintf("ncclbench wrote no JSON document: %v", jsonErr)
	default:
		m.Value = doc.AvgBusBW
		if doc.NotGPU {
			m.Source += " (CPU test library, not a GPU)"
		}
	}
	rep.AddMeasurement(m, "RB211", "RB212")
}

// findNCCLBench is the ncclbench to run: the one given, the one beside
// this binary, or the first on PATH.
func findNCCLBench(given string) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", fmt.Errorf("--ncclbench: %v", err)
		}
		return given, nil
	}
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), "ncclbench"); isExecutable(p) {
			return p, nil
		}
	}
	if p, err := exec.LookPath("ncclbench"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no ncclbench beside rdmabench or on PATH (--ncclbench)")
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(lines[len(lines)-1])
}

func writeHealth(w io.Writer, rep *health.Report, hf healthFlags) error {
	st := rep.Status()
	switch {
	case hf.oneline:
		if r := rep.Reason(); r != "" {
			_, err := fmt.Fprintln(w, r)
			return err
		}
		return nil
	case hf.asJSON:
		host, _ := os.Hostname()
		doc := health.NewDocument(rep, host, toolInfo())
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(doc)
	}
	var b bytes.Buffer
	for _, f := range rep.Faults {
		fmt.Fprintf(&b, "FAULT     %s  %-14s %s\n", f.Code, f.Check, withSubject(f))
	}
	for _, f := range rep.Unchecked {
		fmt.Fprintf(&b, "UNCHECKED %s  %-14s %s\n", f.Code, f.Check, withSubject(f))
	}
	for _, m := range rep.Measurements {
		line := fmt.Sprintf("MEASURED  %-5s  %-14s %s %.4g %s", "", m.Check, m.Subject, m.Value, m.Unit)
		switch {
		case m.Err != "":
			line = fmt.Sprintf("MEASURED  %-5s  %-14s %s failed", "", m.Check, m.Subject)
		case m.Expected > 0:
			line += fmt.Sprintf(" (expected %.4g from %s, at least %.0f%% of it)", m.Expected, m.Source, 100*m.MinShare)
		default:
			line += " (no expectation: --expect-bw, --baseline or --expect-busbw)"
		}
		fmt.Fprintln(&b, line)
	}
	fmt.Fprintf(&b, "rdmabench health: %s (exit %d)\n", st, int(st))
	if r := rep.Reason(); r != "" {
		fmt.Fprintf(&b, "reason: %s\n", r)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func withSubject(f health.Fault) string {
	if f.Subject == "" {
		return f.Detail
	}
	return f.Subject + " " + f.Detail
}
