package ncclog

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Analysis is what an operator asks of the logs of a job, overall and per
// host: which hosts fell back to sockets, which lack GPUDirect RDMA, which
// never finished init, which NCCL versions ran, and what failed and why.
type Analysis struct {
	Summary
	Hosts []HostSummary `json:"hosts"`

	otherWarns []string
	otherWarnN int
}

// HostSummary is one host's part.
type HostSummary struct {
	Host string `json:"host"`
	Summary
}

// Summary is the analysis of one host, or of all of them together.
type Summary struct {
	NCCLVersions    []string `json:"nccl_versions"`
	Network         Network  `json:"network"`   // "IB", "Socket", a plugin's name; "" unknown; the job's: every host's, comma-joined
	Transport       string   `json:"transport"` // "ib", "roce", "socket" or "unknown"
	SocketFallback  bool     `json:"socket_fallback"`
	IBDisabledByEnv bool     `json:"ib_disabled_by_env"` // NCCL_IB_DISABLE=1 from the environment
	GDR             string   `json:"gdr"`                // "yes", "no", "partial" or "unknown"
	// GDRDetail says per GPU what NCCL decided, from older NCCL's "GPU
	// Direct RDMA Enabled/Disabled for GPU ..." lines and "(no module)".
	GDRDetail []string `json:"gdr_detail,omitempty"`
	// InitIncomplete lists communicators that logged "Init START" and never
	// "Init COMPLETE" (a hang or crash during ncclCommInit*).
	InitIncomplete []string   `json:"init_incomplete,omitempty"`
	Bootstrap      string     `json:"bootstrap,omitempty"` // interface of the bootstrap network
	Errors         []LogError `json:"errors"`
	Findings       []string   `json:"findings"` // conclusions in words
}

// LogError is one classified failure.
type LogError struct {
	Kind    ErrorKind `json:"kind"`
	Status  string    `json:"status,omitempty"` // completion status number, or the errno text
	Meaning string    `json:"meaning"`
	Host    string    `json:"host"`
	Line    string    `json:"line"` // FILE:N (or N for one unnamed log)
	Text    string    `json:"text"`
}

// ErrorKind classifies a LogError.
type ErrorKind string

const (
	ErrCompletion      ErrorKind = "completion"       // a work completion with an error status
	ErrVerbsCall       ErrorKind = "verbs_call"       // Call to ibv_* failed
	ErrWatchdogTimeout ErrorKind = "watchdog_timeout" // PyTorch's NCCL watchdog
	ErrSocketClosed    ErrorKind = "socket_closed"    // a peer's TCP connection closed or reset
	ErrProxyConnect    ErrorKind = "proxy_connect"    // the proxy thread failed to connect a peer
	ErrCUDAOOM         ErrorKind = "cuda_oom"         // CUDA out of memory
	ErrNetPlugin       ErrorKind = "net_plugin"       // the OFI (libfabric, EFA) plugin failed
	ErrCollNetPlugin   ErrorKind = "collnet_plugin"   // the CollNet (SHARP) plugin failed
	ErrAsyncEvent      ErrorKind = "async_event"      // the HCA reported a fatal asynchronous event (device, QP, CQ, port)
)

