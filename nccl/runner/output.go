package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/ntjson"
	"github.com/rdmabench/rdmabench/nccl/straggler"
	"github.com/rdmabench/rdmabench/ncclog"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

// jsonOut is -J's file (rank 0): created before the first row so that a
// bad path fails early, written once at the end, closed on failure.
type jsonOut struct {
	began time.Time // for -J's start_time
	jfile *os.File
	jpath string
}

// newRun is the report's skeleton: everything known before the first row.
func (r *runner) newRun(devices []results.NCCLDevice) *results.NCCLRun {
	o := r.o
	run := &results.NCCLRun{
		Tool: results.NCCLTool, Schema: results.NCCLSchema, NotGPU: r.lib.Fake,
		NCCLVersion: nccl.VersionString(r.lib.Version), NCCLLibrary: r.lib.NCCLPath, CudartLibrary: r.lib.CudartPath,
		Config: results.NCCLConfig{
			Collective: o.Coll.Name, NThreads: 1, NGpus: o.Ngpus, NProcs: r.env.Size, NRanks: r.nranks,
			MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, Warmup: o.Warmup, Iters: o.Iters, AggIters: o.AggIters,
			Check: o.Check, Blocking: o.Blocking, Average: o.Average, PerIter: o.PerIter, PerIterSkp: o.PerIterSkp,
			ReportCPUTime: o.CPUTime, Graphs: o.Graphs,
		},
		Devices:        devices,
		Rendezvous:     r.rdv.Addr,
		RendezvousFrom: r.rdv.From,
		RendezvousSec:  r.grp.Joined.Seconds(),
		Version:        r.o.ToolInfo(r.lib, nil),
	}
	if o.Split != nil {
		run.Config.Split, run.Config.Groups = o.Split.Spec, len(r.groups)
	}
	if o.StepFactor > 1 {
		run.Config.StepFactor = o.StepFactor
	} else {
		run.Config.StepBytes = o.StepBytes
	}
	if kindOf(o.Coll) == collAlltoAll {
		run.Config.AlltoAll = "grouped ncclSend/ncclRecv (NCCL < 2.28)"
		if r.lib.HasAlltoAll {
			run.Config.AlltoAll = "ncclAlltoAll"
		}
	}
	if r.lib.Fake {
		run.Warnings = append(run.Warnings, "not a GPU measurement (test library)")
	}
	return run
}

// openOutput creates -J's file (rank 0) and prints the text header.
func (r *runner) openOutput(run *results.NCCLRun, text bool, stdout io.Writer) error {
	if r.env.Rank == 0 && r.o.OutputFile != "" {
		var err error
		if r.jfile, r.jpath, err = ntjson.Create(r.o.OutputFile); err != nil {
			return err
		}
	}
	if text {
		if r.jfile != nil {
			fmt.Fprintf(stdout, "# Writing JSON output to %s\n", r.jpath)
		}
		bench.WriteHeader(stdout, run)
	}
	return nil
}

// report is rank 0's end of a finished run: the JSON or the footer, then
// every file and destination asked for.
func (r *runner) report(run *results.NCCLRun, lg *logSetup, rep *ncclog.Report, stdout io.Writer) error {
	if r.o.JSON {
		if err := render.NCCLJSON(stdout, run); err != nil {
			return err
		}
	} else {
		bench.WriteFooter(stdout, run, r.o.Coll)
		if run.Straggler != nil {
			fmt.Fprint(stdout, straggler.Text(*run.Straggler))
		}
		lg.print(stdout, rep, r.lib)
	}
	return r.writeOutputs(run)
}

// writeOutputs writes -J's file and every destination asked for (rank
// 0): each is tried whatever the others did, the errors one line.
func (r *runner) writeOutputs(run *results.NCCLRun) error {
	var errs []string
	if err := r.writeOutputFile(run); err != nil {
		errs = append(errs, err.Error())
	}
	o := r.o
	d := publish.Destinations{Save: o.Save, Metrics: o.Metrics, Push: o.Push, PushJob: o.PushJob, PushInstance: o.PushInstance, PushTimeout: o.PushTimeout}
	if err := d.Write(context.Background(), render.NCCLDocument(run)); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}

// writeOutputFile writes -J's file (rank 0), once.
func (r *runner) writeOutputFile(run *results.NCCLRun) error {
	if r.jfile == nil {
		return nil
	}
	f := r.jfile
	r.jfile = nil
	doc := ntjson.Build(run, ntjson.Meta{Args: r.o.Args, Env: os.Environ(), Start: r.began, End: time.Now(),
		NCCLVersion: r.lib.Version, PerIter: r.o.PerIter == 1, Skip: r.o.PerIterSkp})
	err := ntjson.Write(f, doc)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-J %s: %w", r.jpath, err)
	}
	return nil
}

// closeOutputFile closes a -J file that a failure left unwritten.
func (r *runner) closeOutputFile() {
	if r.jfile != nil {
		r.jfile.Close()
		r.jfile = nil
	}
}
