package doctor

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// ncclList is a parsed NCCL interface list such as NCCL_IB_HCA or
// NCCL_SOCKET_IFNAME: "^" excludes, "=" switches from prefix to exact match.
type ncclList struct {
	exclude bool
	exact   bool
	items   []ncclItem
}

type ncclItem struct {
	name string
	port int // 0: any port
}

// parseNCCLList parses "[^][=]name[:port],name[:port]...". Ports are only
// meaningful for NCCL_IB_HCA; withPorts=false keeps ":" in the name.
func parseNCCLList(s string, withPorts bool) (ncclList, error) {
	var l ncclList
	s = strings.TrimSpace(s)
	// NCCL reads "^" then "="; accept either order, as users write both.
	for len(s) > 0 && (s[0] == '^' || s[0] == '=') {
		if s[0] == '^' {
			l.exclude = true
		} else {
			l.exact = true
		}
		s = s[1:]
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		it := ncclItem{name: part}
		if withPorts {
			if name, port, ok := strings.Cut(part, ":"); ok {
				n, err := strconv.Atoi(port)
				if err != nil || n < 1 {
					return l, fmt.Errorf("bad port in %q", part)
				}
				it = ncclItem{name: name, port: n}
			}
		}
		l.items = append(l.items, it)
	}
	if len(l.items) == 0 {
		return l, fmt.Errorf("empty list")
	}
	return l, nil
}

// listEnv reads an NCCL interface list; an empty value counts as unset,
// as NCCL reads it (an empty NCCL_IB_HCA matches every device).
func (h *host) listEnv(name string) (string, bool) {
	val, ok := h.env(name)
	return val, ok && val != ""
}

// emptyList is the INFO for an interface list set to "".
func emptyList(name, uses string) string {
	return name + " is set but empty: NCCL reads it as unset and uses " + uses
}

// ncclListVar starts the check of an NCCL list variable: its value and the
// finding the check fills in; when the value is "" the check is done: no
// finding when the variable is unset, an INFO when it is set but empty
// (NCCL then uses uses).
func (h *host) ncclListVar(check, name, source, uses string) (val string, base Finding, done []Finding) {
	val, ok := h.env(name)
	base = Finding{Check: check, Subject: name, Source: source}
	if ok && val == "" {
		base.Status, base.Value = Info, emptyList(name, uses)
		return "", base, []Finding{base}
	}
	return val, base, nil
}

// matches returns the candidates an item selects: exact names with "=",
// otherwise every name the item is a prefix of (as NCCL does).
func (l ncclList) matches(it ncclItem, candidates []string) []string {
	var out []string
	for _, c := range candidates {
		if c == it.name || (!l.exact && strings.HasPrefix(c, it.name)) {
			out = append(out, c)
		}
	}
	return out
}

// checkNCCLHCA: every NCCL_IB_HCA entry must name an existing device whose
// selected ports are ACTIVE; NCCL skips the rest silently and, with none
// left, falls back to TCP sockets.
func checkNCCLHCA(h *host) []Finding {
	val, base, done := h.ncclListVar("nccl.ib_hca", "NCCL_IB_HCA", h.sysPath(rdmasys.ClassDir), "every RDMA device")
	if val == "" {
		return done
	}
	l, err := parseNCCLList(val, true)
	if err != nil {
		base.Status, base.Value = Fail, fmt.Sprintf("NCCL_IB_HCA=%q: %v", val, err)
		base.Remedy = "write it as [^][=]dev[:port],dev[:port], e.g. =mlx5_0:1,mlx5_1:1"
		return []Finding{base}
	}
	names := h.deviceNames()
	var out []Finding
	for _, it := range l.items {
		f := base
		label := it.name
		if it.port > 0 {
			label = fmt.Sprintf("%s:%d", it.name, it.port)
		}
		matched := l.matches(it, names)
		switch {
		case len(matched) == 0 && l.exclude:
			f.Status, f.Value = Warn, fmt.Sprintf("^%s excludes no device (have %s)", label, strings.Join(names, ", "))
			f.Remedy = "check the name for a typo"
		case len(matched) == 0:
			f.Status, f.Value = Fail, fmt.Sprintf("%s: no such RDMA device (have %s)", label, orDefault(strings.Join(names, ", "), "none"))
			f.Remedy = "fix NCCL_IB_HCA: NCCL ignores unknown names and, with none left, falls back to TCP sockets"
		case l.exclude:
			f.Status, f.Value = Info, fmt.Sprintf("^%s excludes %s", label, strings.Join(matched, ", "))
		default:
			f = hcaPortsFinding(h, f, label, it, matched, l.exact)
		}
		out = append(out, f)
	}
	return out
}

