package doctor

import (
	"fmt"
	"slices"
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

// unusedLane: lane i reads no light while the module says no lane has
// lost its signal, so the module does not use it (a 4-lane CMIS module's
// channels 5-8). A dark lane without that word is judged as dark.
func unusedLane(m *ethside.Module, i int) bool {
	return m.NoRxLOS && i < len(m.RxPowerDBm) && m.RxPowerDBm[i] <= ethside.DarkDBm
}

func moduleReadings(m *ethside.Module) []reading {
	var rs []reading
	for i, v := range m.RxPowerDBm {
		if !unusedLane(m, i) {
			rs = append(rs, reading{fmt.Sprintf("rx power lane %d", i+1), v, "dBm", given(m.RxPower), &usualRxDBm})
		}
	}
	for i, v := range m.TxPowerDBm {
		if !unusedLane(m, i) || v > ethside.DarkDBm {
			rs = append(rs, reading{fmt.Sprintf("tx power lane %d", i+1), v, "dBm", given(m.TxPower), nil})
		}
	}
	if m.TempC != nil {
		rs = append(rs, reading{"temperature", *m.TempC, "°C", given(m.Temp), &usualTempC})
	}
	if m.VoltageV != nil {
		rs = append(rs, reading{"voltage", *m.VoltageV, "V", given(m.Voltage), &usualVolts})
	}
	return rs
}

// given drops limits whose high alarm is not above the low one: a module
// that does not monitor a reading fills its thresholds with zeros (an
// SFF-8636 QSFP+ prints "Laser output power high alarm threshold : 0.0000
// mW / -inf dBm"), which would hold every lane out of range.
func given(t ethside.Thresholds) ethside.Thresholds {
	if t.HighAlarm != nil && t.LowAlarm != nil && *t.HighAlarm <= *t.LowAlarm {
		return ethside.Thresholds{}
	}
	return t
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
	// A warning flag is the module's own WARN, an alarm flag its FAIL.
	alarms, warnings := splitFlags(m.Alarms)
	if len(alarms) > 0 {
		worst(Fail)
		bad = append(bad, "alarms on: "+strings.Join(alarms, "; "))
	}
	if len(warnings) > 0 {
		worst(Warn)
		bad = append(bad, "warnings on: "+strings.Join(warnings, "; "))
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

// splitFlags parts the module's flags that are on into alarms and warnings
// by ethtool's name for them ("... low alarm", "... high warning").
func splitFlags(flags []string) (alarms, warnings []string) {
	for _, f := range flags {
		if strings.Contains(strings.ToLower(f), "warning") {
			warnings = append(warnings, f)
		} else {
			alarms = append(alarms, f)
		}
	}
	return alarms, warnings
}

// opticsSummary is a healthy module's readings in brief.
func opticsSummary(m *ethside.Module) string {
	var parts []string
	var used []float64
	for i, v := range m.RxPowerDBm {
		if !unusedLane(m, i) {
			used = append(used, v)
		}
	}
	if len(used) > 0 {
		lo, hi := slices.Min(used), slices.Max(used)
		parts = append(parts, fmt.Sprintf("rx %.2f..%.2f dBm over %d lanes", lo, hi, len(used)))
	}
	if n := len(m.RxPowerDBm) - len(used); n > 0 {
		parts = append(parts, fmt.Sprintf("%d lanes unused (dark, no loss of signal)", n))
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
