// Package ncclog reads NCCL_DEBUG=INFO logs and says what NCCL actually
// did: its version, the network it chose, the NICs, the transport of every
// channel, the RoCE GID index, and whether traffic between nodes fell back
// to TCP sockets. It is plain Go so rdmabench doctor can use it too.
package ncclog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// NIC is one device from "NET/IB : Using [0]mlx5_0:1/RoCE ...".
type NIC struct {
	Index     int    `json:"index"`
	Name      string `json:"name"`
	Port      int    `json:"port"`
	LinkLayer string `json:"link_layer"` // "IB" or "RoCE"
	Raw       string `json:"raw"`
}

// Channel is one "Channel xx/y : a -> b via T" connection line.
type Channel struct {
	Channel   int    `json:"channel"`
	From      string `json:"from"` // as printed: rank[device or bus id]
	To        string `json:"to"`
	Dir       string `json:"dir,omitempty"` // "send", "receive" or ""
	Transport string `json:"transport"`     // NET/IB/0/GDRDMA, P2P/IPC/read, SHM/direct/direct, NET/Socket/0 ...
	Kind      string `json:"kind"`          // NET-IB, NET-Socket, NET-<plugin>, P2P, SHM, NVLS, CollNet, other
	Host      string `json:"host,omitempty"`
}

// Report is what a log says.
type Report struct {
	Version    string    `json:"version"`          // "2.18.3"
	CUDA       string    `json:"cuda,omitempty"`   // "12.2" from "+cuda12.2"
	Network    Network   `json:"network"`          // "IB", "Socket" or a plugin's name; "" if not seen
	NetworkRaw string    `json:"network_raw"`      // as printed ("IBext_v8")
	NICs       []NIC     `json:"nics"`             // IB/RoCE devices NCCL uses
	SocketIfs  []string  `json:"socket_ifs"`       // interfaces of NET/Socket
	Bootstrap  string    `json:"bootstrap"`        // bootstrap interface
	Channels   []Channel `json:"channels"`         // every connection line
	GIDIndex   int       `json:"gid_index"`        // -1 if unknown
	GDRDMA     bool      `json:"gdrdma"`           // some NET channel uses GPUDirect RDMA
	NNodes     int       `json:"nnodes,omitempty"` // from "nNodes N", 0 if unknown
	Hosts      []string  `json:"hosts"`            // host names in the line prefixes
	// SocketFallback: traffic between nodes goes over TCP sockets (a
	// channel via NET/Socket, or network Socket with several nodes).
	SocketFallback bool     `json:"socket_fallback"`
	NCCLWarnings   []string `json:"nccl_warnings,omitempty"` // NCCL WARN lines
	Warnings       []string `json:"warnings"`                // our conclusions
	Notes          []string `json:"notes,omitempty"`
	Lines          int      `json:"nccl_lines"` // lines that came from NCCL
	// LongLines counts lines over MaxLine that were skipped (application
	// output between NCCL's lines; NCCL's own are short).
	LongLines int `json:"long_lines_skipped,omitempty"`
	files     []fileStat
	// Analysis is the per-host view: versions, transport, GPUDirect RDMA,
	// init, classified errors.
	Analysis *Analysis `json:"analysis,omitempty"`
}

