package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/leakcheck"

	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl/bench"
	"github.com/rdmabench/rdmabench/nccl/fakelib"
	"github.com/rdmabench/rdmabench/results"
)

// fakeNCCL is the stand-in NCCL that TestMain builds once for the
// package's tests (as cmd/ncclbench's do); noFake says why there is none.
var fakeNCCL, noFake string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runner-test-")
	if err == nil {
		defer os.RemoveAll(dir)
		if noFake = missingCC(); noFake == "" {
			fakeNCCL, err = fakelib.Build(dir)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return leakcheck.Run(m)
}

// missingCC says why the fake NCCL cannot be built here, or "".
func missingCC() string {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		return fmt.Sprintf("no C compiler (%s) to build the fake NCCL: %v", cc, err)
	}
	return ""
}

// Every collective the tool offers has its own dispatch case: a new one in
// bench.Collectives without one would silently issue nothing.
func TestCollKinds(t *testing.T) {
	seen := map[collKind]string{}
	for _, c := range bench.Collectives {
		k := kindOf(c)
		if k == collUnknown {
			t.Errorf("%s: no collKind", c.Name)
		}
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s share collKind %d", prev, c.Name, k)
		}
		seen[k] = c.Name
	}
	if kindOf(bench.Collective{Name: "all_to_nobody"}) != collUnknown {
		t.Error("an unknown name has a collKind")
	}
}

// Each collective, dispatched on two GPUs of one process, computes what
// bench.Case expects: a wrong NCCL call (or a wrong rank, buffer or
// offset) shows up as wrong values in the checked halves.
func TestDispatchEachCollective(t *testing.T) {
	cases := []struct {
		coll, version, alltoall string
	}{
		{coll: "all_reduce"},
		{coll: "all_gather"},
		{coll: "reduce_scatter"},
		{coll: "broadcast"},
		{coll: "reduce"},
		{coll: "alltoall", alltoall: "ncclAlltoAll"},
		{coll: "alltoall", version: "22703", alltoall: "grouped ncclSend/ncclRecv (NCCL < 2.28)"},
		{coll: "sendrecv"},
	}
	for _, c := range cases {
		t.Run(c.coll+c.version, func(t *testing.T) {
			if c.version != "" {
				t.Setenv("RDMABENCH_FAKE_NCCL_VERSION", c.version)
			}
			o := options(t, c.coll)
			o.Ngpus, o.JSON, o.Root = 2, true, 1
			var out, errOut bytes.Buffer
			if code := Run(o, &out, &errOut); code != 0 {
				t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
			}
			var run results.NCCLRun
			if err := json.Unmarshal(out.Bytes(), &run); err != nil {
				t.Fatalf("%v:\n%s", err, out.String())
			}
			if len(run.Results) != 3 || run.OutOfBounds != 0 || run.Config.NRanks != 2 {
				t.Fatalf("%d rows, %d out of bounds, %d ranks", len(run.Results), run.OutOfBounds, run.Config.NRanks)
			}
			for _, p := range run.Results {
				if !p.OutOfPlace.Checked || p.OutOfPlace.Wrong != 0 || p.InPlace.Wrong != 0 {
					t.Errorf("size %d: checked %v, wrong %d/%d", p.Size, p.OutOfPlace.Checked, p.OutOfPlace.Wrong, p.InPlace.Wrong)
				}
			}
			if run.Config.AlltoAll != c.alltoall {
				t.Errorf("alltoall %q, want %q", run.Config.AlltoAll, c.alltoall)
			}
		})
	}
}

// A collective that never finishes is stopped by -T, and the run says
// which one and for how long it waited: operation 6 of rank 0 falls in the
// first row's timed loop (after 3 warm-up sizes, and the untimed one), whose
// wait covers its 3 iterations, -T each.
func TestHungCollectiveTimesOut(t *testing.T) {
	t.Setenv("RDMABENCH_FAKE_NCCL_HANG", "0:6")
	o := options(t, "all_reduce")
	o.Timeout = 300 * time.Millisecond
	var out, errOut bytes.Buffer
	code := Run(o, &out, &errOut)
	want := "ncclbench: timeout: ncclAllReduce of 1024 bytes did not finish within 900ms (-T 300ms per collective)\n"
	if code != ExitFail || errOut.String() != want {
		t.Errorf("exit %d, stderr %q, want %q...", code, errOut.String(), want)
	}
}

