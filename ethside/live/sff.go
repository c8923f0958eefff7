package live

import (
	"encoding/binary"
	"math"
	"strings"

	"github.com/rdmabench/rdmabench/ethside"
)

// Units shared by SFF-8472 (section 9.2) and SFF-8636 (section 6.2.4):
// temperature a signed 16-bit in 1/256 °C, supply voltage 100 µV, laser
// bias 2 µA, optical power 0.1 µW; all big-endian.

func u16(img []byte, off int) uint16 { return binary.BigEndian.Uint16(img[off:]) }

func tempC(img []byte, off int) float64   { return float64(int16(u16(img, off))) / 256 }
func voltsV(img []byte, off int) float64  { return float64(u16(img, off)) / 10000 }
func biasMA(img []byte, off int) float64  { return float64(u16(img, off)) * 0.002 }
func powerMW(img []byte, off int) float64 { return float64(u16(img, off)) / 10000 }

// floorDBm stands for no light at all: 0 mW is -inf dBm, which JSON cannot
// carry, and -40 dBm is below any receiver's sensitivity.
const floorDBm = ethside.DarkDBm

func dBm(mw float64) float64 {
	if mw <= 0 {
		return floorDBm
	}
	return math.Max(10*math.Log10(mw), floorDBm)
}

func powerDBm(img []byte, off int) float64 { return dBm(powerMW(img, off)) }

// limitsAt says where a spec keeps the limits of each reading.
type limitsAt struct{ temp, vcc, txPower, rxPower int }

// setLimits reads the module's limits of its four readings.
func setLimits(m *ethside.Module, img []byte, at limitsAt) {
	m.Temp = thresholds(img, at.temp, tempC)
	m.Voltage = thresholds(img, at.vcc, voltsV)
	m.TxPower = thresholds(img, at.txPower, powerDBm)
	m.RxPower = thresholds(img, at.rxPower, powerDBm)
}

// thresholds reads the four limits both specs store in this order: high
// alarm, low alarm, high warning, low warning, each a 16-bit in the
// reading's own unit, converted by conv.
func thresholds(img []byte, off int, conv func([]byte, int) float64) ethside.Thresholds {
	v := func(i int) *float64 { x := conv(img, off+2*i); return &x }
	return ethside.Thresholds{HighAlarm: v(0), LowAlarm: v(1), HighWarn: v(2), LowWarn: v(3)}
}

// ascii is a space-padded text field of the EEPROM.
func ascii(img []byte, from, to int) string {
	b := make([]byte, 0, to-from)
	for _, c := range img[from:to] {
		if c >= 0x20 && c < 0x7f {
			b = append(b, c)
		}
	}
	return strings.TrimSpace(string(b))
}

// identifierName spells SFF-8024 table 4-1's identifier byte.
func identifierName(id byte) string {
	switch id {
	case 0x03:
		return "SFP"
	case 0x0c:
		return "QSFP"
	case 0x0d:
		return "QSFP+"
	case 0x11:
		return "QSFP28"
	case 0x18:
		return "QSFP-DD"
	case 0x19:
		return "OSFP"
	}
	return ""
}

// levels are the four flags of one reading, high alarm first, as bits
// 3..0 of a nibble (SFF-8636 per channel) or of a byte's half.
func levels(what string) [4]string {
	return [4]string{what + " high alarm", what + " low alarm",
		what + " high warning", what + " low warning"}
}
