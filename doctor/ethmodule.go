package doctor

import (
	"fmt"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// reading is one of a module's readings with the limits it is held to.
type reading struct {
	what     string // "rx power lane 2"
	value    float64
	unit     string
	limits   ethside.Thresholds
	fallback *[2]float64 // the usual range when the module gives no limits
}

// verdict holds a reading against the module's alarm and warning limits,
// or else the usual range (a WARN at most: a guess is no alarm).
func (r reading) verdict() (Status, string) {
	t := r.limits
	out := func(limit string, v float64) string {
		return fmt.Sprintf("%s %.2f %s (%s %.2f)", r.what, r.value, r.unit, limit, v)
	}
	switch {
	case t.HighAlarm != nil && r.value >= *t.HighAlarm:
		return Fail, out("high alarm", *t.HighAlarm)
	case t.LowAlarm != nil && r.value <= *t.LowAlarm:
		return Fail, out("low alarm", *t.LowAlarm)
	case t.HighWarn != nil && r.value >= *t.HighWarn:
		return Warn, out("high warning", *t.HighWarn)
	case t.LowWarn != nil && r.value <= *t.LowWarn:
		return Warn, out("low warning", *t.LowWarn)
	case t.HighAlarm != nil || t.LowAlarm != nil || t.HighWarn != nil || t.LowWarn != nil:
		return Pass, ""
	case r.fallback != nil && r.value < r.fallback[0]:
		return Warn, out("usual minimum", r.fallback[0])
	case r.fallback != nil && r.value > r.fallback[1]:
		return Warn, out("usual maximum", r.fallback[1])
	}
	return Pass, ""
}

// Usual ranges where the module gives no thresholds: receive power of
// 100G-class short-reach optics (-10..+3 dBm), the 0..70 °C of commercial
// modules, and 3.3 V ± 5%.
var (
	usualRxDBm = [2]float64{-10, 3}
	usualTempC = [2]float64{0, 70}
	usualVolts = [2]float64{3.135, 3.465}
)

func moduleReadings(m *ethside.Module) []reading {
	var rs []reading
	for i, v := range m.RxPowerDBm {
		rs = append(rs, reading{fmt.Sprintf("rx power lane %d", i+1), v, "dBm", m.RxPower, &usualRxDBm})
	}
	for i, v := range m.TxPowerDBm {
		rs = append(rs, reading{fmt.Sprintf("tx power lane %d", i+1), v, "dBm", m.TxPower, nil})
	}
	if m.TempC != nil {
		rs = append(rs, reading{"temperature", *m.TempC, "°C", m.Temp, &usualTempC})
	}
	if m.VoltageV != nil {
		rs = append(rs, reading{"voltage", *m.VoltageV, "V", m.Voltage, &usualVolts})
	}
	return rs
}

// judgeOptics (eth.optics): a transceiver past its own alarm limits, or
// raising its alarm flags, is failing or unplugged at the far end. With
// the link down, that is why the link is down: a WARN, as eth.link's, so
// that a spare port with a module and no fibre does not drain a node.
func judgeOptics(p *ethPort) Finding {
	m := p.now.Module
	if m == nil {
		return skipped("ethtool -m output")
	}
	f := Finding{Source: m.Source, Status: Pass}
	var bad []string
	worst := func(s Status) {
		if s == Fail || (s == Warn && f.Status != Fail) {
			f.Status = s
		}
	}
	for _, r := range moduleReadings(m) {
		if s, why := r.verdict(); s != Pass {
			worst(s)
			bad = append(bad, why)
		}
	}
	if len(m.Alarms) > 0 {
		worst(Fail)
		bad = append(bad, "alarms on: "+strings.Join(m.Alarms, "; "))
	}
	name := strings.TrimSpace(strings.Join([]string{m.Identifier, m.Vendor, m.Part, m.Serial}, " "))
	switch {
	case len(bad) > 0:
		f.Value = strings.Join(bad, "; ")
		f.Remedy = "clean the fibre ends and reseat the transceiver; if it stays out of range, replace it (" + orDefault(name, "the module") + ") or check the far end's"
	case len(moduleReadings(m)) == 0:
		f.Status, f.Value = Info, orDefault(name, "module")+": no diagnostics (a passive copper cable has none)"
		return f
	default:
		f.Value = orDefault(name, "module") + ": " + opticsSummary(m)
	}
	if down := p.now.Link; down != nil && down.Up != nil && !*down.Up && f.Status == Fail {
		f.Status = Warn
		f.Value += " (link down)"
	}
	return f
}

// opticsSummary is a healthy module's readings in brief.
func opticsSummary(m *ethside.Module) string {
	var parts []string
	if len(m.RxPowerDBm) > 0 {
		lo, hi := m.RxPowerDBm[0], m.RxPowerDBm[0]
		for _, v := range m.RxPowerDBm {
			lo, hi = min(lo, v), max(hi, v)
		}
		parts = append(parts, fmt.Sprintf("rx %.2f..%.2f dBm over %d lanes", lo, hi, len(m.RxPowerDBm)))
	}
	if m.TempC != nil {
		parts = append(parts, fmt.Sprintf("%.1f °C", *m.TempC))
	}
	return orDefault(strings.Join(parts, ", "), "readings within limits")
}

// judgeTemp (eth.temp): an HCA past its critical temperature throttles or
// shuts down; near it, airflow is short.
func judgeTemp(p *ethPort) Finding {
	s := p.now.HCATemp
	if s == nil {
		return skipped("HCA temperature (hwmon / sensors)")
	}
	f := Finding{Source: s.Source, Value: fmt.Sprintf("%.1f °C", s.C)}
	if s.Label != "" {
		f.Value = s.Label + " " + f.Value
	}
	warnAt, warnWhy := 0.0, ""
	switch {
	case s.MaxC != nil:
		warnAt, warnWhy = *s.MaxC, "max"
	case s.CritC != nil:
		warnAt, warnWhy = *s.CritC-10, "10 below crit"
	}
	remedy := "check the node's airflow and fans (a ConnectX needs its rated airflow); the HCA throttles or shuts its links down at its critical temperature"
	switch {
	case s.CritC != nil && s.C >= *s.CritC:
		f.Status, f.Remedy = Fail, remedy
		f.Value += fmt.Sprintf(", at or above crit %.0f °C", *s.CritC)
	case warnWhy != "" && s.C >= warnAt:
		f.Status, f.Remedy = Warn, remedy
		f.Value += fmt.Sprintf(", at or above %s %.0f °C", warnWhy, warnAt)
	case warnWhy == "":
		f.Status = Info
		f.Value += " (no limits shown)"
	default:
		f.Status = Pass
	}
	return f
}
