package engine

import (
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/verbs"
)

// Port counters around each measurement: on a lossy link the figure alone
// does not say why it is low, the retransmissions do (rxe: rcvd_seq_err,
// completer_retry_err, duplicate_request, out_of_seq_request; mlx5:
// packet_seq_err, out_of_sequence, local_ack_timeout_err, ...). Each side
// reads its own port before and after; the report shows what moved.

// maxCounters bounds the counters a peer may report (a port has a few
// dozen) and maxCounterName their names; a report beyond either is dropped
// whole (checkPeerCounters).
const (
	maxCounters    = 128
	maxCounterName = 64
)

// counterSnapshot is one port's counters ("counters" and "hw_counters" in
// sysfs) at one moment; nil when they could not be read.
type counterSnapshot map[string]uint64

func readPortCounters(sysRoot, dev string, port int) counterSnapshot {
	snap := counterSnapshot{}
	for _, dir := range []string{"counters", "hw_counters"} {
		m, err := rdmasys.ReadCounters(sysRoot, dev, port, dir)
		if err != nil {
			continue
		}
		for name, v := range m {
			if _, dup := snap[name]; dup {
				name = "hw_" + name // the rare name in both directories
			}
			snap[name] = v
		}
	}
	return snap
}

func (s *side) readCounters() counterSnapshot {
	if s == nil || s.ctx == nil {
		return nil
	}
	return readPortCounters(verbs.SysfsRoot, s.ctx.Name(), s.port)
}

// movedSince is what grew from before to after, traffic counters left out;
// nil when nothing did.
func (after counterSnapshot) movedSince(before counterSnapshot) map[string]uint64 {
	if before == nil || after == nil {
		return nil
	}
	var moved map[string]uint64
	for name, v := range after {
		if rdmasys.ClassifyCounter("", strings.TrimPrefix(name, "hw_")) == rdmasys.CounterTraffic {
			continue
		}
		if b, ok := before[name]; ok && v > b {
			if moved == nil {
				moved = map[string]uint64{}
			}
			moved[name] = v - b
		}
	}
	return moved
}

// checkPeerCounters bounds what a server reported.
func checkPeerCounters(m map[string]uint64) error {
	if len(m) > maxCounters {
		return fmt.Errorf("server reported %d port counters, at most %d are taken", len(m), maxCounters)
	}
	for name := range m {
		if len(name) == 0 || len(name) > maxCounterName {
			return fmt.Errorf("server reported a port counter with a %d-byte name", len(name))
		}
	}
	return nil
}

// retransmitCounters say that packets were lost and sent again: rxe's and
// mlx5's names.
var retransmitCounters = []string{"completer_retry_err", "rcvd_seq_err", "duplicate_request", "out_of_seq_request",
	"packet_seq_err", "out_of_sequence", "local_ack_timeout_err", "retry_exceeded_err"}

// lossNote says, after a failed measurement, which retransmission counters
// of this port moved meanwhile: "transport retry counter exceeded" alone
// does not tell a dead peer from a link that drops packets. Empty when
// none moved.
func lossNote(moved map[string]uint64) string {
	var parts []string
	for _, name := range retransmitCounters {
		if v := moved[name]; v > 0 {
			parts = append(parts, fmt.Sprintf("%s +%d", name, v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (meanwhile this port counted " + strings.Join(parts, ", ") + ": packets were lost and sent again)"
}
