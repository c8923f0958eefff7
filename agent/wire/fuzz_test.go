package wire

import (
	"bytes"
	"testing"
)

// Any datagram is a message that writes back to the same bytes, or an
// error; never a panic.
func FuzzUnmarshal(f *testing.F) {
	good, _ := Message{Kind: KindProbe, Clock: ClockCQE, Seq: 7, SentNS: 99}.Marshal(make([]byte, Size))
	f.Add(good)
	f.Add(good[:10])
	f.Add(make([]byte, Size))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Unmarshal(b)
		if err != nil {
			return
		}
		back, err := m.Marshal(make([]byte, Size))
		if err != nil || !bytes.Equal(back, b) {
			t.Fatalf("%x read as %+v, written back as %x (%v)", b, m, back, err)
		}
	})
}

// Any HTTP body is a valid record or an error.
func FuzzReadAddress(f *testing.F) {
	b, _ := goodAddress().MarshalJSON()
	f.Add(b)
	f.Add([]byte(`{"gid":"::1"}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := ReadAddress(bytes.NewReader(in))
		if err != nil {
			return
		}
		if a.Validate() != nil || len(a.GID) != 16 {
			t.Fatalf("%q read as invalid %+v", in, a)
		}
	})
}
