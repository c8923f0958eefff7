// Package doctor finds the host misconfigurations that make multi-node
// training slow: RDMA devices and permissions, port state and rate, MTU, the
// RoCE GID index, NCCL environment variables and config files, memlock,
// /dev/shm and network sysctls, IRQ spreading, error counters, PCIe link,
// NUMA placement, GPU-NIC distance, ACS, MaxReadReq, IOMMU and AER, and
// (given an NCCL log) a silent fallback to TCP and the log's errors.
//
// Port checks judge the ports NCCL will use (scope.go); the others are
// reported as INFO, so a healthy node has no FAIL. Every check reads from
// roots in Options (sysfs, procfs, /dev, /etc) so that the same code runs on
// a live host, on a captured tree and on the generated trees of
// internal/hosttree. Report.Facts carries what the host is, for the fleet
// view (doctor/fleet).
//
// The checks, in report order, are the registry's (CheckNames); the NCCL
// log's nccl.log.* follow pci.acs when a log is given, and the Ethernet
// side's eth.* (ethernet.go) come last with Options.Ethernet.
package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdmabench/rdmabench/ethside"
	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/ncclog"
	"github.com/rdmabench/rdmabench/results"
)

// check is one entry of the registry: a function and the checks it
// reports, in report order.
type check struct {
	names []string // empty for the NCCL log's nccl.log.*
	run   func(*host) []Finding
}

// one is a check function that reports one check.
func one(name string, run func(*host) []Finding) check {
	return check{[]string{name}, run}
}

// registry is every check in report order: what Run runs and CheckNames
// lists, kept in one place.
var registry = []check{
	one("rdma.devices", checkDevices), one("rdma.uverbs", checkUverbs), one("rdma.modules", checkModules),
	one("port.state", checkPortState), one("port.rate", checkPortRate), one("port.mtu", checkPortMTU),
	one("port.sm", checkSubnetManager), one("hca.firmware", checkFirmware),
	one("gid.roce_v2", checkRoCEGID), one("nccl.gid_index", checkNCCLGIDIndex),
	one("nccl.ib_hca", checkNCCLHCA), one("nccl.iwarp", checkIWARP), one("nccl.socket_ifname", checkNCCLSocketIfname),
	one("nccl.ib_disable", checkNCCLIBDisable), one("nccl.debug", checkNCCLDebug),
	one("nccl.gdr_level", checkNCCLGDRLevel), one("nccl.ib_tc", checkNCCLIBTC), one("nccl.conf", checkNCCLConf),
	one("nccl.env", checkNCCLNames),
	one("host.memlock", checkMemlock), one("host.shm", checkShm), one("host.sysctl", checkSysctls), one("host.irq", checkIRQs),
	{[]string{"port.counters", "port.transport"}, checkCounters},
	one("pci.link", checkPCIeLink), one("pci.numa", checkNUMA), one("pci.driver", checkUnboundFunctions),
	one("gpu.peermem", checkPeermem), one("pci.gdr", checkGDRDistance),
	one("pci.aer", checkAER), one("host.iommu", checkIOMMU), one("pci.maxreadreq", checkMaxReadReq), one("pci.acs", checkACS),
	{nil, checkNCCLLog},
	{ethCheckNames(), checkEthernet},
}

// CheckNames are the checks' names, in report order (the NCCL log's are
// nccl.log.*): what health's fault codes and the docs key on.
var CheckNames = registryNames()

func registryNames() []string {
	var out []string
	for _, c := range registry {
		out = append(out, c.names...)
	}
	return out
}

// The document's types are results' (results/doctor.go): what reads a
// document back (fleet, report, saved) needs none of the checks.
type (
	Status     = results.DoctorStatus
	Finding    = results.DoctorFinding
	Summary    = results.DoctorSummary
	JSONReport = results.DoctorDocument
)

// The host's facts (Report.Facts) for the fleet view.
type (
	Facts     = results.HostFacts
	HCAFacts  = results.HCAFacts
	PortFacts = results.PortFacts
)

const (
	Pass = results.DoctorPass
	Warn = results.DoctorWarn
	Fail = results.DoctorFail
	Info = results.DoctorInfo // worth knowing, nothing to fix
	Skip = results.DoctorSkip // the check does not apply or could not read its input
)

// PortQuerier supplies what sysfs lacks: a port's active and maximum MTU in
// bytes, as ibv_query_port reports them. cmd fills it from the verbs package;
// fixtures use ParseDevinfo on captured `ibv_devinfo -v` output.
type PortQuerier interface {
	PortMTU(dev string, port int) (active, max int, err error)
}