// asyncEvents are the ibv_event_type_str texts of the asynchronous events
// NCCL's IB transport reports as WARN lines (its async thread), with what
// each means for a job. The ones left out (port active, LID, SM or GID
// change, client reregistration) are news, not failures.
var asyncEvents = map[string]string{
	"local catastrophic error": "the HCA itself failed (IBV_EVENT_DEVICE_FATAL: firmware or hardware): every queue pair on it is gone; " +
		"dmesg has the driver's health lines (mlx5 health syndrome); reset or power-cycle the device, check its firmware, and drain the node if it recurs",
	"local work queue catastrophic error": "a queue pair failed inside the HCA (IBV_EVENT_QP_FATAL): a device or driver fault; dmesg has the driver's view",
	"invalid request local work queue error": "the QP's responder got a request it cannot carry out (IBV_EVENT_QP_REQ_ERR: an opcode, length or key the QP does not allow), " +
		"usually ranks whose NCCL versions, plugins or NCCL_IB_* settings differ; the QP is in error and its work completes flushed",
	"local access violation work queue error": "the QP touched memory its registration does not allow (IBV_EVENT_QP_ACCESS_ERR): a buffer freed or deregistered while in use, " +
		"or GPU memory registered without working GPUDirect RDMA (nvidia_peermem, DMA-BUF); the QP is in error and its work completes flushed",
	"CQ error":                     "a completion queue failed or overran (IBV_EVENT_CQ_ERR): its completions are lost and the QPs on it stop",
	"SRQ catastrophic error":       "a shared receive queue failed (IBV_EVENT_SRQ_ERR)",
	"port error":                   "the port left ACTIVE (IBV_EVENT_PORT_ERR: the link went down): a cable, transceiver or switch port; its queue pairs fail with retry errors next",
	"path migration request error": "the alternate path failed too (IBV_EVENT_PATH_MIG_ERR)",
}

// warnKinds classify NCCL WARN lines beyond completions and verbs calls,
// first match wins.
var warnKinds = []struct {
	re      *regexp.Regexp
	kind    ErrorKind
	meaning string
}{
	{regexp.MustCompile(`(?i)Connection closed by remote peer|Connection reset by peer|Socket recv failed`), ErrSocketClosed,
		"a peer closed its connection: that process died or aborted first (its own log has the cause), or a firewall or NCCL_SOCKET_IFNAME mismatch cut it"},
	{regexp.MustCompile(`Failed to execute operation Connect|proxy.*[Cc]onnect.*fail`), ErrProxyConnect,
		"connecting to a peer failed in NCCL's proxy: the lines just before name the transport's error (often a socket or verbs failure on the other side)"},
	{regexp.MustCompile(`(?i)out of memory|cudaErrorMemoryAllocation|Cuda failure 2\b`), ErrCUDAOOM,
		"CUDA ran out of GPU memory for NCCL's buffers: the application holds too much, or NCCL_BUFFSIZE / channel counts are too large"},
	{regexp.MustCompile(`SHARP group create|sharp_plugin|SHARP.*fail`), ErrCollNetPlugin,
		"the CollNet plugin (SHARP in-network reduction) could not set up its group: the SHARP Aggregation Manager (sharp_am) is unreachable or its trees are locked or exhausted; this communicator cannot use CollNet (unset NCCL_COLLNET_ENABLE to run without it)"},
	{regexp.MustCompile(`NET/OFI|fi_getinfo|libfabric`), ErrNetPlugin,
		"the OFI plugin (aws-ofi-nccl) failed: no EFA device visible (in a container, expose /dev/infiniband), or mismatched libfabric and plugin versions; NCCL then falls back to sockets or stops"},
}

// wcStatuses are the ibv_wc_status values NCCL reports, with what they
// mean for a job.
var wcStatuses = map[int]struct{ name, meaning string }{
	1:  {"IBV_WC_LOC_LEN_ERR", "local length error: a receive was too small for the message (ranks with different NCCL versions or settings)"},
	2:  {"IBV_WC_LOC_QP_OP_ERR", "local QP operation error: an invalid work request"},
	4:  {"IBV_WC_LOC_PROT_ERR", "local protection error: the buffer's memory registration is not valid, e.g. GPU memory registered without GPUDirect RDMA support (nvidia_peermem) or memory freed while in use"},
	5:  {"IBV_WC_WR_FLUSH_ERR", "flushed: the QP had already failed; the first error in the log is the cause"},
	9:  {"IBV_WC_REM_INV_REQ_ERR", "remote invalid request: the peer rejected the request"},
	10: {"IBV_WC_REM_ACCESS_ERR", "remote access error: the peer's memory key was not valid (the peer freed the buffer or crashed)"},
	11: {"IBV_WC_REM_OP_ERR", "remote operation error: the peer could not complete the request"},
	12: {"IBV_WC_RETRY_EXC_ERR", "transport retries exceeded: packets were lost or the peer is gone: a dead or hung peer, a link or switch dropping packets, on RoCE no lossless class (PFC) or ECN, or a GID index whose address does not route"},
	13: {"IBV_WC_RNR_RETRY_EXC_ERR", "receiver-not-ready retries exceeded: the peer did not post receive buffers in time (overloaded, hung or dead)"},
}

