package runner

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/results"
)

// bench runs the benchmark once the processes have met: communicators,
// the table's rows, then the end (finish). An error here is handled by
// Run (failed); the exit code is ExitWrong for wrong values or a bus
// bandwidth below the minimum.
func (r *runner) bench(id nccl.UniqueID, devices []results.NCCLDevice, lg *logSetup, stdout, stderr io.Writer) (int, error) {
	if err := r.openComms(id); err != nil {
		return 0, err
	}
	run := r.newRun(devices)
	r.run = run
	text := r.env.Rank == 0 && !r.o.JSON
	if err := r.openOutput(run, text, stdout); err != nil {
		return 0, err
	}
	if err := r.sweep(run, text, stdout); err != nil {
		return 0, err
	}
	return r.finish(run, devices, lg, stdout, stderr)
}

// roots are the roots each row runs with: -1 for a collective without
// one, -r's, or every rank for -r -1.
func (r *runner) roots() []int {
	o := r.o
	if !o.Coll.HasRoot {
		return []int{-1}
	}
	if o.Root != -1 {
		return []int{o.Root}
	}
	var roots []int
	for i := 0; i < r.nranks; i++ {
		roots = append(roots, i)
	}
	return roots
}

// sweep measures every row: each type, reduction and root, warmed up,
// then every size out of place and in place.
func (r *runner) sweep(run *results.NCCLRun, text bool, stdout io.Writer) error {
	o := r.o
	sizes, _ := bench.Sizes(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor)
	for _, t := range o.Types {
		for _, op := range o.Ops {
			for _, root := range r.roots() {
				mk := func(size int) bench.Case {
					return bench.Case{Coll: o.Coll, Type: t, Op: op.Name, Root: root, NRanks: r.nranks, C: o.Coll.Counts(size/t.Size, r.nranks, t.Size)}
				}
				if _, err := r.grp.Reduce(nil, launch.Sum); err != nil {
					return err
				}
				if err := r.warmup(mk); err != nil {
					return err
				}
				for _, s := range sizes {
					k := mk(s)
					p := results.NCCLPoint{Size: max(k.C.Send, k.C.Recv) * t.Size, Count: k.C.Param, Type: t.Name, Redop: string(op.Name), Root: root}
					var err error
					if p.OutOfPlace, err = r.benchTime(k, false); err != nil {
						return err
					}
					if p.InPlace, err = r.benchTime(k, true); err != nil {
						return err
					}
					run.Results = append(run.Results, p)
					if text {
						bench.WritePoint(stdout, p)
					}
				}
			}
		}
	}
	return nil
}

// warmup runs -w collectives at every size, doubling from the smallest,
// as nccl-tests.
func (r *runner) warmup(mk func(size int) bench.Case) error {
	o := r.o
	if o.Warmup <= 0 {
		return nil
	}
	for s := o.MinBytes; s <= o.MaxBytes; s *= 2 {
		k := mk(s)
		r.coll = fmt.Sprintf("%s of %d bytes", o.Coll.NCCL, max(k.C.Send, k.C.Recv)*k.Type.Size)
		for it := 0; it < o.Warmup; it++ {
			if err := r.start(k, false); err != nil {
				return err
			}
		}
		if err := r.wait("warmup "+o.Coll.NCCL, o.Warmup); err != nil {
			return err
		}
		if s == 0 {
			break
		}
	}
	return nil
}

// finish ends a run whose rows are all measured: the summary, the count
// of wrong values over the processes, the teardown, the logs, rank 0's
// report, and the exit code.
func (r *runner) finish(run *results.NCCLRun, devices []results.NCCLDevice, lg *logSetup, stdout, stderr io.Writer) (int, error) {
	isMain := r.env.Rank == 0
	run.Summarize()
	if r.o.MinBusBW != nil {
		run.CheckBusBW(*r.o.MinBusBW)
	}
	run.Straggler = r.stragglers(devices)

	// Everyone is done with NCCL: sum the halves with wrong values over the
	// processes (nccl-tests' "Out of bounds values"), tear down, then read
	// the logs.
	bad, err := r.grp.Reduce([]float64{float64(r.badHalves)}, launch.Sum)
	if err != nil {
		return 0, err
	}
	run.OutOfBounds = int(bad[0])
	if err := r.finishComms(); err != nil {
		return 0, err
	}
	rep := lg.analyze()
	if rep != nil {
		run.NCCLLog, _ = json.Marshal(rep)
		if rep.SocketFallback && !isMain {
			fmt.Fprintf(stderr, "%sWARNING: NCCL uses TCP sockets between nodes (NET/Socket), not RDMA\n", r.prefix())
		}
	}
	if err := r.grp.Close(); err != nil {
		return 0, err
	}
	if isMain {
		if err := r.report(run, lg, rep, stdout); err != nil {
			return 0, err
		}
	}
	return r.verdict(run, stderr), nil
}

// verdict is the exit code of a finished run. Every process has the same
// figures (benchTime reduces them) and fails alike, as nccl-tests'
// processes do; rank 0 alone says why.
func (r *runner) verdict(run *results.NCCLRun, stderr io.Writer) int {
	isMain := r.env.Rank == 0
	if run.OutOfBounds != 0 {
		if isMain {
			fmt.Fprintf(stderr, "%s%d result(s) with wrong values (see #wrong)\n", r.prefix(), run.OutOfBounds)
		}
		return ExitWrong
	}
	if why := run.BelowMinBusBW(); why != "" {
		if isMain {
			fmt.Fprintf(stderr, "%s%s\n", r.prefix(), why)
		}
		return ExitWrong
	}
	return 0
}
