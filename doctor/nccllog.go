package doctor

import (
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/ncclog"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// ncclFacts is the part of an NCCL log (NCCL_DEBUG=INFO) that doctor
// judges. It is filled from the shared ncclog package; doctor does not parse
// logs itself.
type ncclFacts struct {
	Analysis       *ncclog.Analysis // per host, with classified errors
	Version        string
	Network        ncclog.Network // IB, Socket or a plugin's name
	GIDIndex       int            // -1: the log does not say
	GDRDMA         bool
	SocketFallback bool
	NetIBChannels  int      // channels via NET/IB
	Warnings       []string // NCCL's own WARN lines
	Notes          []string // what the log leaves open
}

// maxLogWarnings caps how many NCCL WARN lines are repeated as findings.
const maxLogWarnings = 5

// checkNCCLLog: the log tells what NCCL actually did, which the settings
// above only predict: TCP fallback, GPUDirect RDMA, the GID index.
func checkNCCLLog(h *host) []Finding {
	if h.log == nil {
		return nil
	}
	l, src := h.log, h.opts.NCCLLogName
	var out []Finding
	out = append(out, logTransportFinding(l, src))
	out = append(out, logGDRFinding(l, src))
	if f, ok := logGIDFinding(h, l, src); ok {
		out = append(out, f)
	}
	out = append(out, logAnalysisFindings(l.Analysis, src)...)
	for _, n := range l.Notes {
		out = append(out, Finding{Check: "nccl.log.note", Status: Info, Subject: "nccl", Value: n, Source: src})
	}
	for i, w := range l.Warnings {
		if i == maxLogWarnings {
			out = append(out, Finding{Check: "nccl.log.warning", Status: Info, Subject: "nccl",
				Value: fmt.Sprintf("%d more NCCL warnings", len(l.Warnings)-i), Source: src})
			break
		}
		out = append(out, Finding{Check: "nccl.log.warning", Status: Warn, Subject: "nccl", Value: w, Source: src,
			Remedy: "NCCL warned during the run: read the line in context in the log"})
	}
	return out
}

func logTransportFinding(l *ncclFacts, src string) Finding {
	f := Finding{Check: "nccl.log.transport", Subject: "nccl", Source: src, Value: "NET/" + orDefault(string(l.Network), "unknown")}
	if l.Version != "" {
		f.Value += " (NCCL " + l.Version + ")"
	}
	switch {
	case l.SocketFallback || l.Network == ncclog.NetSocket:
		f.Status = Fail
		f.Value += ": inter-node traffic over TCP sockets"
		f.Remedy = "NCCL found no usable RDMA device: fix the rdma.uverbs, nccl.ib_hca and nccl.ib_disable findings (containers need --device=/dev/infiniband)"
		if l.Analysis != nil && l.Analysis.IBDisabledByEnv {
			f.Value += " (NCCL_IB_DISABLE=1 was set in the job's environment)"
			f.Remedy = "unset NCCL_IB_DISABLE in the job: the log shows NCCL read NCCL_IB_DISABLE=1 from the environment"
		}
	case l.Network == ncclog.NetIB:
		f.Status = Pass
	case l.Network == "":
		f.Status, f.Value = Skip, "the log does not name the network (was NCCL_DEBUG=INFO set?)"
	default:
		f.Status = Info
	}
	return f
}

func logGDRFinding(l *ncclFacts, src string) Finding {
	f := Finding{Check: "nccl.log.gdr", Subject: "nccl", Source: src}
	// Only channel lines say whether NCCL used GPUDirect RDMA: without
	// them (a single node, NCCL_DEBUG_SUBSYS without INIT) it is unknown.
	switch {
	case l.SocketFallback || l.Network == ncclog.NetSocket:
		f.Status, f.Value = Skip, "moot while NCCL uses TCP sockets"
	case l.GDRDMA:
		f.Status, f.Value = Pass, "GPUDirect RDMA in use"
	case l.NetIBChannels > 0:
		f.Status, f.Value = Warn, "no GPUDirect RDMA: GPU data is staged through host memory"
		f.Remedy = "load nvidia_peermem (modprobe nvidia_peermem) or use DMA-BUF (open GPU driver, NCCL_DMABUF_ENABLE=1); check NCCL_NET_GDR_LEVEL"
	default:
		f.Status, f.Value = Info, "unknown: the log has no NET/IB channel lines to show it"
	}
	return f
}

// logGIDFinding compares the GID index NCCL used with this host's RoCE v2
// IPv4 entry. The log may come from another node, hence WARN, not FAIL.
func logGIDFinding(h *host, l *ncclFacts, src string) (Finding, bool) {
	if l.GIDIndex < 0 {
		return Finding{}, false
	}
	f := Finding{Check: "nccl.log.gid_index", Subject: "nccl", Source: src,
		Value: fmt.Sprintf("NCCL used GID index %d", l.GIDIndex)}
	for _, p := range h.ports() {
		if !p.port.IsRoCE() {
			continue
		}
		g, reason, err := rdmasys.PickRoCEv2IPv4(p.port.GIDs)
		if err == nil && g.Index != l.GIDIndex {
			f.Status = Warn
			f.Value += fmt.Sprintf("; %s uses %d (%s)", p.name(), g.Index, reason)
			f.Remedy = fmt.Sprintf("set NCCL_IB_GID_INDEX=%d", g.Index)
			return f, true
		}
	}
	f.Status = Info
	return f, true
}

// logAnalysisFindings turns the log analysis into findings: classified
// errors, hosts that never finished init, mixed NCCL versions.
func logAnalysisFindings(a *ncclog.Analysis, src string) []Finding {
	if a == nil {
		return nil
	}
	var out []Finding
	for i, e := range a.Errors {
		if i == maxLogWarnings {
			out = append(out, Finding{Check: "nccl.log.error", Status: Info, Subject: "nccl", Source: src,
				Value: fmt.Sprintf("%d more errors (ncclbench analyze lists them all)", len(a.Errors)-i)})
			break
		}
		where := "line " + e.Line
		if e.Host != "" {
			where = e.Host + " " + where
		}
		out = append(out, Finding{Check: "nccl.log.error", Status: Warn, Subject: string(e.Kind), Source: src,
			Value: fmt.Sprintf("%s: %s", where, e.Text), Remedy: e.Meaning})
	}
	if len(a.InitIncomplete) > 0 {
		out = append(out, Finding{Check: "nccl.log.init", Status: Warn, Subject: "nccl", Source: src,
			Value:  "Init START without Init COMPLETE: " + strings.Join(a.InitIncomplete, "; "),
			Remedy: "those ranks hung or died in ncclCommInit: look at their last lines and errors (network reachability, GID index, a missing rank)"})
	}
	if len(a.NCCLVersions) > 1 {
		out = append(out, Finding{Check: "nccl.log.versions", Status: Warn, Subject: "nccl", Source: src,
			Value:  "mixed NCCL versions: " + strings.Join(a.NCCLVersions, ", "),
			Remedy: "run one NCCL build on every node (the container image or module the job loads); versions may not interoperate"})
	}
	return out
}
