package ethside

import "testing"

// Real drivers' counter names, each with what it counts: a rename of a
// kind or a pattern that swallows a neighbour fails a row.
func TestClassifyEthCounter(t *testing.T) {
	for _, c := range []struct {
		name string
		kind CounterKind
		prio int
	}{
		// mlx5 (ethtool -S; hw_counters)
		{"rx_crc_errors_phy", CounterLinkError, -1},
		{"rx_symbol_err_phy", CounterLinkError, -1},
		{"rx_pcs_symbol_err_phy", CounterLinkError, -1},
		{"rx_in_range_len_errors_phy", CounterLinkError, -1},
		{"rx_fec_uncorrectable_blocks_phy", CounterLinkError, -1},
		{"rx_corrected_bits_phy", CounterCorrectedBits, -1},
		{"rx_err_lane_0_phy", CounterOther, -1},
		{"rx_prio3_pause", CounterPause, 3},
		{"tx_prio3_pause", CounterPause, 3},
		{"rx_prio3_pause_duration", CounterOther, -1},
		{"rx_prio3_pause_transition", CounterOther, -1},
		{"rx_prio3_discards", CounterDiscard, 3},
		{"rx_prio5_buf_discard", CounterDiscard, 5},
		{"rx_prio3_bytes", CounterOther, -1},
		{"rx_prio8_pause", CounterOther, -1},
		{"rx_discards_phy", CounterDiscard, -1},
		{"rx_pause_ctrl_phy", CounterPause, -1},
		{"link_down_events_phy", CounterLinkDown, -1},
		{"out_of_buffer", CounterDiscard, -1},
		{"rx_out_of_buffer", CounterDiscard, -1},
		{"np_ecn_marked_roce_packets", CounterCongestion, -1},
		{"np_cnp_sent", CounterCongestion, -1},
		{"tx_pause_storm_error_events", CounterPause, -1},
		{"rx_packets_phy", CounterOther, -1},
		{"rx_bytes", CounterOther, -1},
		// bnxt_en
		{"rx_fcs_err_frames", CounterLinkError, -1},
		{"rx_pcs_symbol_err", CounterLinkError, -1},
		{"rx_corrected_bits", CounterCorrectedBits, -1},
		{"rx_fec_corrected_blocks", CounterOther, -1},
		{"rx_fec_uncorrectable_blocks", CounterLinkError, -1},
		{"rx_pfc_ena_frames_pri3", CounterPause, 3},
		{"rx_discard_packets_cos2", CounterDiscard, -1},
		{"rx_discard_bytes_cos2", CounterOther, -1},
		{"tx_pfc_ena_frames_pri3", CounterPause, 3},
		{"link_down_events", CounterLinkDown, -1},
		// be2net
		{"rx_crc_errors", CounterLinkError, -1},
		{"jabber_events", CounterLinkError, -1},
		{"tx_pauseframes", CounterPause, -1},
		{"rx_priority_pause_frames", CounterPause, -1},
		{"rx_in_range_errors", CounterOther, -1},
		{"rx_tcp_checksum_errs", CounterOther, -1},
		// ice
		{"rx_crc_errors.nic", CounterLinkError, -1},
		{"rx_priority_3_xoff.nic", CounterPause, 3},
		{"rx_priority_3_xon.nic", CounterOther, -1},
		{"tx_priority_3_xoff.nic", CounterPause, 3},
	} {
		got := ClassifyCounter(c.name)
		if got.Kind != c.kind || (c.kind != CounterOther && got.Prio != c.prio) {
			t.Errorf("%s: kind %d prio %d, want kind %d prio %d", c.name, got.Kind, got.Prio, c.kind, c.prio)
		}
	}
}
