package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/mesh"
	"github.com/rdmabench/rdmabench/mesh/rank"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/render"
	"github.com/rdmabench/rdmabench/results"
)

func init() {
	register("mesh", "all pairs of nodes: bandwidth and latency matrices, outliers traced to a node or a link (under srun, mpirun, torchrun)", runMesh)
}

// meshProto names the mesh's rendezvous: ncclbench's processes (or another
// version of the mesh) on the port are refused, not joined.
const meshProto = "rdmabench-mesh/3" // 2: tasks and outcomes numbered (Seq); 3: a task's part

func runMesh(args []string, stdout, stderr io.Writer) int {
	o, code, done := parseMeshFlags(args, stderr)
	if done {
		return code
	}
	switch {
	case o.analyze != "" || o.planRanks != 0:
		// Written here, and only here.
		if err := o.checkOutputs(); err != nil {
			return usageErr(stderr, "mesh", "%v", err)
		}
	}
	switch {
	case o.analyze != "":
		return analyzeMesh(o, stdout, stderr)
	case o.planRanks != 0:
		return planMesh(o, stdout, stderr)
	}
	usage := func(format string, a ...any) int { return usageErr(stderr, "mesh", format, a...) }
	env, err := launch.Detect(os.Getenv)
	if err != nil {
		return usage("%v", err)
	}
	if env.Size < 2 {
		return usage("%d rank: start one process per node (or per NIC) with srun, mpirun or torchrun; see rdmabench mesh --help", env.Size)
	}
	rdv, err := launch.FindRendezvous(o.rendezvous, o.rdzvPort, env, os.Getenv)
	if err != nil {
		return usage("%v", err)
	}
	token, err := loadToken(o.tokenFile, stderr)
	if err != nil {
		return usage("%v", err)
	}
	var pairs []mesh.Pair
	badInput := ""
	if env.Rank == 0 {
		// Rank 0 reads the pairs and writes --save and --metrics, on its
		// own host: the others' file systems need not have the paths. The
		// others learn of a bad one from rank 0 once they joined.
		if err := o.checkOutputs(); err != nil {
			fmt.Fprintf(stderr, "rdmabench mesh: %v\n", err)
			badInput = "rank 0 cannot write its outputs (see rank 0's message)"
		} else if o.pairsFile != "" {
			if pairs, err = mesh.ReadPairsFile(o.pairsFile, env.Size); err != nil {
				fmt.Fprintf(stderr, "rdmabench mesh: --pairs %s: %v\n", o.pairsFile, err)
				badInput = "--pairs " + o.pairsFile + " is not a list of this mesh's pairs (see rank 0's message)"
			}
		}
	}
	dev, err := rank.LocalDevice(o.dev, env)
	if err != nil {
		return usage("%v", err)
	}
	cfg := o.rankConfig(env, rdv, token, stdout, stderr)
	cfg.Device.Device, cfg.BadInput = dev, badInput
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	return rank.New(cfg).Run(ctx, rdv, pairs)
}

// rankConfig is the rank of these options: rank 0 says its schedule and
// progress on stderr and its report on stdout.
func (o *meshOptions) rankConfig(env launch.Env, rdv launch.Rendezvous, token []byte, stdout, stderr io.Writer) rank.Config {
	progress := &render.Rounds{W: stderr, Prefix: "rdmabench mesh:"}
	return rank.Config{
		Env: env, Device: engine.DeviceConfig{Port: o.ibPort, GIDIndex: o.gidIndex}, Token: token,
		Host: o.host, Sizing: o.Sizing, Rules: o.rules, PerHost: o.perHost, Quick: o.quick, QuickOffRail: o.offRail, ServerPort: o.serverPort, RendezvousTimeout: o.rdvTimeout,
		Proto: meshProto, Key: o.Key(), TokenHint: "--token-file or " + tokenEnv, Version: toolInfo, Stderr: stderr,
		Planned: func(m *results.Mesh, sch mesh.Schedule) {
			if o.quick {
				fmt.Fprintf(stderr, "rdmabench mesh: %d ranks (%s), quick mode: random matchings, then adaptive rounds until each suspect is named or cleared\n", env.Size, env.Source)
			} else {
				fmt.Fprintf(stderr, "rdmabench mesh: %d ranks (%s), %s\n", env.Size, env.Source, o.Describe(sch))
			}
			if note := rank.SharedNote(m, sch, o.perHost); note != "" {
				fmt.Fprintf(stderr, "rdmabench mesh: %s\n", note)
			}
			fmt.Fprintf(stderr, "rdmabench mesh: rendezvous: %s (%s)\n", rdv.Addr, rdv.From)
			if token == nil {
				fmt.Fprintf(stderr, "rdmabench mesh: no token (--token-file or %s): while the mesh runs, anyone who can reach the ranks' ports can run plans on them\n", tokenEnv)
			}
			progress.Begin()
		},
		Round: progress.Done, Retest: progress.Retested,
		QuickRound: progress.Searched,
		Report:     func(m *results.Mesh, interrupted bool) int { return o.report(m, interrupted, "", stdout, stderr) },
	}
}

