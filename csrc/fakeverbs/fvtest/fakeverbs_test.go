// Package fvtest tests the zero-cost NIC (csrc/fakeverbs): it builds the
// libibverbs.so.1 stand-in with cc, checks that it exports every symbol,
// at its version, that perftest and the libraries perftest links import
// from libibverbs, runs the stand-in's own checks (fv-check: data lands,
// bad keys and addresses fail as completions, queue depths, CQ overrun,
// RNR, inline, the ibv_wr API, UD datagrams, a peer in another process),
// then Debian's perftest (ib_write_bw, ib_send_bw, ib_write_lat) and
// rdmabench (write-bw, send-bw with --verify, server and client and
// --loopback) on it, and
// (fabric_test.go) a fabric of named devices whose planted faults
// rdmabench measures.
// Without cc and rdma-core's headers, or without perftest, the tests that
// need them skip and say why.
package fvtest

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/fakebuild"
	"github.com/rdmabench/rdmabench/internal/leakcheck"
	"github.com/rdmabench/rdmabench/internal/testenv"
	"github.com/rdmabench/rdmabench/internal/testport"
)

// srcDir is csrc/fakeverbs, this package's parent.
var srcDir = func() string { d, _ := filepath.Abs(".."); return d }()

var (
	buildOnce sync.Once
	buildErr  error
)

// build compiles the stand-in (internal/testenv: once for the binary),
// fv-check and fv-bare beside it, once for the package.
func build(t *testing.T) string {
	t.Helper()
	dir := testenv.FakeVerbsDir(t)
	buildOnce.Do(func() {
		steps := [][]string{
			append(fakebuild.FakeVerbsCFlags(), "-o", filepath.Join(dir, "fv-check"), filepath.Join(srcDir, "check.c"), "-libverbs"),
			append(fakebuild.FakeVerbsCFlags(), "-o", filepath.Join(dir, "fv-bare"), filepath.Join(srcDir, "bare.c"), "-libverbs", "-lpthread"),
		}
		for _, args := range steps {
			if out, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("cc %s: %v\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return dir
}

func TestMain(m *testing.M) {
	code := leakcheck.Run(m)
	testenv.RemoveFakeVerbs()
	os.Exit(code)
}

// onFake runs a command on the stand-in (LD_LIBRARY_PATH, every symbol
// bound at start as perftest's BIND_NOW would).
func onFake(ctx context.Context, dir string, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir, "LD_BIND_NOW=1")
	return cmd
}

type symbol struct{ name, version string }

// exported is the stand-in's dynamic symbols with their versions.
func exported(t *testing.T, lib string) map[symbol]bool {
	f, err := elf.Open(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	out := map[symbol]bool{}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF {
			out[symbol{s.Name, s.Version}] = true
		}
	}
	return out
}

// libibverbsImports is what file imports from libibverbs.so.1.
func libibverbsImports(t *testing.T, file string) []symbol {
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	imps, err := f.ImportedSymbols()
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var out []symbol
	for _, s := range imps {
		if s.Library == "libibverbs.so.1" {
			out = append(out, symbol{s.Name, s.Version})
		}
	}
	return out
}

// neededLibs are the shared libraries file loads, resolved by ldd (on the
// real libibverbs: the stand-in must satisfy what they import from it).
func neededLibs(t *testing.T, file string) []string {
	out, err := exec.Command("ldd", file).Output()
	if err != nil {
		t.Skipf("ldd %s: %v", file, err)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/") && !strings.Contains(f[0], "libibverbs") {
			libs = append(libs, f[2])
		}
	}
	return libs
}

var perftests = []string{"ib_write_bw", "ib_send_bw", "ib_write_lat", "ib_read_bw", "ib_send_lat", "ib_read_lat", "ib_atomic_bw", "ib_atomic_lat"}

func TestExportsWhatPerftestImports(t *testing.T) {
	dir := build(t)
	ours := exported(t, filepath.Join(dir, "libibverbs.so.1"))
	if len(ours) < 140 {
		t.Fatalf("the stand-in exports %d symbols, want libibverbs's ~147", len(ours))
	}
	checked := 0
	seen := map[string]bool{}
	for _, name := range perftests {
		bin, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		files := append([]string{bin}, neededLibs(t, bin)...)
		for _, f := range files {
			if seen[f] {
				continue
			}
			seen[f] = true
			for _, s := range libibverbsImports(t, f) {
				checked++
				if !ours[s] {
					t.Errorf("%s imports %s@%s from libibverbs.so.1; the stand-in lacks it", f, s.name, s.version)
				}
			}
		}
		// The loader agrees: with every symbol bound at start, the
		// binary and all it links load on the stand-in (perftest's
		// --version prints its version and exits 1; a failed load
		// prints the loader's error instead and exits 127).
		if out, _ := onFake(context.Background(), dir, bin, "--version").CombinedOutput(); !strings.HasPrefix(string(out), "Version:") {
			t.Errorf("%s does not load on the stand-in:\n%s", name, out)
		}
	}
	if checked == 0 {
		t.Skip("perftest not installed (apt-get install perftest): nothing to check the exports against")
	}
	t.Logf("%d imports of %d files found in the stand-in", checked, len(seen))
}

func TestStandInChecks(t *testing.T) {
	dir := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := onFake(ctx, dir, filepath.Join(dir, "fv-check")).CombinedOutput()
	oks := 0
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "ok ") {
			oks++
		}
		if strings.HasPrefix(line, "FAIL") {
			t.Error(line)
		}
	}
	if err != nil || oks < 30 {
		t.Fatalf("fv-check: %v, %d checks passed (want 30 or more):\n%s", err, oks, out)
	}
}

