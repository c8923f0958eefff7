package results

import (
	"math"
	"strings"
	"testing"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

func bwRun(gbps ...float64) *Run {
	r := &Run{Schema: Schema, Test: WriteBW, QPs: []int{1}}
	for i, g := range gbps {
		r.Results = append(r.Results, Result{Size: 1 << (10 + i), QPs: 1, Iterations: 100, BWAvgGbps: g, BWBurstGbps: g + 1, MsgRateMpps: g / 10})
	}
	return r
}

func TestMergeRepeats(t *testing.T) {
	h1, h2 := hdrhistogram.New(1, 3600e9, 3), hdrhistogram.New(1, 3600e9, 3)
	h1.RecordValue(1000)
	h2.RecordValue(3000)
	lat := func(p50, p99 float64, h *hdrhistogram.Histogram) *Run {
		return &Run{Test: SendLat, Results: []Result{{Size: 8, QPs: 1, Iterations: 10, Lat: &LatencyStats{Min: p50 - 1, P50: p50, P99: p99, Max: p99 + 1}, Hist: h}}}
	}
	tests := []struct {
		name    string
		runs    []*Run
		check   func(t *testing.T, m *Run)
		wantErr string
	}{
		{name: "none", wantErr: "no runs"},
		{name: "one run is returned as it is", runs: []*Run{bwRun(10)}, check: func(t *testing.T, m *Run) {
			if m.Repeat != 0 || m.Results[0].Repeats != nil {
				t.Errorf("one run grew repeats: %+v", m)
			}
		}},
		{name: "bandwidth means, bursts max, iterations sum", runs: []*Run{bwRun(10, 20), bwRun(12, 22), bwRun(14)}, check: func(t *testing.T, m *Run) {
			if m.Repeat != 3 || len(m.Results) != 2 {
				t.Fatalf("repeat %d, %d results", m.Repeat, len(m.Results))
			}
			r := m.Results[0]
			if r.BWAvgGbps != 12 || r.BWBurstGbps != 15 || r.Iterations != 300 || len(r.Repeats) != 3 || r.Repeats[2].BWAvgGbps != 14 {
				t.Errorf("first size %+v", r)
			}
			// The size the last run did not reach keeps the two it had.
			if r := m.Results[1]; r.BWAvgGbps != 21 || len(r.Repeats) != 2 {
				t.Errorf("second size %+v", r)
			}
		}},
		{name: "latency pooled: percentiles of the merged histogram, min of mins", runs: []*Run{lat(2, 4, h1), lat(4, 8, h2)}, check: func(t *testing.T, m *Run) {
			l := m.Results[0].Lat
			// The samples are 1 µs and 3 µs: the means of the repeats'
			// percentiles (3 and 6) are values no sample had.
			if math.Abs(l.P50-1) > 0.01 || math.Abs(l.P99-3) > 0.01 || l.Min != 1 || l.Max != 9 {
				t.Errorf("lat %+v", l)
			}
			if h := m.Results[0].Hist; h.TotalCount() != 2 || h1.TotalCount() != 1 {
				t.Errorf("histogram has %d samples (the runs' own must stay unmerged: %d)", h.TotalCount(), h1.TotalCount())
			}
			if f := m.Results[0].Repeats; f[1].LatP50us != 4 || f[1].LatP99us != 8 {
				t.Errorf("repeats %+v", f)
			}
		}},
		{name: "without histograms, the repeats' percentiles averaged", runs: []*Run{lat(2, 4, nil), lat(4, 8, nil)}, check: func(t *testing.T, m *Run) {
			if l := m.Results[0].Lat; l.P50 != 3 || l.P99 != 6 {
				t.Errorf("lat %+v", l)
			}
		}},
		{name: "another test", runs: []*Run{bwRun(1), lat(1, 2, nil)}, wantErr: "repeat 2 ran send_lat"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := MergeRepeats(tt.runs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, m)
		})
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"current", `{"schema":2,"test":"write_bw","results":[{"size":8,"qps":1,"bw_avg_gbps":1.5,"repeats":[{"bw_avg_gbps":1.5}]}]}`, ""},
		{"schema 1", `{"schema":1,"test":"send_lat","results":[],"bw_peak_gbps":3}`, ""},
		{"newer", `{"schema":99,"test":"write_bw"}`, "schema 99 is newer"},
		{"no schema", `{"test":"write_bw"}`, "no schema version"},
		{"unknown test", `{"schema":2,"test":"nope"}`, `unknown test "nope"`},
		{"not JSON", `hello`, "not a result document"},
		{"empty", ``, "not a result document"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Decode(strings.NewReader(tt.doc))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				if r.Test == WriteBW && (len(r.Results) != 1 || math.Abs(r.Results[0].Repeats[0].BWAvgGbps-1.5) > 0) {
					t.Errorf("decoded %+v", r)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestReadHgrm(t *testing.T) {
	tests := []struct {
		name, doc string
		n         int
		wantErr   string
	}{
		{"hdrhistogram-go", "       Value     Percentile TotalCount 1/(1-Percentile)\n\n 1.000 0.0 1 1.00\n 2.000 0.5 2 2.00\n 3.000 1.0 3 inf\n#[Mean = 2]\n", 3, ""},
		{"last line without inf", " 1.000 0.0 1 1.00\n 3.000 1.0 3\n", 2, ""},
		{"percentile above 1", " 1.000 1.5 1 1.00\n", 0, "percentile in 0..1"},
		{"negative value", " -1 0.5 1 2\n", 0, "value ≥ 0"},
		{"NaN", " NaN 0.5 1 2\n", 0, "value ≥ 0"},
		{"words", " a b c d\n", 0, "line 1"},
		{"too many fields", " 1 0.5 1 2 5\n", 0, "5 fields"},
		{"empty", "", 0, "not an .hgrm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := ReadHgrm(strings.NewReader(tt.doc))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(p.Percentiles) != tt.n {
				t.Errorf("%v, %v; want %d lines", p, err, tt.n)
			}
		})
	}
}

func TestMemoryString(t *testing.T) {
	one, zero := 1, 0
	for _, tc := range []struct {
		m    *Memory
		want string
	}{
		{nil, "host memory"},
		{&Memory{Kind: HostMemory}, "host memory"},
		{&Memory{Kind: HostMemory, NodeAsked: &one, Nodes: "1"}, "host memory, NUMA node 1"},
		{&Memory{Kind: HostMemory, NodeAsked: &one, Nodes: "0"}, "host memory, NUMA node 0 (asked for 1)"},
		{&Memory{Kind: HostMemory, Nodes: "0 (75%), 1 (25%)", HugePages: true}, "host memory, NUMA node 0 (75%), 1 (25%), 2 MiB huge pages"},
		{&Memory{Kind: HostMemory, NodeAsked: &one}, "host memory, NUMA node 1 asked (placement unknown)"},
		{&Memory{Kind: GPUMemory, GPU: &zero, GPUPCI: "0000:3b:00.0", Registration: RegDmabuf}, "GPU 0 (0000:3b:00.0), dma-buf registration"},
		{&Memory{Kind: GPUMemory, GPU: &one, GPUPCI: "0000:11:00.0", Registration: RegPeerMemory, FakeCUDA: true},
			"GPU 1 (0000:11:00.0), peer-memory registration [CPU stand-in for CUDA: not a GPU measurement]"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.m, got, tc.want)
		}
	}
}

