package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/internal/ntanalyzer"
	"github.com/rdmabench/rdmabench/internal/testport"
	"github.com/rdmabench/rdmabench/launch"
	"github.com/rdmabench/rdmabench/nccl/ntjson"
)

// -J with -I 1 on three processes of the stand-in, one of them slowed:
// the file has nccl-tests' layout, and nccl-tests' own analyzer reads it
// and finds the process rows and the skip. (It does not name the slow
// process: the others wait for it inside each collective, so every row is
// as slow; that is what issue 25's own straggler analysis is for.)
func TestOutputFilePerIteration(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "perf.json")
	ps := runRanks(t, 3, []string{"RDMABENCH_FAKE_NCCL_SLOW=2:3"}, "all_reduce", "-b", "8", "-e", "1K", "-f", "32", "-n", "5", "-w", "1", "-I", "1", "-K", "1", "-J", file)
	out := ps[0].stdout.String()
	for r, p := range ps {
		if p.code != 0 {
			t.Fatalf("rank %d: exit %d\n%s%s", r, p.code, p.stdout.String(), p.stderr.String())
		}
	}
	for _, want := range []string{"# Writing JSON output to " + file + "\n", "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; summary skips first 1 iterations",
		"i_min    i_max    i_p99    i_cv%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	rs := rows(out)
	if len(rs) != 2 || len(rs[0]) != 21 {
		t.Errorf("want 2 rows (8, 256) of 21 columns (nccl-tests' -I 1 table):\n%s", out)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ntanalyzer.CheckLayout(t, b, true, 3)
	var doc ntjson.Doc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 2 || doc.Config.PerIterSkip != 1 || len(doc.Config.Devices) != 3 || doc.NCCLVersion != 22901 {
		t.Errorf("doc: %+v", doc)
	}
	for _, r := range doc.Results {
		p := r.OutOfPlacePerIter
		if p == nil || len(p.TimesUs) != 5 || len(p.PerProcessUs) != 3 || p.SkippedIterations != 1 {
			t.Fatalf("size %d: per_iter %+v", r.Size, p)
		}
		// The slowed rank holds its stream 3 ms per operation: its
		// iterations take that long, and so does every iteration's max.
		for i, v := range p.PerProcessUs[2] {
			if v < 2900 || p.TimesUs[i] < v {
				t.Errorf("size %d iteration %d: rank 2 %v us, max %v", r.Size, i, v, p.TimesUs[i])
			}
		}
		if r.OutOfPlace.NWrong == nil || *r.OutOfPlace.NWrong != 0 {
			t.Errorf("size %d: nwrong %v", r.Size, r.OutOfPlace.NWrong)
		}
	}
	res := ntanalyzer.Run(t, file, "--all")
	for _, want := range []string{"Version:    3", "Process rows: 3", "Summary skip: 1 leading iterations",
		"Consistency (times_us == max over process rows, OOP): PASS", "PER-PROCESS STRAGGLER ANALYSIS (OOP)", "Node 0 (" + launch.ShortHostname() + ", processes  0- 2)"} {
		if !strings.Contains(res, want) {
			t.Errorf("analyzer output lacks %q:\n%s", want, res)
		}
	}
	t.Logf("python3 analyze_perf_json.py %s --all:\n%s", file, res)
}

// In-place sendrecv is not checked (NCCL leaves it undefined): both JSON
// documents say so and carry no count of wrong elements; -J finds a free
// name next to an existing file.
func TestUncheckedHalves(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "r.json")
	os.WriteFile(file, []byte("keep"), 0o644)
	p := runRanks(t, 2, nil, "sendrecv", "-b", "1K", "-e", "1K", "-n", "1", "--json", "-J", file)[0]
	if p.code != 0 {
		t.Fatalf("exit %d: %s", p.code, p.stderr.String())
	}
	var own struct {
		Schema  int `json:"schema"`
		Results []struct {
			OutOfPlace map[string]any `json:"out_of_place"`
			InPlace    map[string]any `json:"in_place"`
		} `json:"results"`
	}
	if err := json.Unmarshal(p.stdout.Bytes(), &own); err != nil || len(own.Results) != 1 {
		t.Fatalf("--json: %v\n%s", err, p.stdout.String())
	}
	ip, oop := own.Results[0].InPlace, own.Results[0].OutOfPlace
	if _, has := ip["wrong"]; has || ip["checked"] != false || own.Schema != 2 {
		t.Errorf("--json in-place half %v (schema %d): want \"checked\": false and no \"wrong\"", ip, own.Schema)
	}
	if oop["wrong"] != 0.0 || oop["checked"] != true {
		t.Errorf("--json out-of-place half %v", oop)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("-J replaced an existing file")
	}
	b, err := os.ReadFile(file + ".0")
	if err != nil {
		t.Fatal(err)
	}
	ntanalyzer.CheckLayout(t, b, false, 2)
	if !strings.Contains(string(b), `"in_place":{"time":`) || !strings.Contains(string(b), `"nwrong":null}`) || !strings.Contains(string(b), `"nwrong":0.000000}`) {
		t.Errorf("-J file: in-place nwrong must be null, out-of-place 0:\n%s", b)
	}
}

