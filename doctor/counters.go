package doctor

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// errorCounters are the IB PMA port counters (ports/N/counters) that count
// trouble rather than traffic.
var errorCounters = []string{
	"symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
	"port_rcv_remote_physical_errors", "port_rcv_switch_relay_errors",
	"port_xmit_discards", "port_xmit_constraint_errors", "port_rcv_constraint_errors",
	"local_link_integrity_errors", "excessive_buffer_overrun_errors", "VL15_dropped",
}

// hwErrorWords pick the trouble counters out of driver-specific hw_counters
// by a word of their name (mlx5: out_of_sequence, local_ack_timeout_err;
// rxe: rcvd_seq_err, retry_exceeded_err). Traffic counters (rcvd_pkts,
// rdma_sends, ack_deferred, np_cnp_sent) have none.
var hwErrorWords = []string{"err", "error", "errors", "discard", "discards", "drop", "dropped",
	"downed", "timeout", "retrans", "duplicate"}

func isErrorCounter(dir, name string) bool {
	if dir == "counters" {
		return slices.Contains(errorCounters, name)
	}
	if strings.HasPrefix(name, "out_of_") {
		return true
	}
	for _, w := range strings.Split(name, "_") {
		if slices.Contains(hwErrorWords, w) {
			return true
		}
	}
	return false
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
				if isErrorCounter(dir, name) {
					m[dir+"/"+name] = v
				}
			}
		}
		s[p.name()] = m
	}
	return s
}

// checkCounters: non-zero error counters are a WARN (they may be old);
// with Watch, counters that grow between two reads are a FAIL: the link is
// degrading now.
func checkCounters(h *host) []Finding {
	first := readErrorCounters(h)
	var second snapshot
	if h.opts.Watch > 0 && len(h.devs) > 0 {
		h.opts.Wait(h.opts.Watch)
		second = readErrorCounters(h)
	}
	var out []Finding
	for _, p := range h.ports() {
		out = append(out, counterFinding(h, p, first[p.name()], second[p.name()], second != nil))
	}
	return out
}

func counterFinding(h *host, p portRef, before, after map[string]uint64, watched bool) Finding {
	f := Finding{Check: "port.counters", Subject: p.name(),
		Source: rdmasys.PortPath(h.opts.SysRoot, p.dev.Name, p.port.Number) + "/{counters,hw_counters}"}
	if len(before) == 0 {
		f.Status, f.Value = Skip, "no error counters exposed"
		return f
	}
	names := make([]string, 0, len(before))
	for n := range before {
		names = append(names, n)
	}
	slices.Sort(names)
	var grown, nonzero []string
	for _, n := range names {
		short := n[strings.Index(n, "/")+1:]
		if watched && after[n] > before[n] {
			grown = append(grown, fmt.Sprintf("%s +%d", short, after[n]-before[n]))
		}
		if v := max(before[n], after[n]); v > 0 {
			nonzero = append(nonzero, fmt.Sprintf("%s=%d", short, v))
		}
	}
	switch {
	case len(grown) > 0:
		f.Status = Fail
		f.Value = fmt.Sprintf("growing over %s: %s", h.opts.Watch, strings.Join(grown, ", "))
		f.Remedy = "the link is taking errors now: replace the cable/transceiver or move the port, and check the switch side's counters"
	case len(nonzero) > 0:
		f.Status = Warn
		f.Value = strings.Join(nonzero, ", ")
		if watched {
			f.Value += fmt.Sprintf(" (steady over %s)", h.opts.Watch)
		}
		f.Remedy = "old errors or a flaky link: re-run with --watch 10 to see whether they grow (perfquery -x -R resets IB counters)"
	default:
		f.Status = Pass
		f.Value = fmt.Sprintf("%d error counters, all zero", len(names))
		if watched {
			f.Value += fmt.Sprintf(" over %s", h.opts.Watch)
		}
	}
	return f
}
