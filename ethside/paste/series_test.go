package paste

import (
	"path/filepath"
	"testing"
)

// A Series gives its directories in turn, then the last again: the real
// before/after pair of one mlx5 port (testdata/watchprio, byteps#179).
func TestSeriesReadsInTurn(t *testing.T) {
	dir := filepath.Join("testdata", "watchprio")
	s := &Series{Dirs: []string{dir, filepath.Join(dir, "later")}}
	for i, want := range []uint64{88034564921216, 88171136852706, 88171136852706} {
		got, err := s.Read()
		if err != nil {
			t.Fatalf("read %d: %v", i+1, err)
		}
		if len(got) != 1 || got[0].Name != "enp178s0f0" || got[0].Counters == nil {
			t.Fatalf("read %d: %+v", i+1, got)
		}
		if v := got[0].Counters.Values["rx_prio0_bytes"]; v != want {
			t.Errorf("read %d: rx_prio0_bytes %d, want %d", i+1, v, want)
		}
	}
	if !s.Saved() {
		t.Error("a series of pastes is saved outputs")
	}
	if _, err := (&Series{Dirs: []string{filepath.Join(dir, "nope")}}).Read(); err == nil {
		t.Error("a missing directory read without error")
	}
}