// Per-iteration flags' bad values: one line, exit 2, as usage errors.
func TestPerIterUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-I", "2"}, "-I must be 0 or 1"},
		{[]string{"-I", "1", "-n", "3", "-K", "3"}, "-K 3: must be between 0 and 2"},
		{[]string{"-K", "1"}, "-K needs per-iteration timing (-I 1)"},
		{[]string{"-J", "out.txt"}, "only JSON files"},
	} {
		p := runOne(t, nil, append([]string{"all_reduce"}, tc.args...)...)
		if p.code != exitUsage || strings.Count(p.stderr.String(), "\n") != 1 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("%v: exit %d %q; want %q", tc.args, p.code, p.stderr.String(), tc.want)
		}
	}
}

// NCCL_TESTS_MIN_BW: below 90% of it every process exits 1, the footer
// says FAILED and the -J file "okay": "false"; at or above, OK and "true".
// A value that is not a number is a usage error, not nccl-tests' atof 0.
func TestMinBusBW(t *testing.T) {
	for _, tc := range []struct {
		min, footer, okay string
		code              int
	}{
		{"1e9", "FAILED", `"okay":"false"`, exitWrong},
		{"0", "OK", `"okay":"true"`, 0},
	} {
		file := filepath.Join(t.TempDir(), "r.json")
		ps := runRanks(t, 2, []string{"NCCL_TESTS_MIN_BW=" + tc.min}, "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0", "-J", file)
		for r, p := range ps {
			if p.code != tc.code {
				t.Errorf("min %s: rank %d: exit %d, want %d: %s", tc.min, r, p.code, tc.code, p.stderr.String())
			}
		}
		var footer string
		for _, line := range strings.Split(ps[0].stdout.String(), "\n") {
			if strings.HasPrefix(line, "# Avg bus bandwidth") {
				footer = line
			}
		}
		if !strings.HasSuffix(footer, " "+tc.footer) {
			t.Errorf("min %s: footer %q, want it to end in %s", tc.min, footer, tc.footer)
		}
		if why := ps[0].stderr.String(); (tc.code != 0) != strings.Contains(why, "is below NCCL_TESTS_MIN_BW=") {
			t.Errorf("min %s: rank 0 said %q", tc.min, why)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if i := strings.Index(string(b), `"average_bus_bandwidth"`); i < 0 || !strings.Contains(string(b[i:]), tc.okay) {
			t.Errorf("min %s: -J average_bus_bandwidth lacks %s:\n%s", tc.min, tc.okay, b)
		}
	}
	p := runOne(t, []string{"NCCL_TESTS_MIN_BW=fast"}, "all_reduce", "-b", "1K", "-e", "1K")
	if p.code != exitUsage || strings.Count(p.stderr.String(), "\n") != 1 || !strings.Contains(p.stderr.String(), `NCCL_TESTS_MIN_BW="fast"`) {
		t.Errorf("NCCL_TESTS_MIN_BW=fast: exit %d %q", p.code, p.stderr.String())
	}
}

// -C 1, as nccl-tests: the time column is the CPU time spent issuing each
// collective ("cputime"), a part of its whole time; -J writes it under
// "cpu_time"; the bandwidths stay those of the whole time.
func TestReportCPUTime(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	p := runRanks(t, 1, nil, "all_reduce", "-b", "1K", "-e", "4K", "-f", "2", "-n", "5", "-w", "1", "-C", "1", "--json", "-J", file)[0]
	if p.code != 0 {
		t.Fatalf("exit %d: %s", p.code, p.stderr.String())
	}
	var own struct {
		Config struct {
			ReportCPUTime bool `json:"report_cputime"`
		} `json:"config"`
		Results []struct {
			OutOfPlace struct {
				TimeUs    float64  `json:"time_us"`
				CPUTimeUs *float64 `json:"cpu_time_us"`
			} `json:"out_of_place"`
		} `json:"results"`
	}
	if err := json.Unmarshal(p.stdout.Bytes(), &own); err != nil || len(own.Results) != 3 || !own.Config.ReportCPUTime {
		t.Fatalf("--json: %v %+v", err, own)
	}
	for _, r := range own.Results {
		if c := r.OutOfPlace.CPUTimeUs; c == nil || *c <= 0 || *c > r.OutOfPlace.TimeUs*1.01 {
			t.Errorf("cpu time %v of a collective that took %v µs", c, r.OutOfPlace.TimeUs)
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"out_of_place":{"cpu_time":`) || strings.Contains(string(b), `"out_of_place":{"time":`) {
		t.Errorf("-J halves want cpu_time in place of time:\n%s", b)
	}
	text := runRanks(t, 1, nil, "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-C", "1")[0]
	if !strings.Contains(text.stdout.String(), "cputime") {
		t.Errorf("table header without cputime:\n%s", text.stdout.String())
	}
	if q := runOne(t, nil, "all_reduce", "-C", "2"); q.code != exitUsage || !strings.Contains(q.stderr.String(), "-C must be 0 or 1") {
		t.Errorf("-C 2: exit %d %q", q.code, q.stderr.String())
	}
}

// NCCL_TESTS_SPLIT and NCCL_TESTS_SPLIT_MASK, as nccl-tests: each process's
// color from its rank, a communicator per color, all at once; the header
// lists each rank's group, the table is rank 0's group's (its bus
// bandwidth with that group's rank count), and a wrong result in any group
// fails the run.
func TestSplitGroups(t *testing.T) {
	rowOf := func(out string) []string {
		for _, l := range strings.Split(out, "\n") {
			if f := strings.Fields(l); len(f) >= 13 && f[0] == "1048576" {
				return f
			}
		}
		return nil
	}
	for _, tc := range []struct {
		env    string
		groups string // each rank's group in the header
		n      int    // ranks of rank 0's group
	}{
		{"NCCL_TESTS_SPLIT=MOD 2", "0 1 0 1", 2},
		{"NCCL_TESTS_SPLIT=DIV 2", "0 0 1 1", 2},
		{"NCCL_TESTS_SPLIT_MASK=0x0", "0 0 0 0", 4},
		{"NCCL_TESTS_SPLIT=%4", "0 1 2 3", 1},
	} {
		ps := start(t, 4, []string{tc.env}, "all_reduce", "-b", "1M", "-e", "1M", "-n", "3", "-w", "1")
		wait(t, ps, 60*time.Second)
		out := ps[0].stdout.String()
		var groups []string
		for _, m := range regexp.MustCompile(`(?m)^#  Rank +\d+ Group +(\d+) `).FindAllStringSubmatch(out, -1) {
			groups = append(groups, m[1])
		}
		row := rowOf(out)
		for r, p := range ps {
			if p.code != 0 {
				t.Errorf("%s: rank %d exit %d: %s", tc.env, r, p.code, p.stderr.String())
			}
		}
		if strings.Join(groups, " ") != tc.groups || row == nil {
			t.Errorf("%s: groups %v, want %s; 1 MiB row %v\n%s", tc.env, groups, tc.groups, row, out)
			continue
		}
		// all_reduce's busbw is algbw x 2(n-1)/n for the group's n.
		alg, _ := strconv.ParseFloat(row[6], 64)
		bus, _ := strconv.ParseFloat(row[7], 64)
		if want := alg * 2 * float64(tc.n-1) / float64(tc.n); math.Abs(bus-want) > 0.011+0.01*want {
			t.Errorf("%s: busbw %v with algbw %v, want %v for %d ranks", tc.env, bus, alg, want, tc.n)
		}
		if row[8] != "0" || !strings.Contains(out, "# Out of bounds values : 0 OK") {
			t.Errorf("%s: wrong results\n%s", tc.env, out)
		}
		if tc.n < 4 && !strings.Contains(out, fmt.Sprintf("# %s: %d groups, a communicator each, at once; the figures are rank 0's group's (%d ranks)", tc.env, 4/tc.n, tc.n)) {
			t.Errorf("%s: the header does not say how the processes were split\n%s", tc.env, out)
		}
	}
	// A wrong result in the group rank 0 is not in still fails the run.
	port := testport.Free(t)
	var ps []*proc
	for r := 0; r < 4; r++ {
		env := torchrunEnv(r, 4, port, "NCCL_TESTS_SPLIT_MASK=1")
		if r == 3 {
			env = append(env, "RDMABENCH_FAKE_NCCL_CORRUPT=1") // rank 1 of group 1
		}
		ps = append(ps, spawn(t, env, "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "1"))
	}
	wait(t, ps, 60*time.Second)
	if out := ps[0].stdout.String(); ps[0].code != exitWrong || !strings.Contains(out, "FAILED") {
		t.Errorf("a wrong result in group 1: rank 0 exit %d\n%s", ps[0].code, out)
	}
	// What nccl-tests would misread, and a root no group has: one line.
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"NCCL_TESTS_SPLIT=MOD 0"}, nil, "NCCL_TESTS_SPLIT=MOD 0: MOD by zero"},
		{[]string{"NCCL_TESTS_SPLIT=XOR 1"}, nil, "want AND, OR, MOD or DIV"},
		{[]string{"NCCL_TESTS_SPLIT_MASK=1"}, []string{"-I", "1"}, "with -I 1"},
	} {
		p := runOne(t, tc.env, append([]string{"all_reduce", "-b", "1K", "-e", "1K", "--nccl-lib", fakeLib}, tc.args...)...)
		if p.code != exitUsage || strings.Count(p.stderr.String(), "\n") != 1 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("%v %v: exit %d %q, want one line with %q", tc.env, tc.args, p.code, p.stderr.String(), tc.want)
		}
	}
	ps = start(t, 4, []string{"NCCL_TESTS_SPLIT=MOD 2"}, "broadcast", "-b", "1K", "-e", "1K", "-r", "2")
	wait(t, ps, 60*time.Second)
	if p := ps[0]; p.code != exitUsage || !strings.Contains(p.stderr.String(), "-r 2: the smallest group of NCCL_TESTS_SPLIT=MOD 2 has only 2 ranks") {
		t.Errorf("-r 2 with groups of 2: exit %d %q", p.code, p.stderr.String())
	}
}

// -G N, as nccl-tests: the timed iterations are captured into a CUDA graph
// once and the graph launched N times (the stand-in records a capturing
// stream's work and queues copies of it at each launch, and refuses to be
// waited for while it captures, as CUDA does); the check goes through a
// graph too. Every launch runs: each rank executes N-1 more iterations'
// worth of collectives per half than one launch would.
func TestCUDAGraphs(t *testing.T) {
	const iters = 4
	ops := func(graphs int, env ...string) (int, *proc) {
		trace := filepath.Join(t.TempDir(), "trace")
		file := filepath.Join(t.TempDir(), "out.json")
		ps := start(t, 2, append(env, "RDMABENCH_FAKE_NCCL_TRACE="+trace), "all_reduce", "-b", "64K", "-e", "64K",
			"-n", strconv.Itoa(iters), "-w", "1", "-G", strconv.Itoa(graphs), "-J", file)
		wait(t, ps, 60*time.Second)
		var n []int
		for r := range ps {
			b, _ := os.ReadFile(trace + "." + strconv.Itoa(r))
			n = append(n, strings.Count(string(b), "\n"))
		}
		if n[0] != n[1] {
			t.Errorf("-G %d: rank 0 ran %d collectives, rank 1 %d", graphs, n[0], n[1])
		}
		if b, err := os.ReadFile(file); err != nil || !regexp.MustCompile(fmt.Sprintf(`"graph":\s*%d,`, graphs)).Match(b) {
			t.Errorf("-G %d: the -J file does not say \"graph\": %d (%v)", graphs, graphs, err)
		}
		return n[0], ps[0]
	}
	plain, _ := ops(0)
	graphed, p := ops(3)
	out := p.stdout.String()
	if p.code != 0 || !strings.Contains(out, "validation: 1 graph: 3") || !strings.Contains(out, "# Out of bounds values : 0 OK") {
		t.Errorf("-G 3: exit %d\n%s%s", p.code, out, p.stderr.String())
	}
	if want := plain + 2*iters*(3-1); graphed != want {
		t.Errorf("-G 3 ran %d collectives a rank, want %d (%d without a graph, plus two more launches of %d iterations in each half)", graphed, want, plain, iters)
	}
	// A wrong result comes out of the graph's check.
	if _, p := ops(2, "RDMABENCH_FAKE_NCCL_CORRUPT=1"); p.code != exitWrong || !strings.Contains(p.stdout.String(), "FAILED") {
		t.Errorf("-G 2 with rank 1 corrupting: exit %d\n%s", p.code, p.stdout.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-G", "-1"}, "cannot be negative"},
		{[]string{"-G", "2", "-I", "1"}, "-G and -I 1"},
		{[]string{"-G", "2", "-z", "1"}, "-G and -z 1"},
	} {
		p := runOne(t, nil, append([]string{"all_reduce", "-b", "1K", "-e", "1K", "--nccl-lib", fakeLib}, tc.args...)...)
		if p.code != exitUsage || strings.Count(p.stderr.String(), "\n") != 1 || !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("%v: exit %d %q, want one line with %q", tc.args, p.code, p.stderr.String(), tc.want)
		}
	}
}
