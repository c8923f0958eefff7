package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/auth"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/results"
)

// The steps of Run before the benchmark: each returns what the next needs,
// and the exit code its failure means where that is not ExitFail.

// prepare reads the launcher's environment and checks everything that
// needs neither NCCL nor the other processes, and returns the rendezvous
// token.
func (r *runner) prepare() (token []byte, code int, err error) {
	o := r.o
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if r.env, err = launch.Detect(getenv); err != nil {
		return nil, ExitUsage, err
	}
	r.perOp = o.Timeout
	if r.env.Size > 1 {
		if r.rdv, err = launch.FindRendezvous(o.Rendezvous, o.RdzvPort, r.env, getenv); err != nil {
			return nil, ExitUsage, err
		}
	}
	// Every output is checked before NCCL is loaded: a long run must not
	// end by losing its results to a typo in a path.
	if err := checkOutputs(o, r.env.Rank); err != nil {
		return nil, exitcode.BadInput, err
	}
	token, err = auth.Load(o.TokenFile, getenv("NCCL_BENCH_TOKEN"))
	if err != nil {
		return nil, ExitUsage, err
	}
	return token, 0, nil
}

// openLib loads NCCL and the CUDA runtime, checks they can do what the
// options ask, and returns how many GPUs are visible.
func (r *runner) openLib() (int, error) {
	o := r.o
	var err error
	r.lib, err = nccl.Open(nccl.Options{NCCLLib: o.NCCLLib, CudartLib: o.CudartLib})
	if err != nil {
		return 0, err
	}
	if o.Graphs > 0 && r.lib.Version < 20900 {
		return 0, fmt.Errorf("-G %d: NCCL %s cannot be captured into a CUDA graph (2.9 or later)", o.Graphs, nccl.VersionString(r.lib.Version))
	}
	if o.Graphs > 0 && !r.lib.HasGraphs {
		return 0, fmt.Errorf("-G %d: %s has no CUDA graphs (cudaStreamBeginCapture, cudaStreamEndCapture, cudaGraphInstantiateWithFlags, cudaGraphLaunch: CUDA 11.4 or later)", o.Graphs, r.lib.CudartPath)
	}
	if o.PerIter == 1 && !r.lib.HasEvents {
		return 0, fmt.Errorf("-I 1: %s has no CUDA events (cudaEventCreate, cudaEventRecord, cudaEventElapsedTime)", r.lib.CudartPath)
	}
	ndev, err := r.lib.DeviceCount()
	if err != nil || ndev == 0 {
		if err == nil {
			err = errors.New("cudaGetDeviceCount found 0 devices")
		}
		return 0, fmt.Errorf("no GPU: %v (NCCL %s loaded from %s)", err, nccl.VersionString(r.lib.Version), r.lib.NCCLPath)
	}
	return ndev, nil
}

// placeRanks finds this process's group and communicator size, and checks
// -r against the smallest group (a usage error).
func (r *runner) placeRanks() error {
	o := r.o
	r.groups, r.group, r.idx = r.placeInGroups()
	r.nranks = len(r.groups[r.group]) * o.Ngpus
	smallest := r.nranks
	for _, g := range r.groups {
		smallest = min(smallest, len(g)*o.Ngpus)
	}
	if o.Coll.HasRoot && o.Root >= smallest {
		if o.Split != nil {
			return fmt.Errorf("-r %d: the smallest group of %s has only %d ranks", o.Root, o.Split.Spec, smallest)
		}
		return fmt.Errorf("-r %d: there are only %d ranks", o.Root, r.nranks)
	}
	return nil
}

// join meets the other processes at the rendezvous. Every process must
// run the same benchmark; rank 0 checks (a mismatch is a usage error).
func (r *runner) join(host string, token []byte) (int, error) {
	o := r.o
	var err error
	r.grp, err = launch.Join(launch.Config{
		Addr: r.rdv.Addr, Rank: r.env.Rank, Size: r.env.Size,
		Timeout:  o.RdvTimeout,
		Hello:    launch.Hello{Host: host, Pid: os.Getpid(), Key: r.argsKey()},
		Token:    token,
		PortHint: r.rdv.Hint,
		Status:   r.prog.JSON,
		MakeID: func() ([]byte, error) {
			if o.Split != nil {
				return nil, nil // each group makes its own (groupID)
			}
			id, err := r.lib.GetUniqueID()
			return id[:], err
		},
	})
	if err != nil {
		var mm *launch.MismatchError
		if errors.As(err, &mm) {
			return ExitUsage, err
		}
		return ExitFail, err
	}
	// Barriers wait for peers that may be running a whole timed loop.
	grpTimeout := 7 * 24 * time.Hour
	if r.perOp > 0 {
		grpTimeout = r.perOp*time.Duration(o.Iters*o.AggIters+o.Warmup+1) + o.RdvTimeout
	}
	r.grp.SetTimeout(grpTimeout)
	return 0, nil
}