var (
	// The host may be anonymised as <cluster_name>-style text; a
	// launcher's "[1,0]<stdout>:" before it does not match as a host
	// because no pid follows it.
	// The host follows a launcher's or shipper's prefix, or a markdown
	// backtick (\x60: a log pasted as inline code, nccl#1524). NCCL before
	// 2.3 printed "INFO" without "NCCL" after the same prefix.
	reLine    = regexp.MustCompile(`(?:^|\s|\]|:|\x60)([^\s\[\]:\x60]+):(\d+):(\d+) \[(\d+)\] (?:\S+:\d+ )?(?:NCCL )?(INFO|WARN) (.*)$`)
	reBare    = regexp.MustCompile(`NCCL (INFO|WARN) (.*)$`)
	reVersion = regexp.MustCompile(`NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?`)
	// "Using network IB"; NCCL 2.3 and earlier: "Using internal Network IB".
	reNetwork = regexp.MustCompile(`^Using (?:internal )?[Nn]etwork (.+?)\s*$`)
	reIBUsing = regexp.MustCompile(`^NET/IB(?:ext\w*)? ?: Using (.*)$`)
	// "[0]mlx5_0:1/RoCE", and the NICs a plugin merges into one device
	// ("[0]{mlx5_0:1/RoCE,mlx5_1:1/RoCE}", "mlx5_0:1/RoCE+mlx5_1:1/RoCE").
	reIBNIC     = regexp.MustCompile(`(?:\[(\d+)\])?\{?([A-Za-z0-9_.-]+):(\d+)/(IB|RoCE)`)
	reSockUsing = regexp.MustCompile(`^NET/Socket ?: Using (.*)$`)
	reSockIf    = regexp.MustCompile(`\[(\d+)\]([^\s:\[\]]+):([^\s<]+)`)
	reBootstrap = regexp.MustCompile(`^Bootstrap ?: Using (\S+)`)
	reChannel   = regexp.MustCompile(`^(?:Channel|Ring) (\d+)(?:/\d+)? : (\S+) -> (\S+)(?: \[(send|receive)\])? via (.+?)\s*$`)
	reGIDEnv    = regexp.MustCompile(`NCCL_IB_GID_INDEX set (?:by environment )?to (-?\d+)`)
	reGIDOther  = regexp.MustCompile(`(?i)\bgid[ _]?index[ :=]+(\d+)|\bGID (\d+) \(`)
	reNNodes    = regexp.MustCompile(`\bnNodes (\d+)`)
	// A log shipper's timestamp glued to the host
	// ("2025-05-16T16:39:51.208-07:00ip-10-36-29-253:79:79 [0] NCCL INFO").
	reStamp = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?`)
	// GitHub's autolinks in a pasted log: "transport/[net_ib.cc:101](http://net_ib.cc:101/)",
	// "[10.1.3.201](http://10.1.3.201/)<33057>" (nccl#1710).
	reAutolink = regexp.MustCompile(`\[([^\]\s]+)\]\(https?://([^)\s]*?)/?\)`)
)

// strippedBodies are the NCCL lines recognisable without their
// "host:pid:tid [dev] NCCL INFO" prefix, as excerpts are often pasted.
var strippedBodies = []*regexp.Regexp{reNetwork, reIBUsing, reSockUsing, reChannel,
	regexp.MustCompile(`^NCCL_IB_DISABLE set by environment to`), regexp.MustCompile(`^NET/IB ?: No device found`),
	regexp.MustCompile(`^(?:\S+\.cc?:\d+ )?(?:NET/IB ?: )?Got completion (?:from peer \S+ )?with`)}

// strippedWarn marks a stripped line as a warning.
var strippedWarn = regexp.MustCompile(`Got completion|Call to \w+ failed`)

// cleanLine removes a log shipper's timestamps, a web page's autolinks
// (the link's text stays) and, where a shipper wrote the message twice
// ("stamp msg | msg"), the copy.
func cleanLine(line string) string {
	line = reStamp.ReplaceAllString(line, " ")
	if strings.Contains(line, "](http") {
		line = reAutolink.ReplaceAllStringFunc(line, func(link string) string {
			m := reAutolink.FindStringSubmatch(link)
			if m[2] != m[1] {
				return link // a real link, not the page's rendering of the text
			}
			return m[1]
		})
	}
	if i := strings.Index(line, " | "); i >= 0 && strings.Contains(line[:i], "NCCL ") && strings.Contains(line[i:], "NCCL ") {
		line = line[:i]
	}
	return line
}

