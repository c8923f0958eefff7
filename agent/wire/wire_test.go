package wire

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

func TestMessageRoundTrip(t *testing.T) {
	probe := Message{Kind: KindProbe, Clock: ClockCQE, Session: 0xdeadbeef, Seq: 1 << 40, SentNS: 123456789}
	for _, m := range []Message{probe, probe.Reply(17*time.Microsecond, ClockCPU)} {
		buf := make([]byte, 64)
		b, err := m.Marshal(buf)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != Size || &b[0] != &buf[0] {
			t.Fatalf("%d bytes, or not in the caller's buffer", len(b))
		}
		back, err := Unmarshal(b)
		if err != nil || back != m {
			t.Errorf("%+v came back as %+v, %v", m, back, err)
		}
	}
	if r := probe.Reply(time.Millisecond, ClockCQE); r.Seq != probe.Seq || r.Session != probe.Session || r.SentNS != probe.SentNS || r.Kind != KindReply {
		t.Errorf("reply %+v does not echo %+v", r, probe)
	}
}

func TestUnmarshalRefuses(t *testing.T) {
	good, _ := Message{Kind: KindReply, Clock: ClockCPU, Seq: 3, Hold: time.Microsecond}.Marshal(make([]byte, Size))
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"short", good[:Size-1], ErrLength},
		{"long", append(bytes.Clone(good), 0), ErrLength},
		{"empty", nil, ErrLength},
		{"magic", edit(func(b []byte) { b[0] = 'X' }), ErrMagic},
		{"version", edit(func(b []byte) { b[4] = 2 }), ErrVersion},
		{"kind", edit(func(b []byte) { b[5] = 9 }), ErrField},
		{"clock", edit(func(b []byte) { b[6] = 0 }), ErrField},
		{"reserved", edit(func(b []byte) { b[7] = 1 }), ErrField},
		{"hold over a minute", edit(func(b []byte) { binary.BigEndian.PutUint64(b[32:], uint64(2*time.Minute)) }), ErrField},
		{"hold as a negative", edit(func(b []byte) { binary.BigEndian.PutUint64(b[32:], 1<<63) }), ErrField},
		{"probe with a hold", edit(func(b []byte) { b[5] = byte(KindProbe) }), ErrField},
	}
	for _, c := range cases {
		if _, err := Unmarshal(c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := (Message{Kind: KindProbe, Clock: ClockCPU}).Marshal(make([]byte, Size-1)); !errors.Is(err, ErrLength) {
		t.Errorf("short buffer: %v", err)
	}
	if _, err := (Message{Kind: KindProbe}).Marshal(make([]byte, Size)); !errors.Is(err, ErrField) {
		t.Errorf("no clock: %v", err)
	}
}

func goodAddress() Address {
	return Address{Version: AddressVersion, Host: "n1", Dev: "mlx5_0", GID: net.ParseIP("::ffff:198.18.0.1").To16(), QPN: 0x1234, QKey: 0x11111111, Clock: ClockCQE}
}

func TestAddressRoundTrip(t *testing.T) {
	a := goodAddress()
	body, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"gid":"::ffff:198.18.0.1"`) || !strings.Contains(string(body), `"clock":"cqe"`) {
		t.Errorf("record %s", body)
	}
	back, err := ReadAddress(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if !back.GID.Equal(a.GID) || len(back.GID) != 16 || back.QPN != a.QPN || back.QKey != a.QKey || back.Clock != a.Clock || back.Host != a.Host || back.Dev != a.Dev {
		t.Errorf("%+v came back as %+v", a, back)
	}
}

func TestReadAddressRefuses(t *testing.T) {
	record := func(f func(a *Address)) string {
		a := goodAddress()
		f(&a)
		b, _ := a.MarshalJSON()
		return string(b)
	}
	cases := []struct{ name, in, want string }{
		{"too big", `{"host":"` + strings.Repeat("a", MaxAddressBytes) + `"}`, "address record over 2048 bytes"},
		{"unknown field", `{"version":1,"evil":1}`, `address record: json: unknown field "evil"`},
		{"trailing", record(func(*Address) {}) + `{}`, "address record: more after the record"},
		{"version", record(func(a *Address) { a.Version = 2 }), "address record version 2, this agent reads 1"},
		{"no GID", strings.Replace(record(func(*Address) {}), "::ffff:198.18.0.1", "nope", 1), "address record: GID of 0 bytes, want 16"},
		{"QP1", record(func(a *Address) { a.QPN = 1 }), "address record: QPN 0x1 outside 2..0xffffff"},
		{"QPN 25 bits", record(func(a *Address) { a.QPN = 1 << 24 }), "address record: QPN 0x1000000 outside 2..0xffffff"},
		{"privileged Q_Key", record(func(a *Address) { a.QKey = 0x80010000 }), "address record: Q_Key 0x80010000 is privileged"},
		{"clock", strings.Replace(record(func(*Address) {}), `"cqe"`, `"tsc"`, 1), `address record: clock "tsc": want cqe or cpu`},
		{"no host", record(func(a *Address) { a.Host = "" }), `address record: host "" or dev "mlx5_0" empty or too long`},
	}
	for _, c := range cases {
		_, err := ReadAddress(strings.NewReader(c.in))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func TestSourceGID(t *testing.T) {
	// An IPv4 header from 198.18.0.2 to 198.18.0.1, UDP (as rxe writes a
	// RoCE v2 datagram's), checksum filled in below.
	v4 := func(corrupt bool) []byte {
		h := make([]byte, GRHSize)
		ip := h[20:]
		copy(ip, []byte{0x45, 0, 0, 0x54, 0, 0, 0x40, 0, 0x40, 17, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1})
		binary.BigEndian.PutUint16(ip[10:], ipv4Checksum(ip))
		if corrupt {
			ip[15] ^= 1
		}
		return h
	}
	// rxe's, for a datagram to itself: the checksum 0 (the header as
	// captured on the rxe target).
	rxe, _ := hex.DecodeString("00000000000000000000000000000000000000004500005c5de1400040110000c6120001c6120001")
	var wantRXE [16]byte
	copy(wantRXE[10:], []byte{0xff, 0xff, 198, 18, 0, 1})
	v6 := make([]byte, GRHSize)
	v6[0] = 0x60
	for i := range 16 {
		v6[8+i] = byte(0xf0 + i)
	}
	var want4, want6 [16]byte
	copy(want4[10:], []byte{0xff, 0xff, 198, 18, 0, 2})
	for i := range 16 {
		want6[i] = byte(0xf0 + i)
	}
	for _, c := range []struct {
		name string
		h    []byte
		want [16]byte
		err  bool
	}{
		{"RoCE v2 over IPv4", v4(false), want4, false},
		{"IPv4 header with a bad checksum", v4(true), [16]byte{}, true},
		{"rxe's IPv4 header with the checksum 0", rxe, wantRXE, false},
		{"GRH", v6, want6, false},
		{"zeros", make([]byte, GRHSize), [16]byte{}, true},
		{"short", v6[:39], [16]byte{}, true},
	} {
		got, err := SourceGID(c.h)
		if (err != nil) != c.err || (!c.err && got != c.want) {
			t.Errorf("%s: got %x, %v; want %x, error %v", c.name, got, err, c.want, c.err)
		}
	}
}
