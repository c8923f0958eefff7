package rdmasys

import (
	"slices"
	"strings"
)

// CounterClass says what a port counter's growth means. One classifier
// for the engine (which leaves traffic out of a run's report) and doctor
// (which judges the errors).
type CounterClass int

const (
	// CounterOther: neither traffic nor an error (congestion marks,
	// waits, encapsulation counts): worth showing, nothing to fix.
	CounterOther CounterClass = iota
	// CounterTraffic counts work done; it moves in every run.
	CounterTraffic
	// CounterLink: the physical or link layer dropped or corrupted packets
	// (cable, transceiver, switch port); never normal.
	CounterLink
	// CounterTransport: the RDMA transport recovered or gave up
	// (retransmits, duplicates, timeouts, flushed work requests); it grows
	// under normal load after congestion drops and when jobs end.
	CounterTransport
)

// trafficCounters are the traffic counters of counters/ and of the
// drivers' hw_counters.
var trafficCounters = map[string]bool{
	"port_xmit_data": true, "port_rcv_data": true, "port_xmit_packets": true, "port_rcv_packets": true,
	"unicast_xmit_packets": true, "unicast_rcv_packets": true,
	"multicast_xmit_packets": true, "multicast_rcv_packets": true,
	"rcvd_pkts": true, "sent_pkts": true, "rdma_sends": true, "rdma_recvs": true, "ack_deferred": true,
	"rx_write_requests": true, "rx_read_requests": true, "rx_atomic_requests": true,
}

// pmaWidths are the widths of the IB PMA PortCounters error fields
// (ports/N/counters).
var pmaWidths = map[string]uint{
	"symbol_error": 16, "link_error_recovery": 8, "link_downed": 8, "port_rcv_errors": 16,
	"port_rcv_remote_physical_errors": 16, "port_rcv_switch_relay_errors": 16,
	"port_xmit_discards": 16, "port_xmit_constraint_errors": 8, "port_rcv_constraint_errors": 8,
	"local_link_integrity_errors": 4, "excessive_buffer_overrun_errors": 4, "VL15_dropped": 16,
}

// PMAWidth is the width in bits of a PMA error counter of counters/; a
// value at 2^width-1 is saturated (the counter stopped, the true count is
// higher).
func PMAWidth(name string) (uint, bool) {
	w, ok := pmaWidths[name]
	return w, ok
}

// hwLinkWords mark the link-layer counters among driver hw_counters (FEC,
// symbol and CRC errors, link down events, PHY discards).
var hwLinkWords = []string{"fec", "symbol", "icrc", "crc", "link", "phy"}

// hwErrorWords pick the trouble counters out of driver-specific hw_counters
// by a word of their name (mlx5: out_of_sequence, local_ack_timeout_err;
// rxe: rcvd_seq_err, retry_exceeded_err).
var hwErrorWords = []string{"err", "error", "errors", "discard", "discards", "drop", "dropped",
	"downed", "timeout", "retrans", "duplicate", "flush"}

// ClassifyCounter classifies the counter name of dir ("counters" or
// "hw_counters") of a port.
func ClassifyCounter(dir, name string) CounterClass {
	if trafficCounters[name] {
		return CounterTraffic
	}
	if dir == "counters" {
		if _, ok := pmaWidths[name]; ok {
			return CounterLink
		}
		return CounterOther
	}
	isErr := strings.HasPrefix(name, "out_of_")
	for _, w := range strings.Split(name, "_") {
		isErr = isErr || slices.Contains(hwErrorWords, w)
	}
	if !isErr {
		return CounterOther
	}
	for _, w := range hwLinkWords {
		if strings.Contains(strings.ToLower(name), w) {
			return CounterLink
		}
	}
	return CounterTransport
}
