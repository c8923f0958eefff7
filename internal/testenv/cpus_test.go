package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A second holder waits while the first holds, fails by its deadline
// naming the first, and gets the lock once the first lets go.
func TestLockCPUs(t *testing.T) {
	path := filepath.Join(t.TempDir(), cpuLockName)
	release, err := lockCPUs(path, "TestFirst", time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = lockCPUs(path, "TestSecond", time.Now().Add(200*time.Millisecond))
	if err == nil || !strings.Contains(err.Error(), "held by TestFirst (pid ") {
		t.Fatalf("second holder while the first holds: %v", err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("gave up after %v, before its deadline", waited)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		release()
	}()
	second, err := lockCPUs(path, "TestSecond", time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	second()
}

// A subtest of a holder goes on under its parent's hold instead of
// waiting for it, and the lock is free once the parent ends.
func TestHoldCPUsNested(t *testing.T) {
	t.Run("parent", func(t *testing.T) {
		HoldCPUs(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			t.Run("child", func(t *testing.T) { HoldCPUs(t) })
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the child waited for its parent's hold")
		}
	})
	release, err := lockCPUs(filepath.Join(os.TempDir(), cpuLockName), t.Name(), time.Now().Add(cpuWait))
	if err != nil {
		t.Fatalf("after the parent ended: %v", err)
	}
	release()
}
