package doctor

import (
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// Pre-FEC bit error ratio limits. A link's FEC corrects bit errors until
// they outrun it; the corrected share says how much margin is left.
const (
	// berLimitNRZ: issue 49's figure for lanes of 25G and below (NRZ,
	// RS(528) or BASE-R FEC): a healthy NRZ link's raw BER is far lower,
	// and above 1e-8 the FEC is working hard for a link with little
	// margin left.
	berLimitNRZ = 1e-8
	// berLimitPAM4: IEEE 802.3's pre-FEC BER requirement for 50G-per-lane
	// PAM4 links with RS(544) (2.4e-4, as NVIDIA/Dell's ConnectX-6 Dx note
	// on rx_corrected_bits_phy quotes it); PAM4 links correct errors
	// constantly, so 1e-6 there is normal and no warning.
	berLimitPAM4 = 2.4e-4
)

// pam4Lanes says whether a link's lanes are PAM4 (50G a lane and more),
// and whether the speed and module tell it: 200G and up are PAM4;
// 25G and 40G are NRZ; 50G and 100G are either, and the module's form
// tells (QSFP28 carries 4×25G NRZ; QSFP56, QSFP-DD, OSFP, QSFP112 PAM4).
func pam4Lanes(speedMbps int, identifier string) (pam4, known bool) {
	switch {
	case speedMbps >= 200000:
		return true, true
	case speedMbps <= 40000:
		return false, true
	}
	id := strings.ToUpper(identifier)
	switch {
	case strings.Contains(id, "QSFP28") || strings.Contains(id, "SFP28"):
		return false, true
	case strings.Contains(id, "QSFP56") || strings.Contains(id, "QSFP-DD") ||
		strings.Contains(id, "OSFP") || strings.Contains(id, "QSFP112") || strings.Contains(id, "SFP56"):
		return true, true
	}
	return true, false
}

// judgeBER (eth.ber): corrected bits over the bits the link carried in
// the --watch interval: the margin left before errors reach the packets.
func judgeBER(p *ethPort) Finding {
	cs, ok := p.counts(func(c ethside.CounterClass) bool { return c.Kind == ethside.CounterCorrectedBits })
	switch {
	case !ok:
		return skipped("ethtool -S counters")
	case len(cs) == 0:
		return Finding{Status: Skip, Value: "no corrected-bits counter among the driver's", Source: p.counterSource()}
	case p.after == nil || p.watch <= 0:
		return Finding{Status: Skip, Value: "needs two readings apart: --watch", Source: p.counterSource()}
	}
	l := p.now.Link
	if l == nil || l.SpeedMbps <= 0 || (l.Up != nil && !*l.Up) {
		return Finding{Status: Skip, Value: "link speed unknown or link down", Source: p.counterSource()}
	}
	id := ""
	if p.now.Module != nil {
		id = p.now.Module.Identifier
	}
	pam4, known := pam4Lanes(l.SpeedMbps, id)
	limit, lanes := berLimitNRZ, "NRZ"
	if pam4 {
		limit, lanes = berLimitPAM4, "PAM4"
	}
	if !known {
		lanes = "PAM4 assumed: the lanes' modulation is not told"
	}
	bits := float64(l.SpeedMbps) * 1e6 * p.watch.Seconds()
	ber := float64(cs[0].grownBy) / bits
	f := Finding{Source: p.counterSource(),
		Value: fmt.Sprintf("pre-FEC BER %.1e over %s at %s (%s limit %.1e; %s +%d)", ber, p.watch, mbps(l.SpeedMbps), lanes, limit, cs[0].name, cs[0].grownBy)}
	f.Status = Pass
	if ber > limit {
		f.Status = Warn
		f.Remedy = "the FEC corrects many errors, with little margin before they reach the packets: clean the fibre ends, reseat or replace the transceiver/cable (eth.optics), and check the switch side's BER"
	}
	return f
}
