package paste

import (
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// parseModule reads `ethtool -m IF` (SFF-8472, SFF-8636 and CMIS
// layouts): identity, per-lane powers and bias, temperature, voltage, the
// module's own thresholds and the alarm and warning flags that are On.
func parseModule(lines []string, src string, it *ethside.Iface) error {
	m := &ethside.Module{Source: src}
	var fe firstErr
	for i, raw := range lines {
		key, val, ok := keyValue(raw)
		if !ok || val == "" {
			continue
		}
		key = squash(key)
		if err := moduleLine(m, key, val); err != "" {
			fe.add(i+1, "%s: %s", key, err)
		}
	}
	if m.Identifier == "" && m.TempC == nil && len(m.RxPowerDBm) == 0 && fe.err == nil {
		return errorf(0, "no Identifier or readings: not `ethtool -m IF` output")
	}
	it.Module = m
	return fe.err
}

// moduleLine files one "key : value"; it returns why a reading that
// matters could not be read, or "".
func moduleLine(m *ethside.Module, key, val string) string {
	lower := strings.ToLower(key)
	switch {
	case key == "Identifier":
		m.Identifier = inParens(val)
	case key == "Vendor name":
		m.Vendor = val
	case key == "Vendor PN":
		m.Part = val
	case key == "Vendor SN":
		m.Serial = val
	case key == "Rx loss of signal":
		// CMIS: "None", or "[ Yes, No, ... ]" a lane.
		m.NoRxLOS = strings.EqualFold(val, "None")
	case strings.HasSuffix(lower, "threshold"):
		return moduleThreshold(m, lower, val)
	case strings.Contains(lower, "alarm") || strings.Contains(lower, "warning"):
		if strings.EqualFold(val, "On") {
			m.Alarms = append(m.Alarms, key)
		}
	default:
		return moduleReading(m, lower, val)
	}
	return ""
}

// moduleReading files a live reading: power and bias per lane, in the
// order ethtool prints the lanes.
func moduleReading(m *ethside.Module, lower, val string) string {
	switch {
	case isRxPower(lower):
		return appendPower(&m.RxPowerDBm, val)
	case isTxPower(lower):
		return appendPower(&m.TxPowerDBm, val)
	case strings.Contains(lower, "bias current"):
		v, ok := firstFloat(val)
		if !ok {
			return "bias " + quote(val) + " is not N mA"
		}
		m.BiasMA = append(m.BiasMA, v)
	case lower == "module temperature":
		v, ok := firstFloat(val)
		if !ok {
			return "temperature " + quote(val) + " is not N degrees C"
		}
		m.TempC = ptr(v)
	case lower == "module voltage":
		v, ok := firstFloat(val)
		if !ok {
			return "voltage " + quote(val) + " is not N V"
		}
		m.VoltageV = ptr(v)
	}
	return ""
}

func isRxPower(lower string) bool {
	return strings.Contains(lower, "rcvr signal") || strings.Contains(lower, "receiver signal") ||
		strings.HasPrefix(lower, "rx power") || strings.Contains(lower, "rx power (")
}

func isTxPower(lower string) bool {
	return strings.Contains(lower, "transmit avg optical power") || lower == "laser output power" ||
		strings.HasPrefix(lower, "tx power")
}

func appendPower(dst *[]float64, val string) string {
	v, ok := powerDBm(val)
	if !ok {
		return "power " + quote(val) + " is neither mW nor dBm"
	}
	*dst = append(*dst, v)
	return ""
}

// moduleThreshold files "Laser rx power low alarm threshold : 0.0741 mW /
// -11.30 dBm" and its kin; bias thresholds have no place in the model.
func moduleThreshold(m *ethside.Module, lower, val string) string {
	var t *ethside.Thresholds
	power := false
	switch {
	case strings.Contains(lower, "rx power"):
		t, power = &m.RxPower, true
	case strings.Contains(lower, "output power") || strings.Contains(lower, "tx power"):
		t, power = &m.TxPower, true
	case strings.Contains(lower, "temperature") && !strings.Contains(lower, "laser"):
		t = &m.Temp
	case strings.Contains(lower, "voltage"):
		t = &m.Voltage
	default:
		return ""
	}
	var v float64
	var ok bool
	if power {
		v, ok = powerDBm(val)
	} else {
		v, ok = firstFloat(val)
	}
	if !ok {
		return "threshold " + quote(val) + " is not a number"
	}
	setThreshold(t, lower, v)
	return ""
}

func setThreshold(t *ethside.Thresholds, lower string, v float64) {
	high := strings.Contains(lower, "high")
	alarm := strings.Contains(lower, "alarm")
	switch {
	case high && alarm:
		t.HighAlarm = ptr(v)
	case high:
		t.HighWarn = ptr(v)
	case alarm:
		t.LowAlarm = ptr(v)
	default:
		t.LowWarn = ptr(v)
	}
}

// inParens gives "QSFP28" of "0x11 (QSFP28)", or the value itself.
func inParens(val string) string {
	open, shut := strings.IndexByte(val, '('), strings.LastIndexByte(val, ')')
	if open < 0 || shut <= open {
		return val
	}
	return strings.TrimSpace(val[open+1 : shut])
}

func quote(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return "\"" + s + "\""
}