// strippedLine reads a line pasted without NCCL's prefix: it must begin
// (after an optional "[dev] ") with a message only NCCL prints.
func strippedLine(line string) (level, body string, ok bool) {
	body = strings.TrimSpace(line)
	if strings.HasPrefix(body, "[") {
		if i := strings.Index(body, "] "); i > 0 && i < 6 {
			body = body[i+2:]
		}
	}
	for _, re := range strippedBodies {
		if loc := re.FindStringIndex(body); loc != nil && loc[0] == 0 {
			level = "INFO"
			if strippedWarn.MatchString(body) {
				level = "WARN"
			}
			return level, body, true
		}
	}
	return "", "", false
}

// Kind classifies a transport string. NCCL's built-in transports behind
// its plugin interface ("NET/IBext_v8/0", "NET/Socketext_v7/0") are still
// IB and Socket: their prefixes are IB's and Socket's.
func Kind(transport string) string {
	switch {
	case strings.HasPrefix(transport, "NET/IB"):
		return "NET-IB"
	case strings.HasPrefix(transport, "NET/Socket"):
		return "NET-Socket"
	case strings.HasPrefix(transport, "NET/"):
		name := strings.TrimPrefix(transport, "NET/")
		if i := strings.IndexByte(name, '/'); i >= 0 {
			name = name[:i]
		}
		return "NET-" + name
	case strings.HasPrefix(transport, "P2P"):
		return "P2P"
	case strings.HasPrefix(transport, "SHM"):
		return "SHM"
	case strings.HasPrefix(transport, "NVLS"):
		return "NVLS"
	case strings.HasPrefix(transport, "CollNet"), strings.HasPrefix(transport, "COLLNET"):
		return "CollNet"
	}
	return "other"
}

// Parse reads a log. Lines that are not NCCL's are ignored, so a log mixed
// with the application's output (or several ranks' logs concatenated) works.
func Parse(r io.Reader) (*Report, error) {
	return ParseFiles([]Named{{Name: "", R: r}})
}

// Named is one log and the name its lines are cited by.
type Named struct {
	Name string
	R    io.Reader
}

// ParseFiles reads several logs (one per node or rank, as launchers write
// them) into one report, with the per-host analysis.
func ParseFiles(files []Named) (*Report, error) {
	rep := &Report{GIDIndex: -1}
	st := &parseState{hosts: map[string]bool{}, nics: map[string]bool{}, ifs: map[string]bool{}, an: newAnalyzer()}
	for _, f := range files {
		if err := st.feed(rep, f); err != nil {
			return rep, err
		}
	}
	rep.conclude()
	rep.Analysis = st.an.result(rep)
	return rep, nil
}

type parseState struct {
	hosts, nics, ifs map[string]bool
	an               *analyzer
}

