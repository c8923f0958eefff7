package paste

import (
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// hcaChips are the `sensors` chip names of RoCE NICs' own hwmon.
var hcaChips = []string{"mlx5", "bnxt_en"}

// isHCAChip: a chip line has no "label: value" in it; its name may hold
// colons ("mlx5_0000:a2:00.0-virtual-0", some kernels' name of mlx5's).
func isHCAChip(line string) bool {
	for _, p := range hcaChips {
		if strings.HasPrefix(line, p) && !strings.Contains(line, ": ") {
			return true
		}
	}
	return false
}

// parseSensors reads lm-sensors' `sensors`: the first temperature of the
// first HCA chip block ("mlx5-pci-0100"), with its crit and high limits:
//
//	asic:         +52.0°C  (crit = +105.0°C, highest = +56.0°C)
func parseSensors(lines []string, src string, it *ethside.Iface) error {
	inChip := false
	for i, raw := range lines {
		line := strings.TrimSpace(raw)
		switch {
		case line == "":
			inChip = false
		case isHCAChip(line):
			inChip = true
		case inChip && strings.Contains(line, "C"):
			label, val, ok := keyValue(line)
			if !ok || label == "Adapter" {
				continue
			}
			c, ok := firstFloat(val)
			if !ok {
				return errorf(i+1, "%s %q is not a temperature", label, val)
			}
			s := &ethside.Sensor{Source: src, Label: label, C: c}
			s.CritC = limit(val, "crit =")
			s.MaxC = limit(val, "high =")
			it.HCATemp = s
			return nil
		}
	}
	return errorf(0, "no mlx5-pci-* (or bnxt_en) chip with a temperature in it")
}

// limit reads "+105.0°C" after "crit =" in "(crit = +105.0°C, ...)".
func limit(val, name string) *float64 {
	_, rest, ok := strings.Cut(val, name)
	if !ok {
		return nil
	}
	v, ok := firstFloat(rest)
	if !ok {
		return nil
	}
	return &v
}
