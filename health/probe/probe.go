// Package probe holds health's measurements: write-bw in loopback on each
// port NCCL uses and ncclbench's one-node all_reduce through the NICs.
// It is apart from health/ because it runs the engine (cgo) while health's
// report, codes and drain reason stay plain Go.
package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/health"
	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/results"
)

// Expectation is what a measured figure is held against, and where it
// came from (a flag, a baseline file).
type Expectation struct {
	Value  float64
	Source string
}

// FromBaseline is a saved write-bw run's figure at size.
func FromBaseline(path string, size int) (*Expectation, error) {
	run, err := results.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if run.Test != engine.WriteBW {
		return nil, fmt.Errorf("%s is a %s run; health measures write-bw", path, run.Test)
	}
	for _, r := range run.Results {
		if r.Size == size && r.BWAvgGbps > 0 {
			return &Expectation{Value: r.BWAvgGbps, Source: "baseline " + filepath.Base(path)}, nil
		}
	}
	return nil, fmt.Errorf("%s has no %d-byte figure (health measures -s %d)", path, size, size)
}

// Loopback is the loopback write-bw measurement's settings.
type Loopback struct {
	Size     int
	Duration time.Duration
	MinShare float64
	Expect   *Expectation // nil: measured, not judged
}

// Run measures write-bw in loopback on each ACTIVE port NCCL uses; live is
// false for a captured tree, which has no device to measure.
func (l Loopback) Run(ctx context.Context, rep *health.Report, facts *doctor.Facts, live bool) {
	if !live {
		rep.AddUnchecked(health.CheckLoopback, "", "a captured tree: there is no device to measure (--no-bw)")
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
			rep.AddMeasurement(l.port(ctx, hca.Name, p), health.CodeLoopbackBelow, health.CodeLoopbackFailed)
			measured++
		}
	}
	if measured == 0 {
		rep.AddUnchecked(health.CheckLoopback, "", "no ACTIVE port that NCCL uses to measure")
	}
}

// port measures one port.
func (l Loopback) port(ctx context.Context, hca string, p doctor.PortFacts) health.Measurement {
	m := health.Measurement{Check: health.CheckLoopback, Subject: fmt.Sprintf("%s:%d", hca, p.Port), Unit: "Gb/s", MinShare: l.MinShare}
	if l.Expect != nil {
		m.Expected, m.Source = l.Expect.Value, l.Expect.Source
	}
	plan := rbplan.DefaultPlan(engine.WriteBW)
	plan.Sizes, plan.Duration, plan.Iterations = []int{l.Size}, l.Duration, 0
	plan.CapSignalBytes(1 << 20)
	dev := engine.DeviceConfig{Device: hca, Port: p.Port, GIDIndex: -1}
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
	return m
}

// NCCL is the one-node all_reduce's settings.
type NCCL struct {
	Bin      string // the ncclbench binary (FindNCCLBench)
	GPUs     int
	Timeout  time.Duration
	MinShare float64
	Expect   *Expectation // GB/s of bus bandwidth; nil: not judged
}

// Run runs ncclbench's all_reduce with NCCL's shared memory and
// peer-to-peer paths off, so that it goes through the NICs.
func (n NCCL) Run(ctx context.Context, rep *health.Report) {
	m := health.Measurement{Check: health.CheckNCCL, Subject: "host", Unit: "GB/s", MinShare: n.MinShare}
	if n.Expect != nil {
		m.Expected, m.Source = n.Expect.Value, n.Expect.Source
	}
	ctx, cancel := context.WithTimeout(ctx, n.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.Bin, "all_reduce", "-b", "64M", "-e", "64M", "-n", "20", "-w", "5", "-g", strconv.Itoa(n.GPUs), "--json")
	cmd.Env = append(os.Environ(), "NCCL_SHM_DISABLE=1", "NCCL_P2P_DISABLE=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	runErr := cmd.Run()
	doc, docErr := results.DecodeNCCL(&out)
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		m.Err = fmt.Sprintf("ncclbench did not finish within %v", n.Timeout)
	case runErr != nil && docErr == nil && doc.Error != "":
		m.Err = "ncclbench: " + doc.Error
	case runErr != nil:
		m.Err = fmt.Sprintf("ncclbench: %v: %s", runErr, lastLine(errOut.String()))
	case docErr != nil:
		m.Err = fmt.Sprintf("ncclbench wrote no JSON document: %v", docErr)
	default:
		m.Value = doc.AvgBusBW
		if doc.NotGPU {
			m.Source += " (CPU test library, not a GPU)"
		}
	}
	rep.AddMeasurement(m, health.CodeNCCLBelow, health.CodeNCCLFailed)
}

// FindNCCLBench is the ncclbench to run: the one given, the one beside
// this binary, or the first on PATH.
func FindNCCLBench(given string) (string, error) {
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
	return "", errors.New("no ncclbench beside rdmabench or on PATH (--ncclbench)")
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

func lastLine(s string) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	return string(lines[len(lines)-1])
}