func (st *parseState) feed(rep *Report, f Named) error {
	rep.files = append(rep.files, fileStat{name: f.Name})
	fst := &rep.files[len(rep.files)-1]
	br, err := open(f.Name, f.R, fst)
	if err != nil {
		var nl *NotLogError
		if errors.As(err, &nl) {
			return err
		}
		return fmt.Errorf("reading NCCL log %s: %w", describe(f.Name), err)
	}
	lr := &lineReader{br: br}
	nccl, other := rep.Lines, st.an.otherHits
	defer func() { fst.bytes, fst.nccl, fst.other = lr.n, rep.Lines-nccl, st.an.otherHits-other }()
	for lineNo := 1; ; lineNo++ {
		raw, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("reading NCCL log %s at line %d: %w", describe(f.Name), lineNo, err)
		}
		if fst.first == nil {
			if t := bytes.TrimLeft(raw, " \t\r\f\ufeff"); len(t) > 0 {
				fst.first = bytes.Clone(t[:min(len(t), 16)])
			}
		}
		if lr.long {
			// Not NCCL's: its lines are short. Skipped, counted.
			fst.long++
			if fst.firstLong == 0 {
				fst.firstLong = lineNo
			}
			continue
		}
		line := cleanLine(strings.TrimRight(string(raw), "\r"))
		at := where{file: f.Name, line: lineNo}
		var host, level, body string
		var ok bool
		if m := reLine.FindStringSubmatch(line); m != nil {
			host, level, body = m[1], m[5], m[6]
		} else if m := reBare.FindStringSubmatch(line); m != nil {
			level, body = m[1], m[2]
		} else if level, body, ok = strippedLine(line); ok {
			// a pasted excerpt without the prefix: no host
		} else if m := reVersion.FindStringSubmatch(line); m != nil && strings.Contains(line, "NCCL version") {
			// NCCL_DEBUG=VERSION/WARN prints a bare "NCCL version ..." line.
			if rep.Version == "" {
				rep.Version, rep.CUDA = m[1], m[2]
			}
			st.an.version(launcherHost(line), m[1])
			rep.Lines++
			continue
		} else {
			st.an.other(line, at) // PyTorch's watchdog and other non-NCCL lines
			continue
		}
		rep.Lines++
		if host != "" && !st.hosts[host] {
			st.hosts[host] = true
			rep.Hosts = append(rep.Hosts, host)
		}
		// Drop a "file.cc:123 " source position some versions put first.
		if i := strings.IndexByte(body, ' '); i > 0 && strings.Contains(body[:i], ".cc:") {
			body = body[i+1:]
		}
		st.an.line(host, level, body, at)
		if level == "WARN" {
			if len(rep.NCCLWarnings) < 20 {
				rep.NCCLWarnings = append(rep.NCCLWarnings, body)
			}
			continue
		}
		parseInfo(rep, host, body, st.nics, st.ifs)
	}
	return nil
}

// describe names a file in messages.
func describe(name string) string {
	if name == "" {
		return "the log"
	}
	return name
}

func parseInfo(rep *Report, host, body string, nics, ifs map[string]bool) {
	if m := reVersion.FindStringSubmatch(body); m != nil && rep.Version == "" {
		rep.Version, rep.CUDA = m[1], m[2]
		return
	}
	if m := reNetwork.FindStringSubmatch(body); m != nil {
		rep.NetworkRaw, rep.Network = m[1], ParseNetwork(m[1])
		return
	}
	if m := reIBUsing.FindStringSubmatch(body); m != nil {
		for _, n := range reIBNIC.FindAllStringSubmatch(m[1], -1) {
			idx, _ := strconv.Atoi(n[1])
			port, _ := strconv.Atoi(n[3])
			key := n[2] + ":" + n[3]
			if nics[key] {
				continue
			}
			nics[key] = true
			rep.NICs = append(rep.NICs, NIC{Index: idx, Name: n[2], Port: port, LinkLayer: n[4], Raw: n[0]})
		}
		return
	}
	if strings.HasPrefix(body, "NET/IB") && strings.Contains(body, "No device found") {
		rep.Notes = append(rep.Notes, "NCCL found no InfiniBand/RoCE device (NET/IB : No device found)")
		return
	}
	if m := reSockUsing.FindStringSubmatch(body); m != nil {
		for _, n := range reSockIf.FindAllStringSubmatch(m[1], -1) {
			s := n[2] + " " + n[3]
			if !ifs[s] {
				ifs[s] = true
				rep.SocketIfs = append(rep.SocketIfs, s)
			}
		}
		return
	}
	if m := reBootstrap.FindStringSubmatch(body); m != nil && rep.Bootstrap == "" {
		rep.Bootstrap = strings.TrimPrefix(m[1], "[0]")
		return
	}
	if m := reChannel.FindStringSubmatch(body); m != nil {
		ch, _ := strconv.Atoi(m[1])
		c := Channel{Channel: ch, From: m[2], To: m[3], Dir: m[4], Transport: m[5], Kind: Kind(m[5]), Host: host}
		rep.Channels = append(rep.Channels, c)
		if strings.Contains(c.Transport, "GDRDMA") {
			rep.GDRDMA = true
		}
		return
	}
	if m := reGIDEnv.FindStringSubmatch(body); m != nil {
		rep.GIDIndex, _ = strconv.Atoi(m[1])
		return
	}
	if m := reGIDOther.FindStringSubmatch(body); m != nil && rep.GIDIndex < 0 {
		v := m[1]
		if v == "" {
			v = m[2]
		}
		rep.GIDIndex, _ = strconv.Atoi(v)
		return
	}
	if m := reNNodes.FindStringSubmatch(body); m != nil {
		if n, _ := strconv.Atoi(m[1]); n > rep.NNodes {
			rep.NNodes = n
		}
	}
}