var (
	reCompletion = regexp.MustCompile(`Got completion (?:from peer (\S+) )?with (?:error (\d+)|status=(?:\w*\()?(\d+))`)
	reCallFailed = regexp.MustCompile(`(?:Call to )?(ibv_(?:create|reg|modify|open|get|alloc)\w*)(?:\(\))? failed(?:(?: with (?:error )?|: ?)(.*?))?\s*$`)
	reNoIBDevice = regexp.MustCompile(`^NET/IB ?: No device found`)
	reGDRGPU     = regexp.MustCompile(`GPU Direct RDMA (Enabled|Disabled) for GPU (\S+) / HCA (\S+)(?: '[^']*')? \(distance (\d+) (<=|<|>=|>) (\d+)\)`)
	// NCCL 2.19+ says only "Disabled for HCA 0 'mlx5_0'" (no peer-memory
	// module and no DMA-BUF).
	reGDRHCAOff   = regexp.MustCompile(`^NET/IB\w* ?: GPU Direct RDMA Disabled for HCA (\d+) '([^']+)'\s*$`)
	reGDRNoModule = regexp.MustCompile(`GPU Direct RDMA Disabled for (?:GPU \S+ / )?HCA (\d+) '([^']+)' \(no module`)
	reInit        = regexp.MustCompile(`comm (0x[0-9a-f]+) rank (\d+) nranks (\d+).*- Init (START|COMPLETE)`)
	// NCCL 2.3/2.4 name the network transport in "CUDA Dev 0[0], Socket
	// NIC distance : PHB" (or "IB NIC distance").
	reNICDistance = regexp.MustCompile(`^CUDA Dev \d+\[\d+\], (IB|Socket) NIC distance`)
	reIBDisable   = regexp.MustCompile(`NCCL_IB_DISABLE set by environment to (\d+)`)
	reWatchdog    = regexp.MustCompile(`Watchdog caught collective operation timeout: (\S+?\(.*?\)) ran for (\d+) milliseconds`)
	reTorchRank   = regexp.MustCompile(`\[Rank (\d+)\]`)
	// The async thread's lines: "Got async event : EVENT" (2.4, no device),
	// "DEV:PORT Got async event : EVENT" (to 2.24), "DEV:PORT async fatal
	// event[ on QP (0x..) qpn=..]: EVENT" and "DEV:PORT Got async error
	// event: EVENT" / "Got non-fatal async event: EVENT(N)" (2.25+).
	reAsyncEvent = regexp.MustCompile(`^NET/IB\w* ?: (?:(\S+:\d+) )?(?:Got (?:non-fatal )?async (?:error )?event|async fatal event(?: on (?:QP|CQ|SRQ)\b[^:]*)?) ?: ?(.+?)(?:\(\d+\))?\s*$`)
)

// where cites a line.
type where struct {
	file string
	line int
}

func (w where) String() string {
	if w.file == "" {
		return strconv.Itoa(w.line)
	}
	return w.file + ":" + strconv.Itoa(w.line)
}

// hostState is what the lines of one host say.
type hostState struct {
	versions            []string
	network             Network
	networkRaw          string
	links               map[string]bool // "IB", "RoCE" from NET/IB : Using
	socketUsing         bool            // NET/Socket : Using
	ibNoDevice          bool            // NET/IB : No device found
	netIB, netIBGDR     int             // NET/IB channels, with GDRDMA
	netSocket, netOther int
	plugin              string // the net plugin of NET/<plugin>/N channels
	multiNode           bool
	singleNode          bool // nNodes 1
	ibDisabled          bool
	distanceNet         Network // IB or Socket from NCCL 2.3/2.4's "NIC distance" lines
	gdrOn, gdrOff       []string
	noModule            []string
	initStart, initDone map[string]int
	bootstrap           string
	errors              []LogError
}

