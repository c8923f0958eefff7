package ethside

import (
	"strconv"
	"strings"
)

// CounterKind is what an Ethernet counter's name says it counts, across
// drivers' spellings (mlx5, bnxt_en, ice).
type CounterKind int

const (
	CounterOther         CounterKind = iota // traffic, and whatever is no fault
	CounterLinkError                        // CRC, symbol, uncorrectable FEC, PHY errors
	CounterCorrectedBits                    // bits the FEC corrected: the pre-FEC BER's numerator, no error
	CounterPause                            // pause frames (per priority, or global 802.3x)
	CounterDiscard                          // packets dropped for want of buffer
	CounterLinkDown                         // the link went down
	CounterCongestion                       // ECN marks and CNPs: congestion control at work
)

// CounterClass is one counter's classification; Prio is its 802.1p priority,
// -1 when it counts the whole port.
type CounterClass struct {
	Kind CounterKind
	Prio int
}

// exactCounters are names that need no pattern.
var exactCounters = map[string]CounterKind{
	// mlx5 (ethtool -S, physical port group)
	"rx_corrected_bits_phy": CounterCorrectedBits,
	"rx_discards_phy":       CounterDiscard,
	"tx_discards_phy":       CounterDiscard,
	"rx_pause_ctrl_phy":     CounterPause,
	"tx_pause_ctrl_phy":     CounterPause,
	"link_down_events_phy":  CounterLinkDown,
	"rx_fragments_phy":      CounterLinkError,
	"rx_jabbers_phy":        CounterLinkError,
	// mlx5 receive queues without a posted buffer (ethtool -S and the RDMA
	// hw_counters)
	"rx_out_of_buffer": CounterDiscard,
	"out_of_buffer":    CounterDiscard,
	// mlx5 hw_counters: DCQCN at work
	"np_ecn_marked_roce_packets": CounterCongestion,
	"np_cnp_sent":                CounterCongestion,
	"rp_cnp_handled":             CounterCongestion,
	// mlx5: the NIC stopped pausing for a receiver that does not drain
	"tx_pause_storm_warning_events": CounterPause,
	"tx_pause_storm_error_events":   CounterPause,
	// bnxt_en
	"rx_corrected_bits":   CounterCorrectedBits,
	"rx_fcs_err_frames":   CounterLinkError,
	"rx_align_err_frames": CounterLinkError,
	"rx_pcs_symbol_err":   CounterLinkError,
	"link_down_events":    CounterLinkDown,
	// be2net (Emulex OneConnect, RoCE-capable); rx_crc_errors is also the
	// e1000e/igb/ixgbe name. rx_in_range_errors (a length field that does
	// not match) is no wire error.
	"rx_crc_errors":              CounterLinkError,
	"rx_alignment_symbol_errors": CounterLinkError,
	"jabber_events":              CounterLinkError,
	"rx_pause_frames":            CounterPause,
	"tx_pauseframes":             CounterPause,
	"rx_priority_pause_frames":   CounterPause,
	"tx_priority_pauseframes":    CounterPause,
	// ice
	"rx_crc_errors.nic":     CounterLinkError,
	"illegal_bytes.nic":     CounterLinkError,
	"mac_local_faults.nic":  CounterLinkError,
	"mac_remote_faults.nic": CounterLinkError,
}

// ClassifyCounter says what a counter counts by its name alone, for
// doctor's judgements and the agent's series alike.
func ClassifyCounter(name string) CounterClass {
	if k, ok := exactCounters[name]; ok {
		return CounterClass{k, -1}
	}
	// Per-priority counters: mlx5 rx_prio3_pause, rx_prio3_discards;
	// bnxt_en rx_pfc_ena_frames_pri3; ice rx_priority_3_xoff.nic.
	for _, pat := range perPrioCounters {
		if p, ok := prioOf(name, pat.prefix, pat.suffix); ok {
			return CounterClass{pat.kind, p}
		}
	}
	switch {
	case strings.Contains(name, "uncorrectable"): // rx_fec_uncorrectable_blocks(_phy)
		return CounterClass{CounterLinkError, -1}
	case strings.HasPrefix(name, "rx_discard_packets_cos"):
		// bnxt_en: per class of service, which is no priority.
		return CounterClass{CounterDiscard, -1}
	case strings.HasPrefix(name, "rx_err_lane_"):
		// mlx5's per-lane bits in error: the FEC corrected them.
		return CounterClass{CounterOther, -1}
	case strings.HasSuffix(name, "_phy") && (strings.Contains(name, "_err")):
		// mlx5's rx_crc_errors_phy, rx_symbol_err_phy,
		// rx_pcs_symbol_err_phy, rx_in_range_len_errors_phy.
		return CounterClass{CounterLinkError, -1}
	}
	return CounterClass{CounterOther, -1}
}

var perPrioCounters = []struct {
	prefix, suffix string
	kind           CounterKind
}{
	{"rx_prio", "_pause", CounterPause}, {"tx_prio", "_pause", CounterPause},
	{"rx_prio", "_discards", CounterDiscard}, {"rx_prio", "_buf_discard", CounterDiscard},
	{"rx_prio", "_cong_discard", CounterDiscard},
	{"rx_prio", "_marked", CounterCongestion},
	{"rx_pfc_ena_frames_pri", "", CounterPause}, {"tx_pfc_ena_frames_pri", "", CounterPause},
	{"rx_priority_", "_xoff.nic", CounterPause}, {"tx_priority_", "_xoff.nic", CounterPause},
}

// prioOf reads the priority between prefix and suffix: "rx_prio3_pause".
func prioOf(name, prefix, suffix string) (int, bool) {
	mid, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return 0, false
	}
	if mid, ok = strings.CutSuffix(mid, suffix); !ok || len(mid) != 1 {
		return 0, false
	}
	p, err := strconv.Atoi(mid)
	return p, err == nil && p >= 0 && p <= 7
}

// String is the kind as the agent's series label it.
func (k CounterKind) String() string {
	switch k {
	case CounterLinkError:
		return "link_error"
	case CounterCorrectedBits:
		return "corrected_bits"
	case CounterPause:
		return "pause"
	case CounterDiscard:
		return "discard"
	case CounterLinkDown:
		return "link_down"
	case CounterCongestion:
		return "congestion"
	}
	return "other"
}