func TestMarkKnee(t *testing.T) {
	series := func(p99s ...float64) []RateSeries {
		var s []RateSeries
		for i, p := range p99s {
			s = append(s, RateSeries{Rate: 1000 * (i + 1), Lat: LatencyStats{P99: p}, Knee: true})
		}
		return s
	}
	tests := []struct {
		name string
		p99s []float64
		idle float64
		want int
	}{
		{"none past twice", []float64{10, 15, 20}, 10, -1},
		{"exactly twice is not past", []float64{20}, 10, -1},
		{"first past", []float64{12, 21, 40}, 10, 1},
		{"only the first is marked", []float64{30, 40}, 10, 0},
		{"no idle figure", []float64{30}, 0, -1},
		{"no series", nil, 10, -1},
	}
	for _, tt := range tests {
		s := series(tt.p99s...)
		if got := MarkKnee(s, tt.idle); got != tt.want {
			t.Errorf("%s: knee at %d, want %d", tt.name, got, tt.want)
		}
		for i := range s {
			if s[i].Knee != (i == tt.want) {
				t.Errorf("%s: series %d marked %v", tt.name, i, s[i].Knee)
			}
		}
	}
}

// The case: one repeat's p99 at 1 µs, another's at 100 µs. Pooled,
// p99 is 100 µs (a value the samples had, not 50.5), and the mean and
// standard deviation are those of all the samples together.
func TestMergeRepeatsPoolsSamples(t *testing.T) {
	samples := [][]int64{{1000, 1000, 1000, 1000}, {1000, 2000, 3000, 100000}}
	var runs []*Run
	var all []float64
	for _, ss := range samples {
		h := hdrhistogram.New(1, 3600e9, 3)
		var sum float64
		for _, v := range ss {
			h.RecordValue(v)
			sum += float64(v) / 1e3
			all = append(all, float64(v)/1e3)
		}
		mean := sum / float64(len(ss))
		var sq float64
		for _, v := range ss {
			sq += (float64(v)/1e3 - mean) * (float64(v)/1e3 - mean)
		}
		st := LatencyStats{Min: float64(ss[0]) / 1e3, Max: float64(ss[len(ss)-1]) / 1e3, Mean: mean, Stdev: math.Sqrt(sq / float64(len(ss)-1)),
			P50: float64(h.ValueAtQuantile(50)) / 1e3, P99: float64(h.ValueAtQuantile(99)) / 1e3}
		runs = append(runs, &Run{Test: SendLat, Results: []Result{{Size: 8, QPs: 1, Iterations: uint64(len(ss)), Lat: &st, Hist: h}}})
	}
	m, err := MergeRepeats(runs)
	if err != nil {
		t.Fatal(err)
	}
	var mean, sq float64
	for _, v := range all {
		mean += v / float64(len(all))
	}
	for _, v := range all {
		sq += (v - mean) * (v - mean)
	}
	sd := math.Sqrt(sq / float64(len(all)-1))
	l := m.Results[0].Lat
	if math.Abs(l.P99-100) > 0.1 || math.Abs(l.Mean-mean) > 1e-9 || math.Abs(l.Stdev-sd) > 1e-9 || l.Max != 100 || l.Min != 1 {
		t.Errorf("pooled %+v, want p99 100, mean %v, stdev %v", l, mean, sd)
	}
	if r := m.Results[0].Repeats; r[0].LatP99us != 1 || math.Abs(r[1].LatP99us-100) > 0.1 {
		t.Errorf("the repeats' own figures: %+v", r)
	}
}

