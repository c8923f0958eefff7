package testport

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

func TestFreeOutsideEphemeral(t *testing.T) {
	lo, hi := ephemeral()
	seen := map[string]bool{}
	for range 200 {
		p := Free(t)
		n, err := strconv.Atoi(p)
		if err != nil || n < first || n > last || n >= lo && n <= hi {
			t.Fatalf("port %q: want %d-%d outside %d-%d", p, first, last, lo, hi)
		}
		if seen[p] {
			t.Fatalf("port %s given twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", ":"+p)
		if err != nil {
			t.Fatalf("port %s given but taken: %v", p, err)
		}
		l.Close()
	}
}

// Another test binary's locks, and a port something listens on, are
// passed over; a lock is free again once its test ends.
func TestFreeSkipsHeldPorts(t *testing.T) {
	lo, _ := ephemeral()
	start := first + 1000
	if start+10 >= lo {
		t.Skipf("ephemeral range from %d leaves too few ports", lo)
	}
	dir, err := lockDir()
	if err != nil {
		t.Fatal(err)
	}
	// Flock conflicts between open files, as between processes.
	for p := start; p < start+3; p++ {
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			t.Skipf("port %d held elsewhere: %v", p, err)
		}
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(start+3))
	if err != nil {
		t.Skipf("port %d: %v", start+3, err)
	}
	defer l.Close()
	var got string
	t.Run("take", func(t *testing.T) {
		mu.Lock()
		next = start
		mu.Unlock()
		got = Free(t)
		if want := strconv.Itoa(start + 4); got != want {
			t.Errorf("port %s, want %s past three locks and a listener", got, want)
		}
	})
	// The subtest has ended: its port's lock is free.
	f := hold(dir, start+4)
	if f == nil {
		t.Fatalf("port %s still locked after its test", got)
	}
	f.Close()
}