type analyzer struct {
	hosts map[string]*hostState
	order []string
	// otherWarns are NCCL WARN lines no error kind below classifies
	// (FILE:N and the text, the first few only), otherWarnN all of them.
	otherWarns []string
	otherWarnN int
	otherHits  int // lines other() classified
}

func newAnalyzer() *analyzer { return &analyzer{hosts: map[string]*hostState{}} }

func (a *analyzer) host(name string) *hostState {
	h, ok := a.hosts[name]
	if !ok {
		h = &hostState{links: map[string]bool{}, initStart: map[string]int{}, initDone: map[string]int{}}
		a.hosts[name] = h
		a.order = append(a.order, name)
	}
	return h
}

func (a *analyzer) version(host, v string) {
	h := a.host(host)
	if !slices.Contains(h.versions, v) {
		h.versions = append(h.versions, v)
	}
}

// launcherHost finds the host in a line that is not an NCCL INFO/WARN line.
func launcherHost(line string) string {
	if m := reLine.FindStringSubmatch(line + " NCCL INFO x"); m != nil {
		return m[1]
	}
	return ""
}

// other reads lines that are not NCCL's: PyTorch's watchdog.
func (a *analyzer) other(line string, at where) {
	m := reWatchdog.FindStringSubmatch(line)
	if m == nil {
		return
	}
	host := ""
	if r := reTorchRank.FindStringSubmatch(line); r != nil {
		host = "rank " + r[1]
	}
	a.otherHits++
	h := a.host(host)
	h.errors = append(h.errors, LogError{Kind: ErrWatchdogTimeout, Status: m[2] + " ms", Host: host, Line: at.String(), Text: strings.TrimSpace(line),
		Meaning: "a collective (" + m[1] + ") did not finish within the timeout: a rank died or hung, or the network stalled; the first error on any rank is the cause"})
}

// line reads one NCCL line of a host.
func (a *analyzer) line(host, level, body string, at where) {
	h := a.host(host)
	if a.fact(h, host, body) || level != "WARN" {
		return
	}
	if e, matched := verbsError(host, body, at); matched {
		if e != nil {
			h.errors = append(h.errors, *e)
		}
		return
	}
	for _, w := range warnKinds {
		if w.re.MatchString(body) {
			h.errors = append(h.errors, LogError{Kind: w.kind, Host: host, Line: at.String(), Text: body, Meaning: w.meaning})
			return
		}
	}
	a.otherWarnN++
	if len(a.otherWarns) < 3 {
		a.otherWarns = append(a.otherWarns, "line "+at.String()+": "+body)
	}
}

// submatcher keeps the last match of a switch case.
type submatcher struct {
	s string
	m []string
}

func (m *submatcher) match(re *regexp.Regexp) bool {
	m.m = re.FindStringSubmatch(m.s)
	return m.m != nil
}

// verbsCallMeaning says what a failed verbs call means for a job.
func verbsCallMeaning(call, errText string) string {
	e := strings.ToLower(errText)
	has := func(words ...string) bool {
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(e, w) })
	}
	switch {
	case strings.HasPrefix(call, "ibv_reg_mr") && has("cannot allocate memory", "errno 12", "enomem"):
		return "out of locked memory: raise the memlock limit (ulimit -l unlimited; docker --ulimit memlock=-1; LimitMEMLOCK=infinity)"
	case strings.HasPrefix(call, "ibv_reg_mr") && has("bad address", "errno 14", "efault", "invalid argument"):
		return "GPU memory could not be registered: load nvidia_peermem (or use DMA-BUF with the open GPU kernel module)"
	case strings.HasPrefix(call, "ibv_reg_mr"):
		return "memory registration failed"
	case call == "ibv_modify_qp":
		return "connecting the queue pair failed: on RoCE usually an NCCL_IB_GID_INDEX whose address does not route to the peer, on InfiniBand a port without a subnet manager or a wrong LID; also mismatched MTU or NCCL_IB_TC"
	case strings.HasPrefix(call, "ibv_create") && has("cannot allocate memory", "errno 12"):
		return "out of memory for verbs objects: raise the memlock limit"
	case call == "ibv_create_qp" || call == "ibv_create_cq":
		return "the device refused a queue (pair): its limits (max_qp, max_cqe) or locked memory ran out, or the device is in a bad state (dmesg)"
	case call == "ibv_get_async_event":
		return "the device's event channel failed: the device is gone or being reset (it follows a fatal async event)"
	case call == "ibv_open_device" || call == "ibv_get_device_list":
		return "the device cannot be opened: no /dev/infiniband node in the container, permissions, or rdma-core missing"
	}
	return "the verbs call failed"
}

