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