// hcaPortsFinding checks the ports an included entry selects. An entry
// without a port that names a device with an ACTIVE port uses that port;
// the device's other, inactive ports (an unplugged second port) are only
// mentioned.
func hcaPortsFinding(h *host, f Finding, label string, it ncclItem, matched []string, exact bool) Finding {
	var active, inactive, skipped []string
	hasActive := h.activeDevices()
	for _, p := range h.ports() {
		if !slices.Contains(matched, p.dev.Name) || (it.port > 0 && p.port.Number != it.port) {
			continue
		}
		switch {
		case isActive(p.port):
			active = append(active, p.name())
		case it.port == 0 && hasActive[p.dev.Name]:
			skipped = append(skipped, p.name()+" "+string(p.port.State))
		default:
			inactive = append(inactive, p.name()+" "+string(p.port.State))
		}
	}
	switch {
	case len(active) == 0 && len(inactive) == 0:
		f.Status, f.Value = Fail, label+": no such port"
		f.Remedy = "fix the port number in NCCL_IB_HCA (ports are numbered from 1)"
	case len(inactive) > 0:
		f.Status, f.Value = Fail, fmt.Sprintf("%s selects %s", label, strings.Join(inactive, ", "))
		f.Remedy = "bring the port up (see port.state) or drop it from NCCL_IB_HCA"
		if len(active) > 0 {
			f.Status = Warn
			f.Remedy = "NCCL skips the inactive port and loses its bandwidth: bring it up (see port.state) or drop it from NCCL_IB_HCA"
		}
	default:
		f.Status, f.Value = Pass, fmt.Sprintf("%s → %s ACTIVE", label, strings.Join(active, ", "))
		if len(skipped) > 0 {
			f.Value += fmt.Sprintf(" (%s not used)", strings.Join(skipped, ", "))
		}
	}
	// Without "=", mlx5_1 also selects mlx5_10..mlx5_17 on big hosts.
	if !exact && len(matched) > 1 && slices.Contains(matched, it.name) && f.Status == Pass {
		others := slices.DeleteFunc(slices.Clone(matched), func(m string) bool { return m == it.name })
		f.Status = Warn
		f.Value = fmt.Sprintf("%s also matches %s (prefix match)", label, strings.Join(others, ", "))
		f.Remedy = "prefix NCCL_IB_HCA with \"=\" for exact names, e.g. NCCL_IB_HCA==" + it.name
	}
	return f
}