// result summarizes every host and the whole job.
func (a *analyzer) result(rep *Report) *Analysis {
	an := &Analysis{Hosts: []HostSummary{}}
	names := slices.Clone(a.order)
	slices.Sort(names)
	// A bare "NCCL version" line (NCCL_DEBUG=VERSION, or printed before the
	// prefix) belongs to the hosts whose own lines do not say.
	if bare, ok := a.hosts[""]; ok && len(bare.versions) > 0 && len(names) > 1 {
		for _, name := range names[1:] {
			if h := a.hosts[name]; len(h.versions) == 0 {
				h.versions = slices.Clone(bare.versions)
			}
		}
		bare.versions = nil
	}
	for _, name := range names {
		h := a.hosts[name]
		s := h.summary(rep.NNodes > 1 || len(rep.Hosts) > 1)
		if name == "" && s.empty() {
			continue
		}
		an.Hosts = append(an.Hosts, HostSummary{Host: name, Summary: s})
	}
	an.Summary = overall(an.Hosts)
	an.otherWarns, an.otherWarnN = a.otherWarns, a.otherWarnN
	return an
}

// singleNodeNote ends the one finding that is no fault: a bootstrap over
// the loopback of a job that runs on one node.
const singleNodeNote = "(fine on one node only)"

// Problems lists, one line each, what makes the logs a finding for a CI
// gate: a fallback to TCP sockets, each classified error (completions,
// verbs calls, async events, timeouts ...), each finding (no GPUDirect
// RDMA, init that never completed, mixed versions, a bootstrap other nodes
// cannot reach), and NCCL's other WARN lines. None: nothing wrong seen.
func (a *Analysis) Problems() []string {
	out := []string{}
	if a == nil {
		return out
	}
	for _, f := range a.Findings {
		if !strings.Contains(f, singleNodeNote) {
			out = append(out, f)
		}
	}
	if a.SocketFallback && !slices.ContainsFunc(out, func(f string) bool { return strings.Contains(f, "TCP sockets") }) {
		out = append(out, "falls back to TCP sockets between nodes")
	}
	for _, e := range a.Errors {
		out = append(out, fmt.Sprintf("%s error at line %s (%s)", e.Kind, e.Line, orDash(e.Host)))
	}
	if a.otherWarnN > 0 {
		out = append(out, fmt.Sprintf("%d other NCCL WARN line(s): %s", a.otherWarnN, strings.Join(a.otherWarns, "; ")))
	}
	return out
}

func (s Summary) empty() bool {
	return len(s.NCCLVersions) == 0 && s.Network == "" && len(s.Errors) == 0 && s.GDR == "unknown" && len(s.InitIncomplete) == 0
}

func (h *hostState) summary(jobMultiNode bool) Summary {
	s := Summary{NCCLVersions: slices.Clone(h.versions), Network: h.network, IBDisabledByEnv: h.ibDisabled,
		Bootstrap: h.bootstrap, Errors: slices.Clone(h.errors), Findings: []string{}}
	if s.NCCLVersions == nil {
		s.NCCLVersions = []string{}
	}
	if s.Errors == nil {
		s.Errors = []LogError{}
	}
	if s.Network == "" {
		s.Network = h.inferNetwork()
	}
	multiNode := h.multiNode || jobMultiNode || h.netIB+h.netSocket+h.netOther > 0
	// Sockets are a fallback unless the log shows a single node: an
	// excerpt from one host of a job rarely says how many there are.
	s.SocketFallback = h.netSocket > 0 || (s.Network == NetSocket && !h.singleNode)
	switch {
	case s.SocketFallback:
		s.Transport = "socket"
	case s.Network == NetIB && h.links["RoCE"] && !h.links["IB"]:
		s.Transport = "roce"
	case s.Network == NetIB:
		s.Transport = "ib"
	default:
		s.Transport = "unknown"
	}
	s.GDR, s.GDRDetail = h.gdr()
	for key, n := range h.initStart {
		if h.initDone[key] < n {
			s.InitIncomplete = append(s.InitIncomplete, key)
		}
	}
	slices.Sort(s.InitIncomplete)
	s.Findings = h.findings(s, multiNode)
	return s
}

