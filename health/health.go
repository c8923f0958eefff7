// Package health turns doctor's findings and a node's own measurements
// into the verdict operators' health checks give (LBNL NHC and the suites
// built on it): a stable fault code per fault, exit 0 healthy, 1 unhealthy
// or 2 cannot check, and one line fit for Slurm's drain reason
// (scontrol update nodename=… state=drain reason="…"). Plain Go: the
// measurements come in as figures, from cmd/rdmabench.
package health

import (
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/rdmabench/rdmabench/doctor"
	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/results"
)

// The document's types are results' (results/health.go): what reads a
// document back (report, saved) needs none of the judging. Its status,
// schema and reason prefix are results' too (results.Healthy,
// results.HealthSchema, results.HealthReasonPrefix).
type (
	// Code is a fault's stable code, "RB110" (docs/health.md's table).
	Code        = results.HealthCode
	Fault       = results.HealthFault
	Measurement = results.HealthMeasurement
	Document    = results.HealthDocument
)

// CodeInfo is one row of the fault-code table.
type CodeInfo struct {
	Code  Code
	Check string // the doctor check or the measurement
	What  string
}

// Codes is every code, in table order. The doctor checks' come first, in
// doctor's report order.
var Codes = []CodeInfo{
	{"RB101", "rdma.devices", "no RDMA device"},
	{"RB102", "rdma.uverbs", "a device has no user-space verbs node"},
	{"RB103", "rdma.modules", "a kernel module the devices need is missing"},
	{"RB110", "port.state", "a port NCCL uses is not ACTIVE"},
	{"RB111", "port.rate", "a port runs below its expected rate or width"},
	{"RB112", "port.mtu", "a port's MTU is below its maximum"},
	{"RB113", "port.sm", "an InfiniBand port without a subnet manager"},
	{"RB114", "hca.firmware", "HCAs on different firmware"},
	{"RB120", "gid.roce_v2", "a RoCE port without a RoCE v2 GID"},
	{"RB121", "nccl.gid_index", "NCCL_IB_GID_INDEX names a GID that is not RoCE v2 IPv4"},
	{"RB130", "nccl.ib_hca", "NCCL_IB_HCA names what does not exist"},
	{"RB131", "nccl.iwarp", "NCCL's IB transport pointed at an iWARP device"},
	{"RB132", "nccl.socket_ifname", "NCCL_SOCKET_IFNAME matches no interface"},
	{"RB133", "nccl.ib_disable", "NCCL_IB_DISABLE sends NCCL over TCP"},
	{"RB134", "nccl.debug", "an NCCL_DEBUG setting that slows or floods"},
	{"RB135", "nccl.gdr_level", "NCCL_NET_GDR_LEVEL turns GPUDirect RDMA off"},
	{"RB136", "nccl.ib_tc", "NCCL_IB_TC outside the fabric's classes"},
	{"RB137", "nccl.conf", "an NCCL config file that does not parse"},
	{"RB138", "nccl.env", "an NCCL variable NCCL does not know (a typo)"},
	{"RB140", "host.memlock", "locked-memory limit too low to register buffers"},
	{"RB141", "host.shm", "/dev/shm too small for NCCL"},
	{"RB142", "host.sysctl", "a network sysctl against RDMA"},
	{"RB143", "host.irq", "the NIC's interrupts on one CPU"},
	{"RB150", "port.counters", "error counters that grow or are high"},
	{"RB151", "port.transport", "the port's transport counters show retries or drops"},
	{"RB160", "pci.link", "an HCA's PCIe link below its capability"},
	{"RB161", "pci.numa", "HCA and GPU on different NUMA nodes"},
	{"RB162", "pci.driver", "an RDMA function without its driver"},
	{"RB163", "gpu.peermem", "GPUDirect RDMA module missing"},
	{"RB164", "pci.gdr", "GPU and HCA too far apart for GPUDirect RDMA"},
	{"RB165", "pci.aer", "PCIe errors (AER) on an HCA"},
	{"RB166", "host.iommu", "an IOMMU mode that slows RDMA"},
	{"RB167", "pci.maxreadreq", "PCIe MaxReadReq too small"},
	{"RB168", "pci.acs", "ACS redirects GPU-HCA peer traffic"},
	{"RB170", "nccl.log", "the NCCL log shows a fallback or an error"},
	{"RB180", "eth.input", "an Ethernet-side input that could not be read"},
	{"RB181", "eth.link", "an Ethernet link down or below the port's best speed"},
	{"RB182", "eth.fec", "no FEC on a link of 25G lanes"},
	{"RB183", "eth.pfc", "PFC off on the RoCE traffic's priority"},
	{"RB184", "eth.trust", "trust pcp while NCCL_IB_TC marks a DSCP"},
	{"RB185", "eth.ecn", "ECN off on the RoCE traffic's priority"},
	{"RB186", "eth.errors", "Ethernet link errors (CRC, symbol, uncorrectable FEC) that grow or are high"},
	{"RB187", "eth.pause", "pauses or discards on the RoCE priority grow"},
	{"RB188", "eth.ber", "pre-FEC bit error ratio above the link's limit"},
	{"RB189", "eth.flaps", "the Ethernet link goes down"},
	{"RB190", "eth.optics", "a transceiver past its alarm limits or raising alarms"},
	{"RB191", "eth.temp", "an HCA at its critical temperature"},
	{"RB192", "eth.rings", "netdev rings far below their maximum"},
	{"RB193", "eth.coalesce", "adaptive interrupt moderation off"},
	{"RB194", "eth.channels", "netdev channels far from the cores"},
	{"RB195", "eth.globalpause", "global pause on beside PFC"},
	{"RB199", "", "a doctor check without a code of its own"},
	{CodeLoopbackBelow, CheckLoopback, "loopback write bandwidth below the expected figure"},
	{CodeLoopbackFailed, CheckLoopback, "the loopback measurement failed"},
	{CodeNCCLBelow, CheckNCCL, "one-node all_reduce (SHM and P2P off) below the expected bus bandwidth"},
	{CodeNCCLFailed, CheckNCCL, "the one-node all_reduce failed"},
	{"RB901", "", "cannot check: a measurement could not run here"},
}

