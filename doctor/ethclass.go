package doctor

import (
	"strconv"
	"strings"
)

// ethCounterKind is what an Ethernet counter's name says it counts, across
// drivers' spellings (mlx5, bnxt_en, ice).
type ethCounterKind int

const (
	ethOther         ethCounterKind = iota // traffic, and whatever is no fault
	ethLinkError                           // CRC, symbol, uncorrectable FEC, PHY errors
	ethCorrectedBits                       // bits the FEC corrected: the pre-FEC BER's numerator, no error
	ethPause                               // pause frames (per priority, or global 802.3x)
	ethDiscard                             // packets dropped for want of buffer
	ethLinkDown                            // the link went down
	ethCongestion                          // ECN marks and CNPs: congestion control at work
)

// ethCounter is one counter's classification; prio is its 802.1p priority,
// -1 when it counts the whole port.
type ethCounter struct {
	kind ethCounterKind
	prio int
}

// exactEthCounters are names that need no pattern.
var exactEthCounters = map[string]ethCounterKind{
	// mlx5 (ethtool -S, physical port group)
	"rx_corrected_bits_phy": ethCorrectedBits,
	"rx_discards_phy":       ethDiscard,
	"tx_discards_phy":       ethDiscard,
	"rx_pause_ctrl_phy":     ethPause,
	"tx_pause_ctrl_phy":     ethPause,
	"link_down_events_phy":  ethLinkDown,
	"rx_fragments_phy":      ethLinkError,
	"rx_jabbers_phy":        ethLinkError,
	// mlx5 receive queues without a posted buffer (ethtool -S and the RDMA
	// hw_counters)
	"rx_out_of_buffer": ethDiscard,
	"out_of_buffer":    ethDiscard,
	// mlx5 hw_counters: DCQCN at work
	"np_ecn_marked_roce_packets": ethCongestion,
	"np_cnp_sent":                ethCongestion,
	"rp_cnp_handled":             ethCongestion,
	// mlx5: the NIC stopped pausing for a receiver that does not drain
	"tx_pause_storm_warning_events": ethPause,
	"tx_pause_storm_error_events":   ethPause,
	// bnxt_en
	"rx_corrected_bits":   ethCorrectedBits,
	"rx_fcs_err_frames":   ethLinkError,
	"rx_align_err_frames": ethLinkError,
	"rx_pcs_symbol_err":   ethLinkError,
	"link_down_events":    ethLinkDown,
	// ice
	"rx_crc_errors.nic":     ethLinkError,
	"illegal_bytes.nic":     ethLinkError,
	"mac_local_faults.nic":  ethLinkError,
	"mac_remote_faults.nic": ethLinkError,
}

// classifyEthCounter says what a counter counts by its name alone.
func classifyEthCounter(name string) ethCounter {
	if k, ok := exactEthCounters[name]; ok {
		return ethCounter{k, -1}
	}
	// Per-priority counters: mlx5 rx_prio3_pause, rx_prio3_discards;
	// bnxt_en rx_pfc_ena_frames_pri3; ice rx_priority_3_xoff.nic.
	for _, pat := range perPrioCounters {
		if p, ok := prioOf(name, pat.prefix, pat.suffix); ok {
			return ethCounter{pat.kind, p}
		}
	}
	switch {
	case strings.Contains(name, "uncorrectable"): // rx_fec_uncorrectable_blocks(_phy)
		return ethCounter{ethLinkError, -1}
	case strings.HasPrefix(name, "rx_discard_packets_cos"):
		// bnxt_en: per class of service, which is no priority.
		return ethCounter{ethDiscard, -1}
	case strings.HasPrefix(name, "rx_err_lane_"):
		// mlx5's per-lane bits in error: the FEC corrected them.
		return ethCounter{ethOther, -1}
	case strings.HasSuffix(name, "_phy") && (strings.Contains(name, "_err")):
		// mlx5's rx_crc_errors_phy, rx_symbol_err_phy,
		// rx_pcs_symbol_err_phy, rx_in_range_len_errors_phy.
		return ethCounter{ethLinkError, -1}
	}
	return ethCounter{ethOther, -1}
}

var perPrioCounters = []struct {
	prefix, suffix string
	kind           ethCounterKind
}{
	{"rx_prio", "_pause", ethPause}, {"tx_prio", "_pause", ethPause},
	{"rx_prio", "_discards", ethDiscard}, {"rx_prio", "_buf_discard", ethDiscard},
	{"rx_prio", "_cong_discard", ethDiscard},
	{"rx_prio", "_marked", ethCongestion},
	{"rx_pfc_ena_frames_pri", "", ethPause}, {"tx_pfc_ena_frames_pri", "", ethPause},
	{"rx_priority_", "_xoff.nic", ethPause}, {"tx_priority_", "_xoff.nic", ethPause},
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