// Options says where to read and what to expect.
type Options struct {
	SysRoot  string // sysfs mount, "/sys"
	ProcRoot string // procfs mount, "/proc"
	DevRoot  string // device nodes, "/dev"

	// Env holds the job's environment (NCCL_* variables). It is passed in
	// rather than read from the process so tests and --env-file can set it.
	// NCCL's config files add to it as NCCL reads them: NCCL_CONF_FILE (or
	// HomeDir/.nccl.conf), then EtcRoot/nccl.conf; the environment wins.
	Env     map[string]string
	EtcRoot string // default: /etc for the live /sys, else etc/ beside SysRoot (a capture)
	HomeDir string // "": no ~/.nccl.conf

	// Devices narrows the judged ports to these DEV or DEV:PORT (-d).
	Devices []string

	ExpectRateGbps float64     // 0: no expectation
	Querier        PortQuerier // nil: derive MTU where possible

	// Watch > 0 reads the error counters twice, Watch apart, and fails on
	// growth. Wait defaults to time.Sleep; tests replace it to change the
	// fixture between the reads.
	Watch time.Duration
	Wait  func(time.Duration)

	// NCCLLog, when set, is an NCCL debug log (NCCL_DEBUG=INFO) to analyse;
	// NCCLLogName names it in findings.
	NCCLLog     io.Reader
	NCCLLogName string

	// Ethernet, when set, gives the Ethernet side of the RoCE ports
	// (ethtool's, DCB's, the module's) for the eth.* checks; nil: none.
	// Under Watch it is read twice, Watch apart.
	Ethernet ethside.Reader

	// For the host facts: the rdma-core release (RDMACoreVersion), this
	// tool's version, and the clock (nil: no timestamp).
	RDMACoreVersion string
	ToolVersion     string
	Now             func() time.Time

	// Capture says the roots are a captured tree, not this machine: the
	// facts then say which values are this machine's (RDMACoreVersion
	// must then come from the capture, or be left empty).
	Capture bool
}

func (o *Options) defaults() {
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.DevRoot == "" {
		o.DevRoot = "/dev"
	}
	if o.Wait == nil {
		o.Wait = time.Sleep
	}
	o.Env = maps.Clone(o.Env) // the config files add to it
	if o.Env == nil {
		o.Env = map[string]string{}
	}
	if o.EtcRoot == "" {
		o.EtcRoot = "/etc"
		if filepath.Clean(o.SysRoot) != "/sys" {
			o.EtcRoot = filepath.Join(filepath.Dir(filepath.Clean(o.SysRoot)), "etc")
		}
	}
}

// Report is the outcome of Run.
type Report struct {
	Findings []Finding
	Facts    *Facts
	NCCLLog  *ncclog.Analysis // with --nccl-log
	Version  *version.Info    // the binary's, for the JSON document
}

// Summary counts the report's findings.
func (r *Report) Summary() Summary {
	var s Summary
	for _, f := range r.Findings {
		switch f.Status {
		case Pass:
			s.Pass++
		case Warn:
			s.Warn++
		case Fail:
			s.Fail++
		case Info:
			s.Info++
		case Skip:
			s.Skip++
		}
	}
	return s
}

// Failed reports whether any finding is a FAIL.
func (r *Report) Failed() bool { return r.Summary().Fail > 0 }

// Find returns the findings of one check, optionally for one subject ("" for all).
func (r *Report) Find(check, subject string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Check == check && (subject == "" || f.Subject == subject) {
			out = append(out, f)
		}
	}
	return out
}

// Run executes every check in order and returns the findings. It returns an
// error only when the sysfs root itself is unusable; a check that cannot read
// its input reports a SKIP instead.
func Run(opts Options) (*Report, error) {
	opts.defaults()
	sources, bad, read := mergeNCCLConf(&opts)
	h, err := loadHost(opts)
	if err != nil {
		return nil, err
	}
	h.confSources, h.confBad, h.confRead = sources, bad, read
	if opts.NCCLLog != nil {
		facts, err := parseNCCLLog(opts.NCCLLog)
		if err != nil {
			return nil, fmt.Errorf("NCCL log %s: %w", opts.NCCLLogName, err)
		}
		h.log = &facts
	}
	h.readEthernetFirst()
	r := &Report{}
	for _, c := range registry {
		r.Findings = append(r.Findings, c.run(h)...)
	}
	r.Facts = collectFacts(h)
	if h.log != nil {
		r.NCCLLog = h.log.Analysis
	}
	return r, nil
}

// WriteText prints one line per finding and, under WARN and FAIL, an
// indented remedy line; then a summary line.
func (r *Report) WriteText(w io.Writer) error {
	// Columns fit the usual names; a longer one (a sysctl key) overflows
	// its column rather than widening every line.
	checkW, subjW := 0, 0
	for _, f := range r.Findings {
		checkW = max(checkW, min(len(f.Check), 18))
		subjW = max(subjW, min(len(f.Subject), 16))
	}
	var b strings.Builder
	for _, f := range r.Findings {
		line := fmt.Sprintf("%-4s  %-*s  %-*s  %s", f.Status, checkW, f.Check, subjW, f.Subject, f.Value)
		if f.Source != "" {
			line += "  [" + f.Source + "]"
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		if f.Remedy != "" && (f.Status == Warn || f.Status == Fail) {
			b.WriteString("      → " + f.Remedy + "\n")
		}
	}
	s := r.Summary()
	fmt.Fprintf(&b, "\n%d pass, %d warn, %d fail, %d info, %d skip\n", s.Pass, s.Warn, s.Fail, s.Info, s.Skip)
	_, err := io.WriteString(w, b.String())
	return err
}

// Schema is the version WriteJSON writes.
const Schema = results.DoctorSchema

// WriteJSON prints {"schema":1,"host":{...},"findings":[...],"summary":{...}}.
func (r *Report) WriteJSON(w io.Writer) error {
	findings := r.Findings
	if findings == nil {
		findings = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(JSONReport{Schema: Schema, Host: r.Facts, NCCLLog: r.NCCLLog, Findings: findings, Summary: r.Summary(), Version: r.Version})
}

// sysPath and procPath join a root with a slash-separated relative path.
func (h *host) sysPath(rel ...string) string {
	return filepath.Join(append([]string{h.opts.SysRoot}, rel...)...)
}

func (h *host) procPath(rel ...string) string {
	return filepath.Join(append([]string{h.opts.ProcRoot}, rel...)...)
}
