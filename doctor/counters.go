package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// counterClass is rdmasys's classification as doctor judges it: traffic
// and other counters are no errors.
type counterClass int

const (
	notAnError counterClass = iota
	linkCounter
	transportCounter
)

func classifyCounter(dir, name string) counterClass {
	switch rdmasys.ClassifyCounter(dir, name) {
	case rdmasys.CounterLink:
		return linkCounter
	case rdmasys.CounterTransport:
		return transportCounter
	}
	return notAnError
}

// saturated reports whether a PMA counter sits at its maximum.
func saturated(key string, v uint64) bool {
	dir, name, _ := strings.Cut(key, "/")
	w, ok := rdmasys.PMAWidth(name)
	return dir == "counters" && ok && v == 1<<w-1
}

var counterDirs = []string{"counters", "hw_counters"}

// snapshot is every port's error counters: port name → "dir/name" → value.
type snapshot map[string]map[string]uint64

func readErrorCounters(h *host) snapshot {
	s := snapshot{}
	for _, p := range h.ports() {
		m := map[string]uint64{}
		for _, dir := range counterDirs {
			c, err := rdmasys.ReadCounters(h.opts.SysRoot, p.dev.Name, p.port.Number, dir)
			if err != nil {
				continue
			}
			for name, v := range c {
				if classifyCounter(dir, name) != notAnError {
					m[dir+"/"+name] = v
				}
			}
		}
		s[p.name()] = m
	}
	return s
}

// checkCounters judges link-layer and transport counters apart (port.counters,
// port.transport): old link errors are a WARN and growing ones a FAIL (the
// link is degrading now); transport counters grow under normal load, so
// they are INFO, and a WARN only when they grow during --watch.
func checkCounters(h *host) []Finding {
	first := readErrorCounters(h)
	var second snapshot
	if h.opts.Watch > 0 && len(h.devs) > 0 {
		h.opts.Wait(h.opts.Watch)
		if h.eth != nil { // the Ethernet side's second reading needs no wait of its own
			h.eth.waited = true
		}
		second = readErrorCounters(h)
	}
	var out []Finding
	// Like state and rate, counters judge only the ports NCCL uses: errors
	// on a storage port NCCL_IB_HCA leaves out do not slow the job.
	for _, p := range h.ports() {
		out = append(out, h.scoped(p, counterFinding(h, p, linkCounter, first[p.name()], second[p.name()], second != nil)))
		out = append(out, h.scoped(p, counterFinding(h, p, transportCounter, first[p.name()], second[p.name()], second != nil)))
	}
	return out
}

// counterCheck names, per class, the check and the remedies for old and
// growing counts.
var counterCheck = map[counterClass]struct{ check, old, growing string }{
	linkCounter: {"port.counters",
		"old errors or a flaky link: re-run with --watch 10 to see whether they grow (perfquery -x -R resets IB counters)",
		"the link is taking errors now: replace the cable/transceiver or move the port, and check the switch side's counters"},
	transportCounter: {"port.transport",
		"",
		"the transport is retransmitting now: check for congestion drops (PFC/ECN on a lossless class for RoCE, the switch's discard counters), a slow or dead peer, and NCCL_IB_TIMEOUT; they matter when bandwidth drops with them"},
}

func counterFinding(h *host, p portRef, class counterClass, before, after map[string]uint64, watched bool) Finding {
	cc := counterCheck[class]
	f := Finding{Check: cc.check, Subject: p.name(),
		Source: rdmasys.PortPath(h.opts.SysRoot, p.dev.Name, p.port.Number) + "/{counters,hw_counters}"}
	var names []string
	for n := range before {
		dir, name, _ := strings.Cut(n, "/")
		if classifyCounter(dir, name) == class {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		f.Status, f.Value = Skip, "no such counters exposed"
		return f
	}
	slices.Sort(names)
	var grown, nonzero, stuck []string
	for _, n := range names {
		short := n[strings.Index(n, "/")+1:]
		if watched && after[n] > before[n] {
			grown = append(grown, fmt.Sprintf("%s +%d", short, after[n]-before[n]))
		}
		v := max(before[n], after[n])
		switch {
		case saturated(n, v):
			stuck = append(stuck, short)
			nonzero = append(nonzero, fmt.Sprintf("%s=%d (saturated)", short, v))
		case v > 0:
			nonzero = append(nonzero, fmt.Sprintf("%s=%d", short, v))
		}
	}
	switch {
	case len(grown) > 0:
		f.Status = Fail
		if class == transportCounter {
			f.Status = Warn
		}
		f.Value = fmt.Sprintf("growing over %s: %s", h.opts.Watch, strings.Join(grown, ", "))
		f.Remedy = cc.growing
	case len(stuck) > 0:
		f.Status = Warn
		f.Value = strings.Join(nonzero, ", ")
		f.Remedy = fmt.Sprintf("%s stopped at its maximum, so growth cannot be seen: reset the counters (perfquery -x -R, or ibclearcounters) and re-run with --watch 10", strings.Join(stuck, ", "))
	case len(nonzero) > 0 && class == transportCounter:
		f.Status = Info
		f.Value = strings.Join(nonzero, ", ") + " (transport counters grow under normal load)"
	case len(nonzero) > 0:
		f.Status = Warn
		f.Value = strings.Join(nonzero, ", ")
		if watched {
			f.Value += fmt.Sprintf(" (steady over %s)", h.opts.Watch)
		}
		f.Remedy = cc.old
	default:
		f.Status = Pass
		f.Value = fmt.Sprintf("%d counters, all zero", len(names))
		if watched {
			f.Value += fmt.Sprintf(" over %s", h.opts.Watch)
		}
	}
	return f
}