// inferNetwork names the network when no "Using network" line does: IB
// from "NET/IB : Using" (older NCCL) unless NCCL_IB_DISABLE=1, then the
// channel lines, then NCCL_IB_DISABLE=1 or "NET/IB : No device found",
// which leave sockets. "NET/Socket : Using" alone says nothing: NCCL up to
// 2.4 printed it for the bootstrap interface on IB hosts too.
func (h *hostState) inferNetwork() Network {
	switch {
	case h.ibDisabled:
		return NetSocket
	case h.distanceNet != "":
		return h.distanceNet
	case len(h.links) > 0 || h.netIB > 0:
		return NetIB
	case h.netSocket > 0:
		return NetSocket
	case h.plugin != "":
		return Network(h.plugin)
	case h.ibNoDevice:
		return NetSocket
	}
	return ""
}

// gdr decides GPUDirect RDMA from the channel lines, or from older NCCL's
// per-GPU decisions.
func (h *hostState) gdr() (string, []string) {
	detail := append(slices.Clone(h.gdrOn), h.gdrOff...)
	for _, hca := range h.noModule {
		detail = append(detail, "HCA "+hca+": disabled (no module: nvidia_peermem not loaded)")
	}
	switch {
	case h.netSocket > 0:
		return "no", detail
	case h.netIB > 0 && h.netIBGDR == h.netIB:
		return "yes", detail
	case h.netIBGDR > 0:
		return "partial", detail
	case h.netIB > 0:
		return "no", detail
	case len(h.gdrOn) > 0 && len(h.gdrOff) > 0:
		return "partial", detail
	case len(h.gdrOn) > 0:
		return "yes", detail
	case len(h.gdrOff) > 0 || len(h.noModule) > 0:
		return "no", detail
	}
	return "unknown", detail
}

func (h *hostState) findings(s Summary, multiNode bool) []string {
	out := []string{}
	if s.SocketFallback {
		f := "falls back to TCP sockets between nodes"
		if h.ibDisabled {
			f += ": NCCL_IB_DISABLE=1 from the environment is the cause"
		}
		out = append(out, f)
	}
	switch s.GDR {
	case "no":
		if !s.SocketFallback {
			out = append(out, "no GPUDirect RDMA: data is staged through host memory (check "+gdrRemedy(s.NCCLVersions)+")")
		}
	case "partial":
		on, off := len(h.gdrOn), len(h.gdrOff)
		f := "GPUDirect RDMA for some GPUs only"
		if on+off > 0 {
			f += fmt.Sprintf(" (%d on, %d off): NCCL_NET_GDR_LEVEL decides by GPU-NIC PCIe distance; off for %s", on, off, strings.Join(h.gdrOff, "; "))
		}
		out = append(out, f)
	}
	if len(s.InitIncomplete) > 0 {
		// An excerpt may simply end before the COMPLETE line: say what
		// the log shows, not that init hung.
		out = append(out, fmt.Sprintf("no Init COMPLETE line in this log for %d communicator rank(s) that logged Init START (%s): a hang or crash during init, unless the log was cut short",
			len(s.InitIncomplete), strings.Join(s.InitIncomplete, ", ")))
	}
	if ifname, _, _ := strings.Cut(s.Bootstrap, ":"); slices.Contains([]string{"lo", "docker0", "virbr0"}, ifname) {
		f := "bootstraps over " + s.Bootstrap + ", which other nodes cannot reach"
		if !multiNode {
			f = "bootstraps over " + s.Bootstrap + " " + singleNodeNote
		}
		out = append(out, f+": set NCCL_SOCKET_IFNAME to the interface that carries the nodes' addresses")
	}
	return out
}

