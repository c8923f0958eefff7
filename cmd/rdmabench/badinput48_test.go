package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/badinput"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/publish"
	"github.com/rdmabench/rdmabench/verbs"
)

// oneLine48: exit wantCode and stderr exactly one line containing want,
// as a bad-input row is judged (badinput.Row.Check).
func oneLine48(t *testing.T, what string, code, wantCode int, errOut, want string) {
	t.Helper()
	if msg := (badinput.Row{Code: wantCode, Want: want}).Check(code, "", errOut); msg != "" {
		t.Errorf("%s: %s; stderr %q", what, msg, errOut)
	}
}

// Bad flags of the run commands are refused before the device is opened
// (so whatever RDMA this host has): -D with -n (perftest refuses it too),
// a host list as the server, and outputs that cannot be written, checked
// before a --repeat 3 -a run measures everything and then loses it.
func TestRunRefusesBeforeMeasuring(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"write-bw", "--loopback", "-D", "2", "-n", "10"}, "-D and -n exclude each other"},
		{[]string{"send-lat", "-D", "1", "-n", "5", "127.0.0.1"}, "-D and -n exclude each other"},
		{[]string{"write-bw", "node1,node2"}, `"node1,node2": the server is one host`},
		{[]string{"write-bw", "node[1-2]"}, `"node[1-2]": the server is one host`},
		{[]string{"write-bw", "--loopback", "--repeat", "3", "-a", "--save", "/nonexistent/x.json"}, "--save /nonexistent/x.json: directory /nonexistent does not exist"},
		{[]string{"write-bw", "--loopback", "--metrics", t.TempDir()}, "is a directory"},
		{[]string{"write-lat", "--loopback", "-a", "--hgrm", "/nonexistent/lat.hgrm"}, "--hgrm /nonexistent/lat.hgrm: directory /nonexistent does not exist"},
		{[]string{"write-lat", "--loopback", "--raw", "/nonexistent/raw.csv"}, "--raw /nonexistent/raw.csv"},
	} {
		code, _, errOut := run(tc.args...)
		oneLine48(t, strings.Join(tc.args, " "), code, exitcode.BadInput, errOut, tc.want)
	}
	// An IPv6 address in brackets is one host.
	if isHostList("[fe80::1]") || !isHostList("a,b") || !isHostList("gpu[01-04]") {
		t.Error("isHostList")
	}
}

