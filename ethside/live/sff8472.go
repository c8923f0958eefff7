package live

import (
	"errors"
	"fmt"

	"github.com/rdmabench/rdmabench/ethside"
)

// SFF-8472 rev 12.4 offsets. A0h (image 0-255): identifier 0, vendor name
// 20-35, part number 40-55, serial 68-83, diagnostic monitoring type 92.
// A2h follows at image 256; its offsets below are within A2h.
const (
	a0Identifier = 0
	a0DiagType   = 92
	diagDDM      = 1 << 6 // byte 92 bit 6: digital diagnostics implemented
	diagExtCal   = 1 << 4 // byte 92 bit 4: externally calibrated
	a2Base       = 256

	a2TempThr  = 0  // 0-7: temperature thresholds
	a2VccThr   = 8  // 8-15
	a2BiasThr  = 16 // 16-23
	a2TxPwrThr = 24 // 24-31
	a2RxPwrThr = 32 // 32-39
	a2Temp     = 96 // 96-97 .. rx power 104-105
	a2Vcc      = 98
	a2Bias     = 100
	a2TxPwr    = 102
	a2RxPwr    = 104
	a2Alarms   = 112 // 112-113: alarm flags
	a2Warnings = 116 // 116-117: warning flags
)

var errExternalCal = errors.New("SFF-8472 diagnostics are externally calibrated: not decoded")

// decodeSFF8472 decodes an SFP's A0h identity and, when the module has
// them, A2h's internally calibrated diagnostics.
func decodeSFF8472(img []byte) (*ethside.Module, error) {
	if len(img) < a2Base {
		return nil, fmt.Errorf("SFF-8472 EEPROM of %d bytes, A0h needs 256", len(img))
	}
	m := &ethside.Module{Identifier: identifierName(img[a0Identifier]),
		Vendor: ascii(img, 20, 36), Part: ascii(img, 40, 56), Serial: ascii(img, 68, 84)}
	diag := img[a0DiagType]
	if diag&diagDDM == 0 || len(img) < 2*a2Base {
		return m, nil
	}
	if diag&diagExtCal != 0 {
		return m, errExternalCal
	}
	a2 := img[a2Base : 2*a2Base]
	t, v := tempC(a2, a2Temp), voltsV(a2, a2Vcc)
	m.TempC, m.VoltageV = &t, &v
	m.BiasMA = []float64{biasMA(a2, a2Bias)}
	m.TxPowerDBm = []float64{powerDBm(a2, a2TxPwr)}
	m.RxPowerDBm = []float64{powerDBm(a2, a2RxPwr)}
	setLimits(m, a2, limitsAt{temp: a2TempThr, vcc: a2VccThr, txPower: a2TxPwrThr, rxPower: a2RxPwrThr})
	m.Alarms = sff8472Flags(a2)
	return m, nil
}

// sff8472Flags: bytes 112/116 bits 7..0 are temperature high/low, Vcc
// high/low, bias high/low, tx power high/low; bytes 113/117 bits 7..6 rx
// power high/low. 112-113 are alarms, 116-117 the same bits as warnings.
func sff8472Flags(a2 []byte) []string {
	var on []string
	for _, kind := range []struct {
		off  int
		word string
	}{{a2Alarms, "alarm"}, {a2Warnings, "warning"}} {
		for _, f := range sff8472FlagBits {
			if a2[kind.off+f.byteOff]&f.mask != 0 {
				on = append(on, f.name+" "+kind.word)
			}
		}
	}
	return on
}

var sff8472FlagBits = []struct {
	byteOff int
	mask    byte
	name    string
}{
	{0, 0x80, "Module temperature high"}, {0, 0x40, "Module temperature low"},
	{0, 0x20, "Module voltage high"}, {0, 0x10, "Module voltage low"},
	{0, 0x08, "Laser bias current high"}, {0, 0x04, "Laser bias current low"},
	{0, 0x02, "Laser output power high"}, {0, 0x01, "Laser output power low"},
	{1, 0x80, "Laser rx power high"}, {1, 0x40, "Laser rx power low"},
}
