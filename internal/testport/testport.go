// Package testport gives tests TCP ports for the servers they start later,
// in a child process or in a goroutine that listens once it is ready.
//
// A port from bind(":0") lies in the kernel's ephemeral range. Once the
// test has closed it, any process's next connect or bind(":0") may take it
// before the server listens: in CI a Slurm mesh's rank 0 found its
// --rendezvous port taken ("bind: address already in use"). The ports
// here lie outside ip_local_port_range, where the kernel never hands out
// a port by itself, and each is held under a lock file for as long as the
// test that took it runs, so that test binaries running side by side
// (go test ./...) never give out the same one.
package testport

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The ports handed out: above the agent test's fixed block (19100 to
// 20299) and the well-known ports the suites' servers use (perftest's
// 18515, Slurm's 6817 and 6818, the Pushgateway's 9091), up to the top;
// the kernel's ephemeral range is cut out of it.
const (
	first = 20500
	last  = 65535
)

var (
	mu   sync.Mutex
	next int // the next port to try; 0 before the first
)

// Free is a port, as a string for a command line, that nothing listens on
// now, that the kernel will not give to another socket by itself, and
// that no other test holding it through this package has.
func Free(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	lo, hi := ephemeral()
	dir, err := lockDir()
	if err != nil {
		t.Fatalf("testport: %v", err)
	}
	if next == 0 {
		// Test binaries side by side start apart, so that they seldom try
		// each other's locks.
		next = first + os.Getpid()*61%(last-first+1)
	}
	for range last - first + 1 {
		p := next
		next++
		if next > last {
			next = first
		}
		if p >= lo && p <= hi {
			continue
		}
		if f := hold(dir, p); f != nil {
			t.Cleanup(func() { f.Close() })
			return strconv.Itoa(p)
		}
	}
	t.Fatalf("testport: no free port in %d-%d outside the ephemeral range %d-%d", first, last, lo, hi)
	return ""
}

// Addr is 127.0.0.1 and a port from Free.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", Free(t))
}

// lockDir holds the ports' lock files, one directory a user.
func lockDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "rdmabench-test-ports-"+strconv.Itoa(os.Getuid()))
	return dir, os.MkdirAll(dir, 0o700)
}

// hold takes port p's lock and checks that nothing listens on it, or
// returns nil. The lock goes with the file's last descriptor, so a test
// binary that died leaves none behind.
func hold(dir string, p int) *os.File {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(p)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil
	}
	// On every address, as a rendezvous listens.
	l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
	if err != nil {
		f.Close()
		return nil
	}
	l.Close()
	return f
}

// ephemeral is the kernel's ip_local_port_range, Linux's default where it
// cannot be read.
func ephemeral() (lo, hi int) {
	lo, hi = 32768, 60999
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	var l, h int
	if n, _ := fmt.Sscan(strings.TrimSpace(string(b)), &l, &h); n == 2 && l <= h {
		return l, h
	}
	return lo, hi
}