// networkOfChannels names the network from the channel lines when the log
// has no "Using network" line: NET/IB/0/GDRDMA and NET/IBext_v8/0 are IB,
// NET/Socket/0 is Socket, NET/<plugin>/0 the plugin.
func networkOfChannels(chs []Channel) Network {
	for _, c := range chs {
		if k, ok := strings.CutPrefix(c.Kind, "NET-"); ok {
			return Network(k)
		}
	}
	return ""
}

// Network is the network NCCL runs over ("Using network X"): one of its
// two built-in ones or a plugin's name ("AWS Libfabric", "Libfabric").
type Network string

const (
	NetIB     Network = "IB"
	NetSocket Network = "Socket"
)

// ParseNetwork reads the name NCCL prints. NCCL 2.2x names its built-in
// transports after the plugin ABI ("IBext_v8", "Socketext_v7"); they are
// still IB and Socket.
func ParseNetwork(printed string) Network {
	for _, base := range []Network{NetIB, NetSocket} {
		if strings.HasPrefix(printed, string(base)+"ext") {
			return base
		}
	}
	return Network(printed)
}

// dmabufSince is the first NCCL that registers GPU memory by DMA-BUF.
const dmabufSince = "2.13.0"

// gdrRemedy names what GPUDirect RDMA needs for these NCCL versions:
// nvidia_peermem always, DMA-BUF only from NCCL 2.13 on.
func gdrRemedy(versions []string) string {
	for _, v := range versions {
		if v != "" && compareVersions(v, dmabufSince) < 0 {
			return "the nvidia-peermem module (NCCL " + v + " predates DMA-BUF support, which needs 2.13+)"
		}
	}
	return "the nvidia-peermem module or DMA-BUF support"
}

// KindCounts counts channel lines per kind.
func (r *Report) KindCounts() map[string]int {
	m := map[string]int{}
	for _, c := range r.Channels {
		m[c.Kind]++
	}
	return m
}

