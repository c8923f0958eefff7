package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/ethside/live"
	"github.com/rdmabench/rdmabench/ethside/paste"
	"github.com/rdmabench/rdmabench/internal/durflag"
	"github.com/rdmabench/rdmabench/verbs"
	"github.com/spf13/pflag"
)

func init() {
	register("doctor", "find misconfigurations that make multi-node training slow", runDoctor)
}

// doctorEnviron is the process environment doctor reads NCCL_* from;
// tests replace it.
var doctorEnviron = os.Environ

func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("doctor", stderr)
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	df := addDoctorFlags(fs)
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageErr(stderr, "doctor", "unexpected argument %q", fs.Arg(0))
	}
	run, code := df.run("doctor", stderr)
	if run == nil {
		return code
	}
	defer run.close()
	rep, err := doctor.Run(run.opts)
	if err != nil {
		return usageErr(stderr, "doctor", "%v", err)
	}
	if *asJSON {
		rep.Version = toolInfo()
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err != nil {
		return fail(stderr, "doctor: %v", err)
	}
	if rep.Failed() {
		return 1
	}
	return 0
}

// doctorFlags are doctor's flags; health takes them too.
type doctorFlags struct {
	sysRoot, procRoot, devRoot, ncclLog, envFile, devinfo *string
	pastes, pastesLater                                   *string
	expect                                                *float64
	watch                                                 *time.Duration
	devices                                               *[]string
}

func addDoctorFlags(fs *pflag.FlagSet) *doctorFlags {
	return &doctorFlags{
		sysRoot:     fs.String("sysfs-root", "/sys", "read sysfs from this directory (a captured tree)"),
		procRoot:    fs.String("proc-root", "/proc", "read procfs from this directory"),
		devRoot:     fs.String("dev-root", "/dev", "look for infiniband/uverbs* under this directory"),
		ncclLog:     fs.String("nccl-log", "", "analyse this NCCL_DEBUG=INFO log (TCP fallback, GPUDirect RDMA, GID index)"),
		expect:      fs.Float64("expect-rate", 0, "expected port rate in Gb/s (e.g. 200 for HDR); slower ports FAIL"),
		envFile:     fs.String("env-file", "", "read NCCL_* settings from KEY=VALUE lines (a job script); they override the environment"),
		watch:       durflag.P(fs, "watch", "", 0, "read error counters twice, this long apart, and FAIL on growth"),
		devices:     fs.StringSliceP("ib-dev", "d", nil, "judge only these DEV or DEV:PORT, comma-separated (default: the ports NCCL will use)"),
		devinfo:     fs.String("ibv-devinfo", "", "saved 'ibv_devinfo -v' output to take port MTUs from (default: query the devices when --sysfs-root is /sys)"),
		pastes:      fs.String("pastes", "", "judge the Ethernet side (PFC, ECN, errors, optics, rings) from saved outputs: DIR of KIND.IFACE.txt (docs/ethernet-pastes.md); default: read the live ports' netdevs when --sysfs-root is /sys"),
		pastesLater: fs.String("pastes-later", "", "the same outputs saved again later, DIR2 like --pastes' DIR: the counters' growth from DIR to DIR2 is judged as under --watch, which says how far apart the saves were"),
	}
}

// doctorRun is doctor's options with what they hold open.
type doctorRun struct {
	opts   doctor.Options
	live   bool // the tree is this machine's /sys
	closes []func()
}

func (r *doctorRun) close() {
	for _, c := range r.closes {
		c()
	}
}

// run checks the flags and builds doctor's options; nil after a usage
// error (printed, code 2).
func (df *doctorFlags) run(cmd string, stderr io.Writer) (*doctorRun, int) {
	if *df.expect < 0 {
		return nil, usageErr(stderr, cmd, "--expect-rate must not be negative")
	}
	if st, err := os.Stat(*df.sysRoot); err != nil || !st.IsDir() {
		return nil, usageErr(stderr, cmd, "--sysfs-root %s is not a readable directory", *df.sysRoot)
	}
	live := filepath.Clean(*df.sysRoot) == "/sys"
	r := &doctorRun{live: live, opts: doctor.Options{
		SysRoot: *df.sysRoot, ProcRoot: *df.procRoot, DevRoot: *df.devRoot,
		ExpectRateGbps: *df.expect, Watch: *df.watch, Devices: *df.devices,
		Env:         doctor.NCCLEnv(doctorEnviron()),
		ToolVersion: toolInfo().Version,
		Now:         time.Now,
		Capture:     !live,
	}}
	if live {
		r.opts.RDMACoreVersion = doctor.RDMACoreVersion(libDirs)
	} else {
		// This machine's libibverbs says nothing of the captured host's:
		// look for one in the capture (beside its sys/), else leave it out.
		r.opts.RDMACoreVersion = doctor.RDMACoreVersion(captureLibDirs(*df.sysRoot))
	}
	if *df.envFile != "" {
		if err := mergeEnvFile(r.opts.Env, *df.envFile); err != nil {
			return nil, usageErr(stderr, cmd, "--env-file: %v", err)
		}
	}
	if *df.ncclLog != "" {
		f, err := os.Open(*df.ncclLog)
		if err != nil {
			return nil, usageErr(stderr, cmd, "--nccl-log: %v", err)
		}
		if st, err := f.Stat(); err == nil && st.IsDir() {
			f.Close()
			return nil, usageErr(stderr, cmd, "--nccl-log %s: is a directory; give the log file", *df.ncclLog)
		}
		r.closes = append(r.closes, func() { f.Close() })
		r.opts.NCCLLog, r.opts.NCCLLogName = f, *df.ncclLog
	}
	if live {
		r.opts.HomeDir, _ = os.UserHomeDir() // NCCL reads ~/.nccl.conf on the live host
	}
	switch {
	case *df.devinfo != "":
		m, err := readDevinfo(*df.devinfo)
		if err != nil {
			r.close()
			return nil, usageErr(stderr, cmd, "--ibv-devinfo: %v", err)
		}
		r.opts.Querier = m
	case live:
		// Port MTUs are not in sysfs; ask the devices, but only when the
		// tree is the live one.
		q := &verbsQuerier{open: map[string]*verbs.Context{}}
		r.closes = append(r.closes, q.close)
		r.opts.Querier = q
	}
	if code := df.ethernet(r, cmd, stderr); code != 0 {
		r.close()
		return nil, code
	}
	if r.opts.Watch > 0 {
		fmt.Fprintf(stderr, "rdmabench %s: reading error counters twice, %s apart\n", cmd, r.opts.Watch)
	}
	return r, 0
}