// codeOf is the code of a doctor check; nccl.log.* share one.
func codeOf(check string) Code {
	if strings.HasPrefix(check, "nccl.log") {
		return "RB170"
	}
	for _, c := range Codes {
		if c.Check == check && c.Code < "RB200" {
			return c.Code
		}
	}
	return "RB199"
}

// NewDocument is rep's document of host, written by ver; its faults are []
// when there are none.
func NewDocument(rep *Report, host string, ver *version.Info) Document {
	st := rep.Status()
	doc := Document{Schema: results.HealthSchema, Status: st.String(), Exit: int(st), Reason: rep.Reason(), Host: host, HealthReport: results.HealthReport(*rep), Version: ver}
	if doc.Faults == nil {
		doc.Faults = []Fault{}
	}
	return doc
}

// Report is the whole verdict: the document's, with its judging.
type Report results.HealthReport

// Status says healthy, unhealthy (any fault), or cannot check (no fault,
// but something could not be checked).
func (r *Report) Status() results.HealthStatus {
	switch {
	case len(r.Faults) > 0:
		return results.Unhealthy
	case len(r.Unchecked) > 0:
		return results.CannotCheck
	}
	return results.Healthy
}

// AddDoctor adds doctor's FAILs as faults. WARNs stay doctor's: a health
// check drains a node only for what is broken.
func (r *Report) AddDoctor(rep *doctor.Report) {
	for _, f := range rep.Findings {
		if f.Status == doctor.Fail {
			r.Faults = append(r.Faults, Fault{Code: codeOf(f.Check), Check: f.Check, Subject: f.Subject, Detail: f.Value})
		}
	}
}

// AddMeasurement holds m against its expectation: below MinShare of it is
// a fault, a failed measurement another. Without an expectation the figure
// is only reported.
func (r *Report) AddMeasurement(m Measurement, belowCode, failedCode Code) {
	r.Measurements = append(r.Measurements, m)
	switch {
	case m.Err != "":
		r.Faults = append(r.Faults, Fault{Code: failedCode, Check: m.Check, Subject: m.Subject, Detail: m.Err})
	case m.Expected > 0 && m.Value < m.MinShare*m.Expected:
		r.Faults = append(r.Faults, Fault{Code: belowCode, Check: m.Check, Subject: m.Subject,
			Detail: fmt.Sprintf("%.3g %s, below %.0f%% of %.3g (%s)", m.Value, m.Unit, 100*m.MinShare, m.Expected, m.Source)})
	}
}

// AddUnchecked records a check that could not run here.
func (r *Report) AddUnchecked(check, subject, why string) {
	r.Unchecked = append(r.Unchecked, Fault{Code: "RB901", Check: check, Subject: subject, Detail: why})
}

// MaxReason bounds the reason line: Slurm keeps it whole, sinfo -R's
// column shows the start.
const MaxReason = 240

// Reason is the one line for scontrol's reason="…": the prefix and the
// faults by code, without quotes, newlines or control characters; empty
// when there is nothing to report. Faults beyond MaxReason are counted.
func (r *Report) Reason() string {
	list := r.Faults
	if len(list) == 0 {
		list = r.Unchecked
	}
	if len(list) == 0 {
		return ""
	}
	sorted := append([]Fault(nil), list...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Code < sorted[j].Code })
	more := func(n int) string {
		if n == 0 {
			return ""
		}
		return fmt.Sprintf("; +%d more", n)
	}
	line := results.HealthReasonPrefix
	for i, f := range sorted {
		part := " " + clean(f.String())
		if i > 0 {
			part = ";" + part
		}
		// Room is kept for the count of the faults after this one.
		reserve := len(more(len(sorted) - i - 1))
		if len(line)+len(part)+reserve <= MaxReason {
			line += part
			continue
		}
		if i > 0 { // the room kept before says how many are left
			return line + more(len(sorted)-i)
		}
		return line + cutRunes(part, MaxReason-len(line)-reserve) + more(len(sorted)-1)
	}
	return line
}

// cutRunes is s cut to at most n bytes, at a character boundary.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:max(n, 0)]
}

// clean keeps a reason on one line and out of the shell's and Slurm's way.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"' || r == '\'' || r == '`' || r == '\\':
			b.WriteRune(' ')
		case r < ' ' || r == 0x7f:
			b.WriteRune(' ')
		default:
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// FirstCode is the code a one-word summary gives (a node condition's
// reason): the lowest of the faults', else of the checks that could not
// run; "" when healthy.
func (r *Report) FirstCode() results.HealthCode {
	list := r.Faults
	if len(list) == 0 {
		list = r.Unchecked
	}
	var first results.HealthCode
	for _, f := range list {
		if first == "" || f.Code < first {
			first = f.Code
		}
	}
	return first
}
