package live

import (
	"fmt"

	"github.com/rdmabench/rdmabench/ethside"
)

// SFF-8636 rev 2.10a offsets. Lower page 00h (image 0-127): identifier 0,
// status 2 (bit 2 Flat_mem: only upper page 00h), flags 6-14, monitors
// 22-57. Upper page 00h (image 128-255): vendor name 148-163, part number
// 168-183, serial 196-211. Upper page 03h, the thresholds, sits at image
// 384+b for its byte b (128-255): the ioctl's 640-byte layout puts pages
// 01h, 02h and 03h at 256, 384 and 512.
const (
	qStatus2   = 2
	qFlatMem   = 1 << 2
	qTempFlag  = 6  // bits 7..4: high alarm, low alarm, high warn, low warn
	qVccFlag   = 7  // same bits
	qRxPwrFlag = 9  // 9-10: a nibble per channel, channel 1 in 9's high nibble
	qBiasFlag  = 11 // 11-12
	qTxPwrFlag = 13 // 13-14
	qTemp      = 22
	qVcc       = 26
	qRxPwr     = 34 // 34-41, channels 1-4
	qBias      = 42 // 42-49
	qTxPwr     = 50 // 50-57
	qLanes     = 4

	qPage03    = 384 // image offset of page 03h byte 0
	qTempThr   = qPage03 + 128
	qVccThr    = qPage03 + 144
	qRxPwrThr  = qPage03 + 176
	qTxPwrThr  = qPage03 + 192
	qPage03End = qPage03 + 256
)

// decodeSFF8636 decodes a QSFP's identity, its per-lane monitors, flags
// and, when page 03h is in the image, its thresholds.
func decodeSFF8636(img []byte) (*ethside.Module, error) {
	if len(img) < 256 {
		return nil, fmt.Errorf("SFF-8636 EEPROM of %d bytes, pages 00h need 256", len(img))
	}
	m := &ethside.Module{Identifier: identifierName(img[0]),
		Vendor: ascii(img, 148, 164), Part: ascii(img, 168, 184), Serial: ascii(img, 196, 212)}
	t, v := tempC(img, qTemp), voltsV(img, qVcc)
	m.TempC, m.VoltageV = &t, &v
	for lane := range qLanes {
		m.RxPowerDBm = append(m.RxPowerDBm, powerDBm(img, qRxPwr+2*lane))
		m.TxPowerDBm = append(m.TxPowerDBm, powerDBm(img, qTxPwr+2*lane))
		m.BiasMA = append(m.BiasMA, biasMA(img, qBias+2*lane))
	}
	if img[qStatus2]&qFlatMem == 0 && len(img) >= qPage03End {
		setLimits(m, img, limitsAt{temp: qTempThr, vcc: qVccThr, txPower: qTxPwrThr, rxPower: qRxPwrThr})
	}
	m.Alarms = sff8636Flags(img)
	return m, nil
}

// sff8636Flags names the flags that are on, as ethtool -m does.
func sff8636Flags(img []byte) []string {
	var on []string
	module := func(off int, what string) {
		for i, name := range levels(what) {
			if img[off]&(0x80>>i) != 0 {
				on = append(on, name)
			}
		}
	}
	module(qTempFlag, "Module temperature")
	module(qVccFlag, "Module voltage")
	lanes := func(off int, what string) {
		for lane := range qLanes {
			b := img[off+lane/2]
			nibble := b >> 4 // channels 1 and 3: the high nibble
			if lane%2 == 1 {
				nibble = b & 0x0f
			}
			for i, name := range levels(what) {
				if nibble&(0x08>>i) != 0 {
					on = append(on, fmt.Sprintf("%s (Chan %d)", name, lane+1))
				}
			}
		}
	}
	lanes(qRxPwrFlag, "Laser rx power")
	lanes(qBiasFlag, "Laser bias current")
	lanes(qTxPwrFlag, "Laser tx power")
	return on
}
