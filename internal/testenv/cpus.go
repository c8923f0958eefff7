package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuLockName is the lock file, in the temporary directory, that every
// test binary of this module takes for HoldCPUs: go test runs packages in
// parallel processes, so only a lock outside them can keep two such tests
// apart.
const cpuLockName = "rdmabench-test-cpus.lock"

// cpuWait bounds how long a test waits for the CPUs: longer than the
// longest holder (a 64-rank mesh, about a minute; a 256-rank one behind
// RDMABENCH_MESH_FABRIC_RANKS is not run beside others), shorter than go
// test's default 10-minute limit, so a stuck holder fails the waiter with
// its name instead of a timeout's stack dump.
const cpuWait = 8 * time.Minute

// HoldCPUs keeps this test from running at the same time as any other test
// that calls it, in this or another package's test binary, until the test
// ends. Two kinds call it: tests that load the host with many processes
// (64 mesh ranks, 128 joining processes), and tests whose verdicts read the
// host's scheduling (a straggler bar measured beside two CPU burners).
// Together on 2 CPUs the first kind starves the second past what it models:
// a healthy rank named late in 59 of 200 iterations, a CI run that failed
// while 64 mesh ranks ran in the package beside it.
//
// A test binary holds the lock once: a subtest of a holder, or a helper a
// holding test calls, goes on under its parent's hold (a second flock of
// the same file in one process would wait for itself).
func HoldCPUs(t testing.TB) {
	t.Helper()
	cpuHold.Lock()
	defer cpuHold.Unlock()
	if cpuHold.n == 0 {
		path := filepath.Join(os.TempDir(), cpuLockName)
		start := time.Now()
		release, err := lockCPUs(path, t.Name(), start.Add(cpuWait))
		if err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Logf("waited %v for the CPUs other tests held", waited.Round(time.Millisecond))
		}
		cpuHold.release = release
	}
	cpuHold.n++
	t.Cleanup(func() {
		cpuHold.Lock()
		defer cpuHold.Unlock()
		if cpuHold.n--; cpuHold.n == 0 {
			cpuHold.release()
		}
	})
}

// cpuHold counts this process's holders of the CPU lock.
var cpuHold struct {
	sync.Mutex
	n       int
	release func()
}

// lockCPUs takes an exclusive flock on path by deadline, writing holder
// into the file so that a waiter that gives up can name who held it. The
// lock goes with the process, so a holder that crashes frees it.
func lockCPUs(path, holder string, deadline time.Time) (release func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, fmt.Errorf("the tests' CPU lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			held, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("the CPUs other tests hold (%s) were not free by the deadline; held by %s", path, strings.TrimSpace(string(held)))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "%s (pid %d)\n", holder, os.Getpid())
	}
	return func() {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}
