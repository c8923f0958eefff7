package live

import (
	"encoding/binary"
	"math"
	"reflect"
	"testing"
)

// put16 writes a big-endian 16-bit field as the specs store them.
func put16(img []byte, off int, v uint16) { binary.BigEndian.PutUint16(img[off:], v) }

// sfpImage builds an SFF-8472 A0h+A2h image: identity in A0h, internally
// calibrated DDM (byte 92 = 0x60: DDM implemented, internal calibration),
// readings and thresholds in A2h (image offset 256 + A2h offset).
func sfpImage(diagType byte) []byte {
	img := make([]byte, 512)
	img[0] = 0x03 // SFF-8024: SFP/SFP+
	copy(img[20:36], "ACME OPTICS     ")
	copy(img[40:56], "SFP-25G-SR      ")
	copy(img[68:84], "SN12345         ")
	img[92] = diagType
	a2 := img[256:]
	put16(a2, 0, 80*256)         // temp high alarm 80 C
	put16(a2, 2, uint16(0xfb00)) // temp low alarm -5 C (int16 -1280)
	put16(a2, 32, 20000)         // rx power high alarm 2 mW (0.1 uW units)
	put16(a2, 34, 100)           // rx power low alarm 0.01 mW = -20 dBm
	put16(a2, 96, 0x2880)        // 40.5 C
	put16(a2, 98, 33000)         // 3.3 V (100 uV units)
	put16(a2, 100, 3000)         // 6 mA (2 uA units)
	put16(a2, 102, 10000)        // tx 1 mW = 0 dBm
	put16(a2, 104, 0)            // rx dark: the floor
	a2[112] = 0x80               // temperature high alarm
	a2[117] = 0x40               // rx power low warning
	return img
}

func TestDecodeSFF8472(t *testing.T) {
	m, err := decodeSFF8472(sfpImage(0x60))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"identifier", m.Identifier, "SFP"},
		{"vendor", m.Vendor, "ACME OPTICS"},
		{"part", m.Part, "SFP-25G-SR"},
		{"serial", m.Serial, "SN12345"},
		{"temp", *m.TempC, 40.5},
		{"voltage", *m.VoltageV, 3.3},
		{"bias", m.BiasMA, []float64{6}},
		{"tx dBm", m.TxPowerDBm, []float64{0}},
		{"rx dBm", m.RxPowerDBm, []float64{floorDBm}},
		{"temp high alarm", *m.Temp.HighAlarm, 80.0},
		{"temp low alarm", *m.Temp.LowAlarm, -5.0},
		{"rx high alarm dBm", math.Round(*m.RxPower.HighAlarm*1000) / 1000, 3.01},
		{"rx low alarm dBm", *m.RxPower.LowAlarm, -20.0},
		{"alarms", m.Alarms, []string{"Module temperature high alarm", "Laser rx power low warning"}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestDecodeSFF8472WithoutDiagnostics(t *testing.T) {
	for _, c := range []struct {
		name    string
		img     []byte
		wantErr bool
	}{
		{"no DDM", sfpImage(0x00), false},
		{"external calibration", sfpImage(0x50), true},
		{"A0h only", sfpImage(0x60)[:256], false},
	} {
		m, err := decodeSFF8472(c.img)
		if (err != nil) != c.wantErr || m == nil || m.Vendor != "ACME OPTICS" {
			t.Errorf("%s: module %+v err %v; want identity kept, err %v", c.name, m, err, c.wantErr)
			continue
		}
		if m.TempC != nil || m.RxPowerDBm != nil {
			t.Errorf("%s: readings %v %v decoded without internal DDM", c.name, m.TempC, m.RxPowerDBm)
		}
	}
}

// qsfpImage builds an SFF-8636 image in the ioctl's 640-byte layout:
// lower page 00h, upper 00h at 128, page 03h at 384 (thresholds at 384+b).
func qsfpImage(n int, status2 byte) []byte {
	img := make([]byte, 640)
	img[0] = 0x11 // QSFP28
	img[2] = status2
	img[6] = 0x20  // temperature high warning
	img[9] = 0x04  // channel 2 rx power low alarm (low nibble bit 2)
	img[14] = 0x80 // channel 3 tx power high alarm (high nibble bit 7)
	put16(img, 22, 30*256)
	put16(img, 26, 32500)
	for lane, mw := range []uint16{10000, 5012, 0, 25119} { // 0, ~-3, floor, ~+4 dBm
		put16(img, 34+2*lane, mw)
		put16(img, 50+2*lane, 10000)
		put16(img, 42+2*lane, uint16(3500+lane))
	}
	copy(img[148:164], "MELLANOX        ")
	copy(img[168:184], "MMA1B00-C100D   ")
	copy(img[196:212], "MT2000XX00001   ")
	put16(img, 384+128, 75*256) // page 03h byte 128: temperature high alarm
	put16(img, 384+176, 34674)  // byte 176: rx power high alarm, 3.4674 mW
	put16(img, 384+182, 363)    // byte 182: rx power low warning
	return img[:n]
}

func TestDecodeSFF8636(t *testing.T) {
	m, err := decodeSFF8636(qsfpImage(640, 0))
	if err != nil {
		t.Fatal(err)
	}
	rx := make([]float64, len(m.RxPowerDBm))
	for i, v := range m.RxPowerDBm {
		rx[i] = math.Round(v*10) / 10
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"identifier", m.Identifier, "QSFP28"},
		{"vendor/part/serial", m.Vendor + "|" + m.Part + "|" + m.Serial, "MELLANOX|MMA1B00-C100D|MT2000XX00001"},
		{"temp", *m.TempC, 30.0},
		{"voltage", *m.VoltageV, 3.25},
		{"rx dBm", rx, []float64{0, -3, floorDBm, 4}},
		{"tx dBm", m.TxPowerDBm, []float64{0, 0, 0, 0}},
		{"bias lane 4", m.BiasMA[3], 7.006},
		{"temp high alarm", *m.Temp.HighAlarm, 75.0},
		{"rx high alarm", math.Round(*m.RxPower.HighAlarm*10) / 10, 5.4},
		{"rx low warn", math.Round(*m.RxPower.LowWarn*10) / 10, -14.4},
		{"alarms", m.Alarms, []string{"Module temperature high warning",
			"Laser rx power low alarm (Chan 2)", "Laser tx power high alarm (Chan 3)"}},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestDecodeSFF8636Thresholds(t *testing.T) {
	for _, c := range []struct {
		name string
		img  []byte
		want bool
	}{
		{"paged, 640 bytes", qsfpImage(640, 0), true},
		{"flat memory", qsfpImage(640, 0x04), false},
		{"pages 00h only", qsfpImage(256, 0), false},
	} {
		m, err := decodeSFF8636(c.img)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := m.Temp.HighAlarm != nil; got != c.want {
			t.Errorf("%s: thresholds decoded %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDecodeModuleHostile: short and odd images give an error or a module,
// never a panic.
func TestDecodeModuleHostile(t *testing.T) {
	for _, typ := range []uint32{modSFF8079, modSFF8472, modSFF8636, modSFF8436, 0x7f} {
		for _, n := range []int{0, 1, 127, 255, 256, 257, 511, 512, 639, 640} {
			img := make([]byte, n)
			for i := range img {
				img[i] = 0xff
			}
			m, err := decodeModule(typ, img)
			if m == nil && err == nil {
				t.Errorf("type %#x, %d bytes: neither module nor error", typ, n)
			}
		}
	}
}
