package doctor

import "testing"

// Real drivers' counter names, each with what it counts: a rename of a
// kind or a pattern that swallows a neighbour fails a row.
func TestClassifyEthCounter(t *testing.T) {
	for _, c := range []struct {
		name string
		kind ethCounterKind
		prio int
	}{
		// mlx5 (ethtool -S; hw_counters)
		{"rx_crc_errors_phy", ethLinkError, -1},
		{"rx_symbol_err_phy", ethLinkError, -1},
		{"rx_pcs_symbol_err_phy", ethLinkError, -1},
		{"rx_in_range_len_errors_phy", ethLinkError, -1},
		{"rx_fec_uncorrectable_blocks_phy", ethLinkError, -1},
		{"rx_corrected_bits_phy", ethCorrectedBits, -1},
		{"rx_err_lane_0_phy", ethOther, -1},
		{"rx_prio3_pause", ethPause, 3},
		{"tx_prio3_pause", ethPause, 3},
		{"rx_prio3_pause_duration", ethOther, -1},
		{"rx_prio3_pause_transition", ethOther, -1},
		{"rx_prio3_discards", ethDiscard, 3},
		{"rx_prio5_buf_discard", ethDiscard, 5},
		{"rx_prio3_bytes", ethOther, -1},
		{"rx_prio8_pause", ethOther, -1},
		{"rx_discards_phy", ethDiscard, -1},
		{"rx_pause_ctrl_phy", ethPause, -1},
		{"link_down_events_phy", ethLinkDown, -1},
		{"out_of_buffer", ethDiscard, -1},
		{"rx_out_of_buffer", ethDiscard, -1},
		{"np_ecn_marked_roce_packets", ethCongestion, -1},
		{"np_cnp_sent", ethCongestion, -1},
		{"tx_pause_storm_error_events", ethPause, -1},
		{"rx_packets_phy", ethOther, -1},
		{"rx_bytes", ethOther, -1},
		// bnxt_en
		{"rx_fcs_err_frames", ethLinkError, -1},
		{"rx_pcs_symbol_err", ethLinkError, -1},
		{"rx_corrected_bits", ethCorrectedBits, -1},
		{"rx_fec_corrected_blocks", ethOther, -1},
		{"rx_fec_uncorrectable_blocks", ethLinkError, -1},
		{"rx_pfc_ena_frames_pri3", ethPause, 3},
		{"rx_discard_packets_cos2", ethDiscard, -1},
		{"rx_discard_bytes_cos2", ethOther, -1},
		{"tx_pfc_ena_frames_pri3", ethPause, 3},
		{"link_down_events", ethLinkDown, -1},
		// ice
		{"rx_crc_errors.nic", ethLinkError, -1},
		{"rx_priority_3_xoff.nic", ethPause, 3},
		{"rx_priority_3_xon.nic", ethOther, -1},
		{"tx_priority_3_xoff.nic", ethPause, 3},
	} {
		got := classifyEthCounter(c.name)
		if got.kind != c.kind || (c.kind != ethOther && got.prio != c.prio) {
			t.Errorf("%s: kind %d prio %d, want kind %d prio %d", c.name, got.kind, got.prio, c.kind, c.prio)
		}
	}
}