func (r *Report) conclude() {
	kinds := r.KindCounts()
	netChannels := 0
	for k, n := range kinds {
		if strings.HasPrefix(k, "NET-") {
			netChannels += n
		}
	}
	if r.Network == "" {
		r.Network = networkOfChannels(r.Channels)
	}
	multiNode := r.NNodes > 1 || len(r.Hosts) > 1 || netChannels > 0
	// "Using network Socket" is a fallback unless the log shows one node:
	// an excerpt from one host of a job rarely says how many there are.
	if kinds["NET-Socket"] > 0 || (r.Network == NetSocket && r.NNodes != 1) {
		r.SocketFallback = true
		r.Warnings = append(r.Warnings, "NCCL moves data between nodes over TCP sockets (NET/Socket), not RDMA: expect a small fraction of the network's bandwidth. "+
			"Check that the RDMA libraries (libibverbs, rdma-core) are visible to this process (containers!), that NCCL_IB_DISABLE and NCCL_NET are unset, and NCCL_IB_HCA.")
	}
	if kinds["NET-IB"] > 0 && !r.GDRDMA {
		r.Warnings = append(r.Warnings, "NET/IB channels without GDRDMA: data is staged through host memory (no GPUDirect RDMA). Check "+gdrRemedy([]string{r.Version})+", and NCCL_NET_GDR_LEVEL.")
	}
	roce := false
	for _, n := range r.NICs {
		roce = roce || n.LinkLayer == "RoCE"
	}
	if roce && r.GIDIndex < 0 && multiNode {
		r.Notes = append(r.Notes, "RoCE NICs in use and the log does not show the GID index: if connections fail or hang, check it with show_gids and set NCCL_IB_GID_INDEX to a RoCE v2 entry with an IPv4 address (NCCL >= 2.21 picks one itself).")
	}
	if r.Lines == 0 {
		r.Notes = append(r.Notes, "no NCCL log lines found (was NCCL_DEBUG=INFO set?)")
	}
	for _, f := range r.files {
		if f.long > 0 {
			r.LongLines += f.long
			at := where{file: f.name, line: f.firstLong}
			r.Notes = append(r.Notes, fmt.Sprintf("%d line(s) over %d MiB skipped (not NCCL's; the first at line %s)", f.long, MaxLine>>20, at))
		}
	}
	sort.Strings(r.Hosts)
}

// TransportSummary lists each distinct transport with its channel count,
// most used first.
func (r *Report) TransportSummary() []string {
	count := map[string]int{}
	for _, c := range r.Channels {
		count[c.Transport]++
	}
	keys := make([]string, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if count[keys[i]] != count[keys[j]] {
			return count[keys[i]] > count[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s (%d)", k, count[k])
	}
	return out
}

// WriteText prints the report for people.
func (r *Report) WriteText(w io.Writer) error {
	b := &strings.Builder{}
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	v := or(r.Version, "not found")
	if r.CUDA != "" {
		v += " (CUDA " + r.CUDA + ")"
	}
	fmt.Fprintf(b, "NCCL version:   %s\n", v)
	fmt.Fprintf(b, "Network:        %s\n", or(string(r.Network), "not reported"))
	if len(r.NICs) > 0 {
		var s []string
		for _, n := range r.NICs {
			s = append(s, fmt.Sprintf("[%d]%s:%d/%s", n.Index, n.Name, n.Port, n.LinkLayer))
		}
		fmt.Fprintf(b, "NICs:           %s\n", strings.Join(s, " "))
	}
	if len(r.SocketIfs) > 0 {
		fmt.Fprintf(b, "Socket ifs:     %s\n", strings.Join(r.SocketIfs, ", "))
	}
	if r.GIDIndex >= 0 {
		fmt.Fprintf(b, "GID index:      %d\n", r.GIDIndex)
	} else {
		fmt.Fprintf(b, "GID index:      not shown in the log\n")
	}
	if len(r.Channels) > 0 {
		fmt.Fprintf(b, "Transports:     %s\n", strings.Join(r.TransportSummary(), ", "))
		fmt.Fprintf(b, "GPUDirect RDMA: %s\n", map[bool]string{true: "yes", false: "no"}[r.GDRDMA])
	} else {
		fmt.Fprintf(b, "Transports:     no channel lines (single rank, or NCCL_DEBUG_SUBSYS without INIT)\n")
	}
	if r.NNodes > 0 {
		fmt.Fprintf(b, "Nodes:          %d\n", r.NNodes)
	}
	for _, x := range r.NCCLWarnings {
		fmt.Fprintf(b, "NCCL WARN:      %s\n", x)
	}
	for _, x := range r.Notes {
		fmt.Fprintf(b, "Note:           %s\n", x)
	}
	for _, x := range r.Warnings {
		if strings.Contains(x, "TCP sockets") {
			fmt.Fprintf(b, "WARNING: *** TCP SOCKET FALLBACK *** %s\n", x)
		} else {
			fmt.Fprintf(b, "WARNING: %s\n", x)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