// report shows a mesh, measured or --analyze'd: its report on stdout,
// --save and --metrics, and the exit status. what names the saved mesh
// in the line that says nothing was measured.
func (o *meshOptions) report(m *results.Mesh, interrupted bool, what string, stdout, stderr io.Writer) int {
	var err error
	if o.asJSON {
		err = render.MeshJSON(stdout, m)
	} else {
		err = render.MeshText(stdout, m)
	}
	if werr := o.writeOutputs(m); err == nil {
		err = werr
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "rdmabench mesh: %v\n", err)
		return exitcode.Findings
	case interrupted:
		return exitcode.Interrupted
	case !m.AnyMeasured():
		// Every direction failed or no pair could run (ranks lost or
		// without a device): nothing was judged.
		fmt.Fprintf(stderr, "rdmabench mesh: %sno direction measured: nothing to judge\n", what)
		return exitcode.NotMeasured
	case !render.MeshClean(m):
		return exitcode.Findings
	}
	return exitcode.OK
}

// writeOutputs writes --save and --metrics (a measured mesh or an
// --analyze'd one) as every command writes its outputs.
func (o *meshOptions) writeOutputs(m *results.Mesh) error {
	d := publish.Destinations{Save: o.save, Metrics: o.metrics}
	return d.Write(context.Background(), render.MeshDocument(m, render.MetricsOptions{SlurmJobID: os.Getenv("SLURM_JOB_ID")}))
}

// planMesh is --plan N: the schedule of a mesh of N ranks, measured by
// nobody.
func planMesh(o *meshOptions, stdout, stderr io.Writer) int {
	var pairs []mesh.Pair
	if o.pairsFile != "" {
		var err error
		if pairs, err = mesh.ReadPairsFile(o.pairsFile, o.planRanks); err != nil {
			fmt.Fprintf(stderr, "rdmabench mesh: --pairs %s: %v\n", o.pairsFile, err)
			return 2
		}
	}
	if o.quick {
		fmt.Fprintln(stdout, mesh.QuickPlan(o.planRanks, nil, mesh.QuickOptions{}))
		return 0
	}
	s := o.Schedule(o.planRanks, pairs)
	fmt.Fprintf(stdout, "rdmabench mesh --plan %d: %s; %d directions\n", o.planRanks, o.Describe(s), s.Dirs)
	return 0
}

// analyzeMesh is --analyze FILE: a saved mesh judged again with this
// command's thresholds, without measuring; its report and exit status
// as the mesh's own (--save and --metrics hold the mesh judged again).
func analyzeMesh(o *meshOptions, stdout, stderr io.Writer) int {
	m, err := results.ReadMeshFile(o.analyze)
	if err != nil {
		return usageErr(stderr, "mesh", "--analyze: %v", err)
	}
	if m.Quick != nil {
		return usageErr(stderr, "mesh", "--analyze %s: a quick mesh (mesh --quick): its verdict is its search's; --analyze judges a full mesh again", o.analyze)
	}
	o.rules.MarkOutliers(m)
	o.rules.Analyze(m)
	return o.report(m, false, "--analyze "+o.analyze+": ", stdout, stderr)
}