// serve checks its device at start, as perftest does, instead of
// listening forever and telling only the first client that arrives.
func TestServeChecksDeviceAtStart(t *testing.T) {
	names, lerr := verbs.DeviceNames()
	want, wantCode := "-d no_such_dev0: no such RDMA device (devices: ", exitcode.BadInput
	switch {
	case errors.Is(lerr, verbs.ErrNoRDMA):
		want, wantCode = "no RDMA in this kernel", exitcode.NotMeasured
	case len(names) == 0:
		want, wantCode = "no RDMA devices found", exitcode.NotMeasured
	}
	port := testport.Free(t)
	done := make(chan [2]string, 1)
	go func() {
		code, out, errOut := run("serve", "-p", port, "-d", "no_such_dev0", "--max-clients", "1")
		done <- [2]string{fmt.Sprint(code), out + "\x00" + errOut}
	}()
	select {
	case r := <-done:
		out, errOut, _ := strings.Cut(r[1], "\x00")
		oneLine48(t, "serve -d no_such_dev0", atoi(r[0]), wantCode, errOut, want)
		if out != "" {
			t.Errorf("stdout %q: it listened", out)
		}
	case <-time.After(10 * time.Second):
		// Let the listening server go: a client takes its one turn.
		if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port)); err == nil {
			c.Close()
		}
		t.Fatal("serve -d no_such_dev0 still running after 10 s: it listens without its device")
	}
	if wantCode == exitcode.BadInput {
		for _, tc := range [][]string{{"-i", "9"}, {"-x", "200"}} {
			code, _, errOut := run(append([]string{"serve", "-p", port, "--max-clients", "1"}, tc...)...)
			oneLine48(t, "serve "+strings.Join(tc, " "), code, exitcode.BadInput, errOut, tc[0][1:])
		}
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// A kernel without RDMA is one line that says what to do, and exit 3, from
// every command that lists devices. Runs only where the kernel has none
// (this host without the fake NIC); verbs' own test covers the error.
func TestNoRDMAInKernel(t *testing.T) {
	if _, err := verbs.DeviceNames(); !errors.Is(err, verbs.ErrNoRDMA) {
		t.Skipf("the kernel has RDMA here (%v)", err)
	}
	for _, args := range [][]string{
		{"write-bw", "--loopback", "-n", "5"},
		{"send-lat", "127.0.0.1", "-p", "1"},
		{"devices"},
	} {
		code, _, errOut := run(args...)
		oneLine48(t, strings.Join(args, " "), code, exitcode.NotMeasured, errOut,
			"no RDMA in this kernel (ibv_get_device_list: errno 38): load the RDMA modules (rdma_rxe/mlx5_ib) or run on the rxe target (docs/rxe.md)")
	}
}

// Run commands' exit codes: 3 when nothing could be measured (no RDMA, a
// server that does not answer or refuses us at connect), 1 for a run that
// failed part way, 130 on Ctrl-C, 2 for an output that cannot be written.
func TestRunExitCode(t *testing.T) {
	_, dialErr := net.Dial("tcp", "127.0.0.1:1")
	for _, tc := range []struct {
		err      error
		measured bool
		want     int
	}{
		{fmt.Errorf("connect to server 127.0.0.1:1: %w", dialErr), false, exitcode.NotMeasured},
		{errors.New("handshake with 127.0.0.1:1: the server refused our token"), false, exitcode.NotMeasured},
		{fmt.Errorf("list: %w", verbs.ErrNoRDMA), false, exitcode.NotMeasured},
		{errors.New("send-lat: completion error: transport retry counter exceeded"), true, exitcode.Findings},
		{fmt.Errorf("%w after 2 of 5 measurements", engine.ErrInterrupted), true, exitcode.Interrupted},
		{fmt.Errorf("--save: %w", publish.ErrOutput), true, exitcode.BadInput},
	} {
		if got := runExitCode(tc.err, tc.measured); got != tc.want {
			t.Errorf("%v (measured %v): exit %d, want %d", tc.err, tc.measured, got, tc.want)
		}
	}
}

// A capture without a port's state file: port.state SKIPs with the reason,
// as for every other file a capture lacks; it is no fault RB110 with an
// empty value ("RB110 rxe0:1 , LinkUp" in the drain reason).
func TestHealthCaptureWithoutPortState(t *testing.T) {
	root := filepath.Join(t.TempDir(), "rxe")
	if out, err := exec.Command("cp", "-r", rxeFixture, root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	if err := os.Remove(filepath.Join(root, "sys/class/infiniband/rxe0/ports/1/state")); err != nil {
		t.Fatal(err)
	}
	args := []string{"--sysfs-root", filepath.Join(root, "sys"), "--proc-root", filepath.Join(root, "proc"), "--dev-root", filepath.Join(root, "dev")}
	code, out, errOut := runHealthTest(t, nil, append(args, "--no-bw")...)
	if code != 0 || strings.Contains(out, "RB110") || errOut != "" {
		t.Errorf("health: exit %d, stderr %q\n%s", code, errOut, out)
	}
	code, out, _ = runDoctorTest(t, nil, append(args, "--json")...)
	var doc struct {
		Findings []struct{ Check, Status, Value string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("doctor --json: exit %d: %v", code, err)
	}
	found := false
	for _, f := range doc.Findings {
		if f.Check == "port.state" {
			found = true
			if f.Status != "SKIP" || !strings.Contains(f.Value, "no state file") {
				t.Errorf("port.state %s %q, want SKIP with the reason", f.Status, f.Value)
			}
		}
	}
	if !found {
		t.Errorf("no port.state finding:\n%s", out)
	}
}

// fleet names the kind of file it was given instead of blaming a schema.
func TestFleetNamesTheKind(t *testing.T) {
	mesh := writeFile(t, "mesh.json", `{"schema": 2, "kind": "rdmabench-mesh", "ranks": []}`)
	code, _, errOut := runWithEnviron(t, runFleet, nil, mesh)
	oneLine48(t, "fleet mesh.json", code, exitcode.BadInput, errOut, mesh+" is a mesh document (rdmabench mesh --save); fleet reads doctor --json reports")
	if strings.Contains(errOut, "schema") {
		t.Errorf("blames the schema: %q", errOut)
	}
}