// checkNCCLSocketIfname: NCCL bootstraps (and falls back to) TCP on these
// interfaces; a missing or down one stalls init.
func checkNCCLSocketIfname(h *host) []Finding {
	val, base, done := h.ncclListVar("nccl.socket_ifname", "NCCL_SOCKET_IFNAME", h.sysPath(rdmasys.NetClassDir), "the interfaces it finds itself")
	if val == "" {
		return done
	}
	l, err := parseNCCLList(val, false)
	names, lerr := rdmasys.NetdevNames(h.opts.SysRoot)
	if err == nil {
		err = lerr
	}
	if err != nil {
		base.Status, base.Value = Fail, fmt.Sprintf("NCCL_SOCKET_IFNAME=%q: %v", val, err)
		base.Remedy = "write it as [^][=]ifname,ifname, e.g. =eth0"
		return []Finding{base}
	}
	if l.exclude {
		var parts []string
		for _, it := range l.items {
			parts = append(parts, fmt.Sprintf("^%s excludes %s", it.name, orDefault(strings.Join(l.matches(it, names), ", "), "nothing")))
		}
		base.Status, base.Value = Info, strings.Join(parts, "; ")
		return []Finding{base}
	}
	// NCCL uses every interface any entry matches: one that is up is
	// enough (a list written for several node types names some that are
	// absent here).
	var matched, missing []string
	for _, it := range l.items {
		m := l.matches(it, names)
		if len(m) == 0 {
			missing = append(missing, it.name)
		}
		for _, n := range m {
			if !slices.Contains(matched, n) {
				matched = append(matched, n)
			}
		}
	}
	if len(matched) == 0 {
		base.Status, base.Value = Fail, fmt.Sprintf("%s: no such interface (have %s)", strings.Join(missing, ", "), strings.Join(names, ", "))
		base.Remedy = "set NCCL_SOCKET_IFNAME to the interface that carries the nodes' IP addresses"
		return []Finding{base}
	}
	f := ifnamesFinding(h, base, val, matched)
	if len(missing) > 0 && f.Status == Pass {
		f.Value += fmt.Sprintf(" (no %s here)", strings.Join(missing, ", "))
	}
	return []Finding{f}
}

func ifnamesFinding(h *host, f Finding, name string, matched []string) Finding {
	var up, down []string
	for _, m := range matched {
		nd, err := rdmasys.ReadNetdev(h.opts.SysRoot, m)
		if err == nil && nd.IsUp() {
			up = append(up, fmt.Sprintf("%s up, MTU %d", m, nd.MTU))
		} else {
			down = append(down, m+" "+orDefault(nd.OperState, "unreadable"))
		}
	}
	if len(up) == 0 {
		f.Status, f.Value = Fail, fmt.Sprintf("%s → %s", name, strings.Join(down, ", "))
		f.Remedy = "bring the interface up (ip link set dev IF up) or name one that is"
		return f
	}
	f.Status, f.Value = Pass, fmt.Sprintf("%s → %s", name, strings.Join(up, "; "))
	return f
}

// checkNCCLIBDisable: NCCL_IB_DISABLE=1 quietly moves all traffic to TCP.
func checkNCCLIBDisable(h *host) []Finding {
	val, ok := h.env("NCCL_IB_DISABLE")
	if !ok {
		return nil
	}
	f := Finding{Check: "nccl.ib_disable", Subject: "NCCL_IB_DISABLE", Value: "NCCL_IB_DISABLE=" + val}
	n, numeric := ncclParamValue(val)
	switch {
	case n == 0 && !numeric && strings.TrimSpace(val) != "":
		// NCCL reads its integer settings with strtoll(s, NULL, 0):
		// "maybe" or "yes" is 0, and IB stays on.
		f.Status = Pass
		f.Value += " is not a number: NCCL reads it as 0, so InfiniBand/RoCE stays enabled"
	case n == 0:
		f.Status = Pass
	default:
		f.Status = Warn
		f.Value += " forces NCCL onto TCP sockets"
		f.Remedy = "unset NCCL_IB_DISABLE so NCCL uses the RDMA devices"
	}
	return []Finding{f}
}