// meet picks this process's GPUs, gathers every process's on rank 0 (for
// the header), measures the clocks and returns the communicator's id.
// The others are told of a failure here, except the gather's own (the
// group knows already).
func (r *runner) meet(host string, ndev int) ([]results.NCCLDevice, nccl.UniqueID, error) {
	var id nccl.UniqueID
	mine, err := r.pickDevices(host, ndev)
	if err != nil {
		r.grp.Abort(err.Error())
		return nil, id, err
	}
	// Rank 0 alone needs every device, for the header.
	payload, _ := json.Marshal(mine)
	all, err := r.grp.Gather(payload)
	if err != nil {
		return nil, id, err
	}
	var devices []results.NCCLDevice
	for i, p := range all {
		var ds []results.NCCLDevice
		if err := json.Unmarshal(p, &ds); err != nil {
			err = fmt.Errorf("process rank %d sent a bad device list: %v", i, err)
			r.grp.Abort(err.Error())
			return nil, id, err
		}
		devices = append(devices, ds...)
	}
	r.devices.Store(&devices)
	if err := r.measureClocks(); err != nil {
		r.grp.Abort(err.Error())
		return nil, id, err
	}
	copy(id[:], r.grp.ID)
	if r.o.Split != nil {
		if id, err = r.groupID(); err != nil {
			r.grp.Abort(err.Error())
			return nil, id, err
		}
	}
	return devices, id, nil
}

// pickDevices chooses this process's GPUs and describes them. A launcher
// without local ranks (older PMI): the order among the processes on this
// host, from the rendezvous.
func (r *runner) pickDevices(host string, ndev int) ([]results.NCCLDevice, error) {
	o := r.o
	local := r.env.LocalRank
	if !r.env.LocalKnown {
		local = r.grp.LocalIndex
	}
	var mine []results.NCCLDevice
	for i := 0; i < o.Ngpus; i++ {
		d := local*o.Ngpus + i
		if d >= ndev {
			// NCCL >= 2.30 can put several ranks on one GPU when asked to.
			if os.Getenv("NCCL_MULTI_RANK_GPU_ENABLE") != "1" {
				return nil, fmt.Errorf("local rank %d with -g %d needs GPU %d but only %d visible (fewer processes per node, smaller -g, or NCCL_MULTI_RANK_GPU_ENABLE=1 with NCCL >= 2.30)", local, o.Ngpus, d, ndev)
			}
			d %= ndev
		}
		r.ranks = append(r.ranks, r.idx*o.Ngpus+i)
		r.devs = append(r.devs, d)
		name, err := r.lib.DeviceName(d)
		if err != nil {
			return nil, fmt.Errorf("GPU %d: %w", d, err)
		}
		// The header's rank is the process's place among all, its group
		// the color, as nccl-tests prints them.
		color := 0
		if o.Split != nil {
			color = o.Split.Color(r.env.Rank)
		}
		mine = append(mine, results.NCCLDevice{Rank: r.env.Rank*o.Ngpus + i, Group: color, Pid: os.Getpid(), Host: host, Device: d, BusID: r.lib.PCIBusID(d), Name: name})
	}
	return mine, nil
}

// argsKey is what must agree between processes for the run to make sense.
func (r *runner) argsKey() string {
	o := r.o
	var ts, ops []string
	for _, t := range o.Types {
		ts = append(ts, t.Name)
	}
	for _, x := range o.Ops {
		ops = append(ops, string(x.Name))
	}
	return fmt.Sprintf("%s -g %d -b %d -e %d -i %d -f %d -n %d -m %d -w %d -c %d -d %s -o %s -r %d -z %d -a %d -I %d -K %d -G %d",
		o.Coll.Name, o.Ngpus, o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor, o.Iters, o.AggIters, o.Warmup, o.Check,
		strings.Join(ts, ","), strings.Join(ops, ","), o.Root, o.Blocking, o.Average, o.PerIter, o.PerIterSkp, o.Graphs)
}

// checkOutputs checks the files this process will write: rank 0's --save,
// -J and --metrics, and every rank's --nccl-log (rank N>0 appends .N), none
// of them an input (--token-file, --nccl-lib, --cudart-lib).
func checkOutputs(o *Options, rank int) error {
	var outs []publish.Output
	if rank == 0 {
		outs = append(outs, publish.Output{Flag: "--save", Path: o.Save},
			publish.Output{Flag: "-J", Path: o.OutputFile}, publish.Output{Flag: "--metrics", Path: o.Metrics})
	}
	if o.NCCLLog != "" {
		p := o.NCCLLog
		if rank > 0 {
			p = fmt.Sprintf("%s.%d", p, rank)
		}
		outs = append(outs, publish.Output{Flag: "--nccl-log", Path: p})
	}
	var inputs []string
	for _, in := range []string{o.TokenFile, o.NCCLLib, o.CudartLib} {
		if in != "" {
			inputs = append(inputs, in)
		}
	}
	return publish.CheckOutputs(outs, inputs)
}