func TestTestNames(t *testing.T) {
	for _, c := range []struct {
		in, spelling      string // CommandSpelling(in)
		want              Test
		command, perftest string // "" when in is no test
	}{
		{"write-bw", "write-bw", WriteBW, "write-bw", "ib_write_bw"},
		{"write_bw", "write-bw", WriteBW, "write-bw", "ib_write_bw"},
		{"ib_write_bw", "write-bw", WriteBW, "write-bw", "ib_write_bw"},
		{"atomic-lat", "atomic-lat", AtomicLat, "atomic-lat", "ib_atomic_lat"},
		{"ib_send_lat", "send-lat", SendLat, "send-lat", "ib_send_lat"},
		{"read_lat", "read-lat", ReadLat, "read-lat", "ib_read_lat"},
		{"ib_write_bx", "write-bx", "", "", ""}, // a typo still reads as a command's
		{"ib-write-bw", "ib-write-bw", "", "", ""},
		{"serve", "serve", "", "", ""},
		{"", "", "", "", ""},
	} {
		if got := CommandSpelling(c.in); got != c.spelling {
			t.Errorf("CommandSpelling(%q) = %q, want %q", c.in, got, c.spelling)
		}
		got, ok := TestFromName(c.in)
		if ok != (c.want != "") || (ok && got != c.want) {
			t.Errorf("TestFromName(%q) = %q, %v; want %q", c.in, got, ok, c.want)
			continue
		}
		if ok && (got.Command() != c.command || got.Perftest() != c.perftest) {
			t.Errorf("%q: Command %q Perftest %q; want %q %q", c.in, got.Command(), got.Perftest(), c.command, c.perftest)
		}
	}
}

func TestTestTitlesAndSummaries(t *testing.T) {
	for _, tc := range Tests {
		if tc.Title() == "" || tc.Summary() == "" {
			t.Errorf("%s: title %q summary %q", tc, tc.Title(), tc.Summary())
		}
	}
	if got := WriteBW.Summary(); got != "RDMA WRITE bandwidth (ib_write_bw)" {
		t.Errorf("WriteBW.Summary() = %q", got)
	}
	if got := AtomicLat.Title(); got != "Atomic Latency Test" {
		t.Errorf("AtomicLat.Title() = %q", got)
	}
}
