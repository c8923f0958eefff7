package paste

import (
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// dcbOf returns it's DCB, adding src to its Source.
func dcbOf(it *ethside.Iface, src string) *ethside.DCB {
	if it.DCB == nil {
		it.DCB = &ethside.DCB{Source: src}
	} else {
		it.DCB.Source += "+" + src
	}
	return it.DCB
}

// parseDCBPFC reads `dcb pfc show dev IF`: "prio-pfc 0:off 1:off ... 3:on".
func parseDCBPFC(lines []string, src string, it *ethside.Iface) error {
	var pfc [8]bool
	var fe firstErr
	seen := false
	for i, raw := range lines {
		f := strings.Fields(raw)
		for j := 0; j < len(f); j++ {
			if f[j] != "prio-pfc" {
				continue
			}
			seen = true
			for j++; j < len(f) && strings.Contains(f[j], ":"); j++ {
				p, v, _ := strings.Cut(f[j], ":")
				prio, err := strconv.Atoi(p)
				on, ok := onOff(v)
				if err != nil || prio < 0 || prio > 7 || !ok {
					fe.add(i+1, "prio-pfc %q is not PRIO:on|off", f[j])
					continue
				}
				pfc[prio] = on
			}
		}
	}
	if !seen {
		return errorf(0, "no prio-pfc in it")
	}
	d := dcbOf(it, src)
	if d.PFCEnabled == nil {
		d.PFCEnabled = &pfc
	}
	return fe.err
}

// parseDCBApp reads `dcb app show dev IF`: "dscp-prio 0:0 CS1:1 26:3",
// DSCP as a number or its name; "apptrust: dscp pcp" or "app-trust dscp"
// gives the trust.
func parseDCBApp(lines []string, src string, it *ethside.Iface) error {
	table := map[int]int{}
	trust := ""
	var fe firstErr
	for i, raw := range lines {
		f := strings.Fields(raw)
		inDSCP := false
		for j := 0; j < len(f); j++ {
			switch w := strings.TrimSuffix(f[j], ":"); {
			case w == "dscp-prio":
				inDSCP = true
			case w == "apptrust" || w == "app-trust" || w == "order":
				if j+1 < len(f) && trust == "" {
					trust = f[j+1]
				}
				inDSCP = false
			case inDSCP && strings.Contains(w, ":"):
				d, p, ok := dscpPrio(w)
				if !ok {
					fe.add(i+1, "dscp-prio %q is not DSCP:PRIO", f[j])
					continue
				}
				table[d] = p
			default:
				inDSCP = false
			}
		}
	}
	if len(table) == 0 && trust == "" {
		return errorf(0, "no dscp-prio or apptrust in it")
	}
	d := dcbOf(it, src)
	if d.DSCPPrio == nil && len(table) > 0 {
		d.DSCPPrio = table
	}
	if d.Trust == "" && (trust == "dscp" || trust == "pcp") {
		d.Trust = trust
	}
	return fe.err
}

// dscpNames: the names dcb prints without -N.
var dscpNames = map[string]int{
	"CS0": 0, "CS1": 8, "CS2": 16, "CS3": 24, "CS4": 32, "CS5": 40, "CS6": 48, "CS7": 56,
	"AF11": 10, "AF12": 12, "AF13": 14, "AF21": 18, "AF22": 20, "AF23": 22,
	"AF31": 26, "AF32": 28, "AF33": 30, "AF41": 34, "AF42": 36, "AF43": 38,
	"EF": 46, "VA": 44, "LE": 1,
}

func dscpPrio(pair string) (dscp, prio int, ok bool) {
	d, p, _ := strings.Cut(pair, ":")
	prio, err := strconv.Atoi(p)
	if err != nil || prio < 0 || prio > 7 {
		return 0, 0, false
	}
	if v, named := dscpNames[strings.ToUpper(d)]; named {
		return v, prio, true
	}
	dscp64, err := strconv.ParseInt(d, 0, 16)
	if err != nil || dscp64 < 0 || dscp64 > 63 {
		return 0, 0, false
	}
	return int(dscp64), prio, true
}

// parseMlnxQoS reads `mlnx_qos -i IF`: trust state, the dscp2prio rows
// ("prio:3 dscp:31,30,...") and the PFC table ("priority 0 1 ..." over
// "enabled 0 0 0 1 ...").
func parseMlnxQoS(lines []string, src string, it *ethside.Iface) error {
	var fe firstErr
	d := &ethside.DCB{}
	var prios []int // the "priority" header's order
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		f := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "Priority trust state:"):
			_, v, _ := keyValue(line)
			d.Trust = strings.ToLower(v)
		case strings.HasPrefix(line, "prio:") && strings.Contains(line, "dscp:"):
			if err := dscpRow(d, line); err != "" {
				fe.add(i+1, "%s", err)
			}
		case len(f) == 9 && f[0] == "priority":
			prios = nil
			for _, s := range f[1:] {
				if p, err := strconv.Atoi(s); err == nil && p >= 0 && p <= 7 {
					prios = append(prios, p)
				}
			}
		case len(f) == 9 && f[0] == "enabled":
			if err := pfcRow(d, prios, f[1:]); err != "" {
				fe.add(i+1, "%s", err)
			}
		}
	}
	if d.Trust == "" && d.PFCEnabled == nil && d.DSCPPrio == nil {
		if fe.err != nil {
			return fe.err
		}
		return errorf(0, "no trust state, dscp2prio or PFC table in it")
	}
	mergeDCB(dcbOf(it, src), d)
	return fe.err
}

func dscpRow(d *ethside.DCB, line string) string {
	f := strings.Fields(line)
	prio, err := strconv.Atoi(strings.TrimPrefix(f[0], "prio:"))
	if err != nil || prio < 0 || prio > 7 || len(f) < 2 {
		return "dscp2prio row " + quote(line) + " is not prio:N dscp:A,B,"
	}
	if d.DSCPPrio == nil {
		d.DSCPPrio = map[int]int{}
	}
	for _, s := range strings.Split(strings.TrimPrefix(f[1], "dscp:"), ",") {
		if s == "" {
			continue
		}
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || v > 63 {
			return "dscp2prio row " + quote(line) + " has DSCP " + quote(s)
		}
		d.DSCPPrio[v] = prio
	}
	return ""
}

func pfcRow(d *ethside.DCB, prios []int, vals []string) string {
	if len(prios) != 8 {
		return "PFC \"enabled\" row without a \"priority 0 .. 7\" header"
	}
	var pfc [8]bool
	for k, s := range vals {
		on, ok := onOff(s)
		if !ok {
			return "PFC enabled value " + quote(s) + " is neither 0 nor 1"
		}
		pfc[prios[k]] = on
	}
	d.PFCEnabled = &pfc
	return ""
}

// mergeDCB fills what dst lacks from src.
func mergeDCB(dst, src *ethside.DCB) {
	if dst.PFCEnabled == nil {
		dst.PFCEnabled = src.PFCEnabled
	}
	if dst.Trust == "" {
		dst.Trust = src.Trust
	}
	if dst.DSCPPrio == nil {
		dst.DSCPPrio = src.DSCPPrio
	}
	if dst.ECN == nil {
		dst.ECN = src.ECN
	}
}
