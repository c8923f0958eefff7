package csrc

import (
	"testing"
	"time"
)

// The cycle counter must agree with CLOCK_MONOTONIC: a loop's samples are
// converted with this factor.
func TestCalibrateAgreesWithMonotonic(t *testing.T) {
	npc := Calibrate()
	if npc <= 0 {
		t.Fatalf("ns per cycle %v", npc)
	}
	c0, n0 := cycles(), Now()
	time.Sleep(50 * time.Millisecond)
	c1, n1 := cycles(), Now()
	got := time.Duration(float64(c1-c0) * npc)
	want := n1 - n0
	if diff := got - want; diff < -want/100 || diff > want/100 {
		t.Errorf("counter says %v, CLOCK_MONOTONIC %v", got, want)
	}
}

func TestPatternDetectsCorruption(t *testing.T) {
	buf := make([]byte, 4096)
	Pattern(buf, 7, 42)
	if bad := PatternCheck(buf, 7, 42); bad != 0 {
		t.Fatalf("fresh pattern has %d bad bytes", bad)
	}
	if bad := PatternCheck(buf, 7, 43); bad < 4000 {
		t.Errorf("message 43's pattern matched message 42's in all but %d bytes", bad)
	}
	buf[100] ^= 0xff
	buf[4095] ^= 1
	if bad := PatternCheck(buf, 7, 42); bad != 2 {
		t.Errorf("2 flipped bytes counted as %d", bad)
	}
}