// ncclParamValue reads an integer setting as NCCL's ncclLoadParam does,
// with strtoll(s, NULL, 0): leading space, a sign, 0x for hexadecimal and
// a leading 0 for octal, digits up to the first that is not one, and 0 when
// there are none. numeric says whether any digit was read.
func ncclParamValue(s string) (n int64, numeric bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	base := int64(10)
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[2])):
		base, s = 16, s[2:]
	case len(s) > 0 && s[0] == '0':
		base = 8
	}
	for _, c := range s {
		var d int64
		switch {
		case c >= '0' && c <= '9':
			d = int64(c - '0')
		case c >= 'a' && c <= 'f':
			d = int64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = int64(c-'A') + 10
		default:
			d = base
		}
		if d >= base {
			break
		}
		numeric = true
		if n < 1<<58 { // strtoll saturates; any large value is non-zero alike
			n = n*base + d
		}
	}
	if neg {
		n = -n
	}
	return n, numeric
}

// checkNCCLDebug: INFO/TRACE logging costs start-up time at scale; it is for
// debugging runs (like the one that feeds doctor --nccl-log).
func checkNCCLDebug(h *host) []Finding {
	val, ok := h.env("NCCL_DEBUG")
	if !ok {
		return nil
	}
	f := Finding{Check: "nccl.debug", Subject: "NCCL_DEBUG", Value: "NCCL_DEBUG=" + val}
	switch strings.ToUpper(val) {
	case "INFO", "TRACE":
		f.Status = Warn
		f.Remedy = "set NCCL_DEBUG=WARN outside debugging runs; INFO logs every connection and slows start-up at scale"
	case "", "VERSION", "WARN", "ABORT":
		f.Status = Pass
	default:
		f.Status, f.Value = Warn, f.Value+" is not a level NCCL knows"
		f.Remedy = "use one of VERSION, WARN, INFO, TRACE"
	}
	return []Finding{f}
}

// gdrLevels are NCCL_NET_GDR_LEVEL's names, nearest first; integers 0-5 are
// the older spelling of the same scale.
var gdrLevels = []string{"LOC", "PIX", "PXB", "PHB", "SYS"}

// checkNCCLGDRLevel: LOC disables GPUDirect RDMA; anything else must parse.
func checkNCCLGDRLevel(h *host) []Finding {
	val, ok := h.env("NCCL_NET_GDR_LEVEL")
	if !ok {
		return nil
	}
	f := Finding{Check: "nccl.gdr_level", Subject: "NCCL_NET_GDR_LEVEL", Value: "NCCL_NET_GDR_LEVEL=" + val}
	level := strings.ToUpper(val)
	if n, err := strconv.Atoi(val); err == nil && n >= 0 && n <= 5 {
		level = gdrLevels[min(n, len(gdrLevels)-1)]
	}
	switch {
	case !slices.Contains(gdrLevels, level):
		f.Status, f.Value = Fail, f.Value+" is not one of LOC, PIX, PXB, PHB, SYS"
		f.Remedy = "unset it (NCCL picks from the topology) or use PIX, PXB, PHB or SYS"
	case level == "LOC":
		f.Status, f.Value = Warn, f.Value+" disables GPUDirect RDMA"
		f.Remedy = "unset NCCL_NET_GDR_LEVEL unless GPUDirect RDMA is broken on this host"
	default:
		f.Status = Pass
	}
	return []Finding{f}
}

// checkNCCLIBTC: the traffic class is an 8-bit field (DSCP << 2 on RoCE).
func checkNCCLIBTC(h *host) []Finding {
	val, ok := h.env("NCCL_IB_TC")
	if !ok {
		return nil
	}
	f := Finding{Check: "nccl.ib_tc", Subject: "NCCL_IB_TC", Value: "NCCL_IB_TC=" + val}
	if n, err := strconv.Atoi(val); err != nil || n < 0 || n > 255 {
		f.Status, f.Value = Fail, f.Value+" is outside 0-255"
		f.Remedy = "set the traffic class the fabric's lossless queue expects (DSCP × 4 plus the ECN bits, e.g. 106 for DSCP 26)"
	} else {
		f.Status = Pass
		f.Value += fmt.Sprintf(" (DSCP %d)", n>>2)
	}
	return []Finding{f}
}