// waitListen waits until something listens on port (a connection would
// be taken by perftest's server for its client).
func waitListen(t *testing.T, port string, srv *exec.Cmd, srvOut *bytes.Buffer) {
	hex := fmt.Sprintf(":%04X ", mustAtoi(port))
	for i := 0; i < 200; i++ {
		b, _ := os.ReadFile("/proc/net/tcp")
		b6, _ := os.ReadFile("/proc/net/tcp6")
		sc := bufio.NewScanner(bytes.NewReader(append(b, b6...)))
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) > 3 && strings.Contains(f[1]+" ", hex) && f[3] == "0A" {
				return
			}
		}
		if srv.ProcessState != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the server never listened on %s:\n%s", port, srvOut)
}

func mustAtoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// leftovers are the shared memory objects the stand-in left whose owner
// is one of pids (each object's third word is its owner).
func leftovers(pids map[int]bool) []string {
	var out []string
	ents, _ := os.ReadDir("/dev/shm")
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "fakeverbs-") {
			continue
		}
		b := make([]byte, 12)
		f, err := os.Open(filepath.Join("/dev/shm", e.Name()))
		if err != nil {
			continue
		}
		n, _ := f.Read(b)
		f.Close()
		if n == 12 && pids[int(int32(binary.LittleEndian.Uint32(b[8:])))] {
			out = append(out, e.Name())
		}
	}
	return out
}

var resultRow = regexp.MustCompile(`(?m)^\s*2\s+\d+\s+[\d.]+\s+[\d.]+\s+([\d.]+)`)

// pair runs a server and a client of one tool on the stand-in and returns
// the client's output.
func pair(t *testing.T, dir string, pids map[int]bool, server, client []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var srvOut bytes.Buffer
	srv := onFake(ctx, dir, server[0], server[1:]...)
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	pids[srv.Process.Pid] = true
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	port := ""
	for i, a := range server {
		if a == "-p" && i+1 < len(server) {
			port = server[i+1]
		}
	}
	waitListen(t, port, srv, &srvOut)
	cli := onFake(ctx, dir, client[0], client[1:]...)
	out, err := cli.CombinedOutput()
	if cli.Process != nil {
		pids[cli.Process.Pid] = true
	}
	if err != nil {
		t.Errorf("%s: %v\n%s", strings.Join(client, " "), err, out)
	}
	if err := <-done; err != nil {
		t.Errorf("%s: %v\n%s", strings.Join(server, " "), err, srvOut.String())
	}
	return string(out)
}

func TestPerftestRuns(t *testing.T) {
	dir := build(t)
	pids := map[int]bool{}
	for _, tc := range []struct {
		bin   string
		iters string
	}{{"ib_write_bw", "100000"}, {"ib_send_bw", "20000"}, {"ib_write_lat", "5000"}} {
		bin, err := exec.LookPath(tc.bin)
		if err != nil {
			t.Skipf("perftest not installed (apt-get install perftest): no %s", tc.bin)
		}
		t.Run(tc.bin, func(t *testing.T) {
			port := testport.Free(t)
			args := []string{bin, "-d", "fake0", "-s", "2", "-n", tc.iters, "-p", port}
			out := pair(t, dir, pids, args, append(append([]string{}, args...), "127.0.0.1"))
			m := resultRow.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("no result row for 2 bytes:\n%s", out)
			}
			if v, _ := strconv.ParseFloat(m[1], 64); !(v > 0) {
				t.Errorf("figure %s, want > 0:\n%s", m[1], out)
			}
		})
	}
	if l := leftovers(pids); len(l) > 0 {
		t.Errorf("objects left in /dev/shm after perftest exited: %v", l)
	}
}

// rdmabench's --verify checks every byte of every message where it lands:
// data really moves, between processes and within one.
func TestRdmabenchRuns(t *testing.T) {
	dir := build(t)
	bin := rdmabench(t, dir)
	pids := map[int]bool{}
	for _, test := range []string{"write-bw", "send-bw"} {
		t.Run(test+" loopback", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			c := onFake(ctx, dir, bin, test, "--loopback", "-d", "fake0", "--verify", "-s", "4096", "-n", "3000")
			out, err := c.CombinedOutput()
			if c.Process != nil {
				pids[c.Process.Pid] = true
			}
			if err != nil || !strings.Contains(string(out), "4096") {
				t.Fatalf("%v\n%s", err, out)
			}
		})
		t.Run(test+" server and client", func(t *testing.T) {
			port := testport.Free(t)
			out := pair(t, dir, pids,
				[]string{bin, "serve", "-d", "fake0", "-p", port, "--bind", "127.0.0.1", "--max-clients", "1"},
				[]string{bin, test, "-d", "fake0", "-p", port, "--verify", "-s", "4096", "-n", "3000", "127.0.0.1"})
			if !strings.Contains(out, "4096") {
				t.Errorf("no result row:\n%s", out)
			}
		})
	}
	if l := leftovers(pids); len(l) > 0 {
		t.Errorf("objects left in /dev/shm after rdmabench exited: %v", l)
	}
}

// The bare loop runs and gives a figure (make bench-overhead's limit).
func TestBareLoop(t *testing.T) {
	dir := build(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, op := range []string{"write", "send"} {
		out, err := onFake(ctx, dir, filepath.Join(dir, "fv-bare"), op, "2", "100000", "1", "20").CombinedOutput()
		f := strings.Fields(string(out))
		if err != nil || len(f) != 5 || f[0] != "bare" {
			t.Fatalf("fv-bare %s: %v\n%s", op, err, out)
		}
		if v, _ := strconv.ParseFloat(f[4], 64); !(v > 0) {
			t.Errorf("fv-bare %s: %s ns/msg", op, f[4])
		}
	}
}