// overall combines the hosts: versions of all, the common network and
// transport (socket when any host fell back), GDR yes/no only when every
// host agrees.
func overall(hosts []HostSummary) Summary {
	s := Summary{NCCLVersions: []string{}, Errors: []LogError{}, Findings: []string{}}
	nets, transports, gdrs := map[string]bool{}, map[string]bool{}, map[string]bool{}
	byVersion := map[string][]string{}
	for _, h := range hosts {
		for _, v := range h.NCCLVersions {
			if !slices.Contains(s.NCCLVersions, v) {
				s.NCCLVersions = append(s.NCCLVersions, v)
			}
			byVersion[v] = append(byVersion[v], orDash(h.Host))
		}
		if h.Network != "" {
			nets[string(h.Network)] = true
		}
		// Lines without a host (a pasted title, a stripped excerpt)
		// that say nothing of the transport do not make the hosts' one
		// unknown.
		if h.Host != "" || h.Transport != "unknown" || len(hosts) == 1 {
			transports[h.Transport] = true
		}
		gdrs[h.GDR] = true
		s.SocketFallback = s.SocketFallback || h.SocketFallback
		s.IBDisabledByEnv = s.IBDisabledByEnv || h.IBDisabledByEnv
		s.Errors = append(s.Errors, h.Errors...)
		for _, c := range h.InitIncomplete {
			s.InitIncomplete = append(s.InitIncomplete, orDash(h.Host)+": "+c)
		}
		for _, f := range h.Findings {
			s.Findings = append(s.Findings, orDash(h.Host)+": "+f)
		}
	}
	slices.SortFunc(s.NCCLVersions, compareVersions)
	if len(s.NCCLVersions) > 1 {
		var parts []string
		for _, v := range s.NCCLVersions {
			parts = append(parts, v+" on "+strings.Join(byVersion[v], ", "))
		}
		s.Findings = append(s.Findings, "mixed NCCL versions: "+strings.Join(parts, "; "))
	}
	s.Network = Network(strings.Join(sortedKeys(nets), ","))
	// A host whose lines say nothing of the transport (an excerpt that
	// shows only its plugin loading) does not make the others' unknown.
	if len(transports) > 1 {
		delete(transports, "unknown")
	}
	switch {
	case s.SocketFallback:
		s.Transport = "socket"
	case len(transports) == 1:
		s.Transport = sortedKeys(transports)[0]
	default:
		s.Transport = "unknown"
	}
	delete(gdrs, "unknown")
	switch {
	case len(gdrs) == 1:
		s.GDR = sortedKeys(gdrs)[0]
	case len(gdrs) > 1:
		s.GDR = "partial"
	default:
		s.GDR = "unknown"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// compareVersions orders "2.9.9" before "2.18.3".
func compareVersions(a, b string) int {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x - y
		}
	}
	return len(pa) - len(pb)
}

// WriteText prints the per-host analysis for people.
func (a *Analysis) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Overall:        NCCL %s, network %s, transport %s, GPUDirect RDMA %s\n",
		orDash(strings.Join(a.NCCLVersions, ",")), orDash(string(a.Network)), a.Transport, a.GDR)
	for _, h := range a.Hosts {
		fmt.Fprintf(&b, "Host %-10s NCCL %s, network %s, transport %s, GPUDirect RDMA %s", orDash(h.Host)+":",
			orDash(strings.Join(h.NCCLVersions, ",")), orDash(string(h.Network)), h.Transport, h.GDR)
		if h.Bootstrap != "" {
			fmt.Fprintf(&b, ", bootstrap %s", h.Bootstrap)
		}
		b.WriteString("\n")
		for _, d := range h.GDRDetail {
			fmt.Fprintf(&b, "                  %s\n", d)
		}
	}
	for _, f := range a.Findings {
		fmt.Fprintf(&b, "FINDING:        %s\n", f)
	}
	for _, e := range a.Errors {
		fmt.Fprintf(&b, "ERROR:          [%s %s line %s] %s\n", orDash(e.Host), e.Kind, e.Line, e.Meaning)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