// pastesSeries makes --pastes DIR and --pastes-later DIR2 one series of
// two readings, --watch apart.
func (df *doctorFlags) pastesSeries(r *doctorRun, cmd string, stderr io.Writer) int {
	if *df.pastesLater == "" {
		return 0
	}
	if *df.watch <= 0 {
		return usageErr(stderr, cmd, "--pastes-later needs --watch: how far apart the two saves were")
	}
	if _, err := paste.Read(*df.pastesLater); err != nil {
		return usageErr(stderr, cmd, "--pastes-later: %v", err)
	}
	r.opts.Ethernet = &paste.Series{Dirs: []string{*df.pastes, *df.pastesLater}}
	return 0
}

// ethernet sets where the Ethernet side is read from: the pastes given,
// else the live netdevs of this host's RDMA ports (a capture has none).
func (df *doctorFlags) ethernet(r *doctorRun, cmd string, stderr io.Writer) int {
	if *df.pastes != "" {
		if _, err := paste.Read(*df.pastes); err != nil {
			return usageErr(stderr, cmd, "--pastes: %v", err)
		}
		r.opts.Ethernet = paste.Dir(*df.pastes)
		return df.pastesSeries(r, cmd, stderr)
	}
	if *df.pastesLater != "" {
		return usageErr(stderr, cmd, "--pastes-later needs --pastes, the first save")
	}
	if !r.live {
		return 0
	}
	var ifaces []string
	devs, _ := os.ReadDir(filepath.Join(*df.sysRoot, "class", "infiniband"))
	for _, d := range devs {
		ports, _ := os.ReadDir(filepath.Join(*df.sysRoot, "class", "infiniband", d.Name(), "ports"))
		for _, p := range ports {
			n, err := strconv.Atoi(p.Name())
			if err != nil {
				continue
			}
			if nd, err := live.NetdevsOf(*df.sysRoot, d.Name(), n); err == nil {
				ifaces = append(ifaces, nd...)
			}
		}
	}
	slices.Sort(ifaces)
	if ifaces = slices.Compact(ifaces); len(ifaces) > 0 {
		r.opts.Ethernet = live.Reader{SysRoot: *df.sysRoot, Ifaces: ifaces}
	}
	return 0
}

// libDirs are where distributions install libibverbs.
var libDirs = []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib64"}

// captureLibDirs are libDirs under a capture's root, the directory that
// holds its sys/.
func captureLibDirs(sysRoot string) []string {
	root := filepath.Dir(filepath.Clean(sysRoot))
	out := make([]string, len(libDirs))
	for i, d := range libDirs {
		out[i] = filepath.Join(root, d)
	}
	return out
}

// usageErr reports a problem with the invocation of cmd: one line, exit 2.
func usageErr(stderr io.Writer, cmd, format string, args ...any) int {
	fmt.Fprintf(stderr, "rdmabench "+cmd+": "+format+"\n", args...)
	return 2
}

func mergeEnvFile(env map[string]string, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	file, err := doctor.ParseEnvFile(f)
	if err != nil {
		return err
	}
	for k, v := range file {
		env[k] = v
	}
	return nil
}

func readDevinfo(path string) (doctor.DevinfoMTUs, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return doctor.ParseDevinfo(f)
}

// verbsQuerier answers doctor's port MTU questions with ibv_query_port,
// opening each device once.
type verbsQuerier struct {
	open map[string]*verbs.Context
}

func (q *verbsQuerier) PortMTU(dev string, port int) (active, max int, err error) {
	c, ok := q.open[dev]
	if !ok {
		if c, err = verbs.Open(dev); err != nil {
			return 0, 0, err
		}
		q.open[dev] = c
	}
	pa, err := c.QueryPort(port)
	if err != nil {
		return 0, 0, err
	}
	return pa.ActiveMTU, pa.MaxMTU, nil
}

func (q *verbsQuerier) close() {
	for _, c := range q.open {
		c.Close()
	}
}
