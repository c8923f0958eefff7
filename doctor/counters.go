package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// counterClass says what a counter's growth means, and so what to do.
type counterClass int

const (
	notAnError counterClass = iota
	// linkCounter: the physical or link layer dropped or corrupted
	// packets (cable, transceiver, switch port); never normal.
	linkCounter
	// transportCounter: the RDMA transport recovered (or gave up):
	// retransmits, duplicates, timeouts, flushed work requests. They grow
	// under normal load after congestion drops and when jobs end.
	transportCounter
)

// pmaWidths are the widths of the IB PMA PortCounters error fields
// (ports/N/counters); a value at 2^width-1 is saturated: the counter has
// stopped and the true count is higher.
var pmaWidths = map[string]uint{
	"symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
	"port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16,
	"port_xmit_discards": 16, "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8,
	"local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16,
}

// hwLinkWords mark the link-layer counters among driver hw_counters (FEC,
// symbol and CRC errors, link down events, PHY discards).
var hwLinkWords = []string{"fec", "symbol", "icrc", "crc", "link", "phy"}

// hwErrorWords pick the trouble counters out of driver-specific hw_counters
// by a word of their name (mlx5: out_of_sequence, local_ack_timeout_err;
// rxe: rcvd_seq_err, retry_exceeded_err). Traffic counters (rcvd_pkts,
// rdma_sends, ack_deferred, np_cnp_sent) have none.
var hwErrorWords = []string{"err", "error", "errors", "discard", "discards", "drop", "dropped",
	"downed", "timeout", "retrans", "duplicate", "flush"}

func classifyCounter(dir, name string) counterClass {
	if dir == "counters" {
		if _, ok := pmaWidths[name]; ok {
			return linkCounter
		}
		return notAnError
	}
	isErr := strings.HasPrefix(name, "out_of_")
	for _, w := range strings.Split(name, "_") {
		isErr = isErr || slices.Contains(hwErrorWords, w)
	}
	if !isErr {
		return notAnError
	}
	for _, w := range hwLinkWords {
		if strings.Contains(strings.ToLower(name), w) {
			return linkCounter
		}
	}
	return transportCounter
}

// saturated reports whether a PMA counter sits at its maximum.
func saturated(key string, v uint64) bool {
	dir, name, _ := strings.Cut(key, "/")
	w, ok := pmaWidths[name]
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