// checkpoint returns the stop cause as a *StopError: the first reason
// asked for, or a deadline missed alone; nothing while within it.
func TestCheckpointStopCause(t *testing.T) {
	const alone = "timeout: ncclAllReduce of 8 bytes did not finish within 1s (-T 1s per collective)"
	cases := []struct {
		name     string
		stops    []string
		deadline time.Duration // from now; 0: none
		want     string        // "": no error
	}{
		{name: "nothing"},
		{name: "within the deadline", deadline: time.Hour},
		{name: "requested", stops: []string{"peer lost", "later"}, want: "peer lost"},
		{name: "deadline missed alone", deadline: -time.Second, want: alone},
		{name: "request beats deadline", stops: []string{"rank 0's verdict"}, deadline: -time.Second, want: "rank 0's verdict"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &runner{o: &Options{Timeout: time.Second}, grp: &launch.Group{Size: 1}}
			r.env.Size = 1
			r.phase.Store("ncclAllReduce of 8 bytes")
			r.span.Store(int64(time.Second))
			if c.deadline != 0 {
				r.deadline.Store(time.Now().Add(c.deadline).UnixNano())
			}
			for _, s := range c.stops {
				r.requestStop(s)
			}
			err := r.checkpoint()
			if c.want == "" {
				if err != nil || r.aborted {
					t.Errorf("err %v, aborted %v", err, r.aborted)
				}
				return
			}
			var se *StopError
			if !errors.As(err, &se) || se.Reason != c.want || err.Error() != c.want {
				t.Fatalf("err %#v, want StopError %q", err, c.want)
			}
			if !r.aborted || r.abortReason != c.want {
				t.Errorf("aborted %v for %q", r.aborted, r.abortReason)
			}
			// The cause stays for explain, ahead of what NCCL said after.
			if got := r.explain(errors.New("ncclRemoteError")).Error(); got != c.want+" (then: ncclRemoteError)" {
				t.Errorf("explain: %q", got)
			}
		})
	}
}

// -a: how three processes' seconds per collective (3, 1, 2 on ranks 0, 1,
// 2) become the row's time, reduced as the rendezvous does.
func TestTimeShare(t *testing.T) {
	secs := []float64{3, 1, 2}
	for _, c := range []struct {
		average int
		want    float64
	}{{0, 3}, {1, 2}, {2, 1}, {3, 3}} {
		var op launch.Op
		var got float64
		for rank, s := range secs {
			o, v := timeShare(c.average, rank, s)
			if rank > 0 && o != op {
				t.Fatalf("-a %d: ranks disagree on the reduction: %s, %s", c.average, op, o)
			}
			switch {
			case rank == 0:
				op, got = o, v
			case o == launch.Sum:
				got += v
			case o == launch.Min:
				got = min(got, v)
			case o == launch.Max:
				got = max(got, v)
			}
		}
		if got = timeOf(c.average, len(secs), got); got != c.want {
			t.Errorf("-a %d: %v s, want %v", c.average, got, c.want)
		}
	}
}

// -J writes nccl-tests' JSON once, at the end: a row per size with both
// halves, and the header says where it goes.
func TestOutputFile(t *testing.T) {
	o := options(t, "all_gather")
	o.OutputFile = filepath.Join(t.TempDir(), "run.json")
	var out, errOut bytes.Buffer
	if code := Run(o, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	if !strings.Contains(out.String(), "# Writing JSON output to "+o.OutputFile) {
		t.Errorf("no -J line:\n%s", out.String())
	}
	b, err := os.ReadFile(o.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config struct {
			MinimumBytes int `json:"minimum_bytes"`
			MaximumBytes int `json:"maximum_bytes"`
		} `json:"config"`
		Results []struct {
			Size       int             `json:"size"`
			Type       string          `json:"type"`
			OutOfPlace json.RawMessage `json:"out_of_place"`
			InPlace    json.RawMessage `json:"in_place"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%v:\n%s", err, b)
	}
	if doc.Config.MinimumBytes != 1024 || doc.Config.MaximumBytes != 4096 || len(doc.Results) != 3 {
		t.Fatalf("config %+v, %d rows:\n%s", doc.Config, len(doc.Results), b)
	}
	for i, p := range doc.Results {
		if p.Size != 1024<<i || p.Type != "float" || len(p.OutOfPlace) < 3 || len(p.InPlace) < 3 {
			t.Errorf("row %d: %+v", i, p)
		}
	}
}
