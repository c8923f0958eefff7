package compare

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rdmabench/rdmabench/results"
)

// bw makes a bandwidth run with one size per entry; each entry's values are
// its repeats (one value: no repeats).
func bw(sizes map[int][]float64) *results.Run {
	r := &results.Run{Schema: results.Schema, Test: results.WriteBW, Device: "mlx5_0"}
	for _, s := range []int{8, 64, 4096, 65536} {
		v, ok := sizes[s]
		if !ok {
			continue
		}
		res := results.Result{Size: s, QPs: 1}
		for _, g := range v {
			res.BWAvgGbps += g / float64(len(v))
			if len(v) > 1 {
				res.Repeats = append(res.Repeats, results.Figures{BWAvgGbps: g})
			}
		}
		r.Results = append(r.Results, res)
	}
	return r
}

func lat(p50, p99 []float64) *results.Run {
	r := &results.Run{Schema: results.Schema, Test: results.SendLat}
	res := results.Result{Size: 8, QPs: 1, Lat: &results.LatencyStats{P50: p50[0], P99: p99[0]}}
	if len(p50) > 1 {
		for i := range p50 {
			res.Repeats = append(res.Repeats, results.Figures{LatP50us: p50[i], LatP99us: p99[i]})
		}
	}
	r.Results = []results.Result{res}
	return r
}

func TestWelch(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-6 }
	// Means 11 and 14, variances 1: se √(2/3), 4 degrees of freedom,
	// t(0.975, 4) = 2.776445; in fractions of the base's 11.
	iv, noise := welch(sideOf([]float64{10, 11, 12}), sideOf([]float64{13, 14, 15}), 0.025)
	half := 2.776445105 * math.Sqrt(2.0/3)
	if noise != BothSides || !near(iv.change, 3.0/11) || !near(iv.lo, (3-half)/11) || !near(iv.hi, (3+half)/11) {
		t.Errorf("%+v %v, want 3/11 ± %v/11", iv, noise, half)
	}
	// One value on the new side borrows the base's relative spread: its
	// variance (1/11)²·14², 2 degrees of freedom, t(0.975, 2) = 4.302653.
	iv, noise = welch(sideOf([]float64{10, 11, 12}), sideOf([]float64{14}), 0.025)
	half = 4.302652730 * math.Sqrt(1.0/3+14.0*14/121)
	if noise != BaseOnly || !near(iv.lo, (3-half)/11) || !near(iv.hi, (3+half)/11) {
		t.Errorf("%+v %v, want 3/11 ± %v/11", iv, noise, half)
	}
	// No spread at all: the floor, Resolution of each mean.
	iv, _ = welch(sideOf([]float64{1.5, 1.5, 1.5}), sideOf([]float64{1.501, 1.501, 1.501}), 0.025)
	if iv.hi-iv.lo < 2*Resolution {
		t.Errorf("zero spread gave %+v: the floor did not apply", iv)
	}
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name string
		iv   interval
		good float64
		want Verdict
	}{
		{"significant but tiny (the issue's -0.50% [-0.62, -0.38])", interval{-0.005, -0.0062, -0.0038}, 1, Same},
		{"whole interval beyond the threshold", interval{-0.10, -0.15, -0.06}, 1, Regression},
		{"worse than zero, beyond the threshold", interval{-0.10, -0.16, -0.04}, 1, Regression},
		{"worse than zero, change within the threshold", interval{-0.03, -0.055, -0.005}, 1, Inconclusive},
		{"straddles zero", interval{-0.06, -0.12, 0.01}, 1, Inconclusive},
		{"better", interval{0.10, 0.05, 0.15}, 1, Improvement},
		{"latency up", interval{0.10, 0.05, 0.15}, -1, Regression},
		{"latency down", interval{-0.10, -0.15, -0.05}, -1, Improvement},
		{"latency within", interval{0.01, -0.02, 0.04}, -1, Same},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(tc.iv, tc.good, 0.05); got != tc.want {
				t.Errorf("%+v: %v, want %v", tc.iv, got, tc.want)
			}
		})
	}
}

func TestVerdicts(t *testing.T) {
	noisy := []float64{80, 100, 120, 90, 110}
	quiet := []float64{100, 100.2, 99.9, 100.1}
	scaled := func(v []float64, f float64) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = x * f
		}
		return out
	}
	tests := []struct {
		name        string
		base, cur   *results.Run
		o           Options
		want        []Verdict // per row, in order
		noise       Noise
		regressions int
	}{
		{"same without repeats", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {97}}), DefaultOptions, []Verdict{Same}, NoNoise, 0},
		{"threshold regression", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {90}}), DefaultOptions, []Verdict{Regression}, NoNoise, 1},
		{"threshold improvement", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {110}}), DefaultOptions, []Verdict{Improvement}, NoNoise, 0},
		// A 10% drop inside noise of ±20% is neither shown nor ruled out.
		{"inside the noise", bw(map[int][]float64{4096: noisy}), bw(map[int][]float64{4096: scaled(noisy, 0.9)}), DefaultOptions, []Verdict{Inconclusive}, BothSides, 0},
		// A 3% drop on quiet repeats is real, and within the threshold.
		{"real but small", bw(map[int][]float64{4096: quiet}), bw(map[int][]float64{4096: scaled(quiet, 0.97)}), DefaultOptions, []Verdict{Same}, BothSides, 0},
		{"real and large", bw(map[int][]float64{4096: quiet}), bw(map[int][]float64{4096: scaled(quiet, 0.93)}), DefaultOptions, []Verdict{Regression}, BothSides, 1},
		// The zero spread: {1.500 ×3} against {1.501 ×3}.
		{"zero spread", bw(map[int][]float64{4096: {1.5, 1.5, 1.5}}), bw(map[int][]float64{4096: {1.501, 1.501, 1.501}}), DefaultOptions, []Verdict{Same}, BothSides, 0},
		{"latency up is a regression", lat([]float64{2, 2.01, 1.99}, []float64{5, 5.1, 4.9}), lat([]float64{2.5, 2.51, 2.49}, []float64{5, 5.05, 4.95}), DefaultOptions, []Verdict{Regression, Same}, BothSides, 1},
		{"latency down is an improvement", lat([]float64{2}, []float64{5}), lat([]float64{1.5}, []float64{5}), DefaultOptions, []Verdict{Improvement, Same}, NoNoise, 0},
		{"repeats in the base only", bw(map[int][]float64{4096: quiet}), bw(map[int][]float64{4096: {90}}), DefaultOptions, []Verdict{Regression}, BaseOnly, 1},
		{"a size missing is a regression", bw(map[int][]float64{8: {1}, 4096: {100}}), bw(map[int][]float64{4096: {100}, 65536: {200}}), DefaultOptions, []Verdict{Missing, Same, OnlyNew}, NoNoise, 1},
		{"unless allowed", bw(map[int][]float64{8: {1}, 4096: {100}}), bw(map[int][]float64{4096: {100}}), Options{Threshold: 0.05, Confidence: 0.95, AllowMissing: true}, []Verdict{Missing, Same}, NoNoise, 0},
		{"a size without a figure is missing", bw(map[int][]float64{8: {1}, 4096: {100}}), bw(map[int][]float64{8: {0}, 4096: {100}}), DefaultOptions, []Verdict{Missing, Same}, NoNoise, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Runs(tt.base, tt.cur, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Rows) != len(tt.want) {
				t.Fatalf("%d rows, want %d: %+v", len(rep.Rows), len(tt.want), rep.Rows)
			}
			for i, r := range rep.Rows {
				if r.Verdict != tt.want[i] {
					t.Errorf("row %d (%d %s): %s, want %s (%+v)", i, r.Size, r.Metric, r.Verdict, tt.want[i], r)
				}
				if r.BaseN > 0 && r.NewN > 0 && (r.Noise != tt.noise || r.NoiseAware != (tt.noise != NoNoise)) {
					t.Errorf("row %d noise %v (aware %v), want %v", i, r.Noise, r.NoiseAware, tt.noise)
				}
			}
			if rep.Regressions != tt.regressions {
				t.Errorf("%d regressions, want %d", rep.Regressions, tt.regressions)
			}
		})
	}
}

// An inconclusive row's estimate settles it: at that many repeats the
// interval fits, at two fewer it does not.
func TestSettleRepeats(t *testing.T) {
	noisy := []float64{90, 100, 110, 95, 105}
	b, n := sideOf(noisy), sideOf([]float64{87, 97, 107, 92, 102}) // 3% down
	const a = 0.05
	iv, _ := welch(b, n, a)
	if judge(iv, 1, 0.05) != Inconclusive {
		t.Fatalf("not inconclusive: %+v", iv)
	}
	k := settleRepeats(b, n, iv, 0.05, a)
	at := func(k int) side2 {
		bk, nk := b, n
		bk.n, nk.n = k, k
		got, _ := welch(bk, nk, a)
		return side2{got, judge(got, 1, 0.05)}
	}
	if k < 2 || at(k).v == Inconclusive || at(k-2).v != Inconclusive {
		t.Errorf("%d repeats: %+v; two fewer: %+v", k, at(k), at(k-2))
	}
	if got := settleRepeats(b, n, interval{change: 0.0499}, 0.05, a); got != 0 {
		t.Errorf("a change a hair inside the threshold: %d repeats, want 0 (more than %d)", got, MaxRepeats)
	}
}

type side2 struct {
	iv interval
	v  Verdict
}

func TestRefusals(t *testing.T) {
	b := bw(map[int][]float64{4096: {100}})
	with := func(f func(*results.Run)) *results.Run {
		r := bw(map[int][]float64{4096: {100}})
		f(r)
		return r
	}
	tests := []struct {
		name    string
		base    *results.Run
		cur     *results.Run
		o       Options
		wantErr string
		invalid bool
	}{
		{"other test", b, lat([]float64{1}, []float64{2}), DefaultOptions, "the base ran write_bw and the new run send_lat", true},
		{"no common size", b, bw(map[int][]float64{8: {1}}), DefaultOptions, "share no measured size", true},
		{"bidirectional", b, with(func(r *results.Run) { r.Bidirectional = true }), DefaultOptions, "bidirectional (-b) is off in the base and on in the new run", true},
		{"load", with(func(r *results.Run) { r.Results[0].Loads = []results.LoadFigures{{Load: "write-bw"}} }), b, DefaultOptions, "background loads (--load) is on in the base", true},
		{"rate", b, with(func(r *results.Run) { r.RateLatency = "whole round trip" }), DefaultOptions, "open-loop rates (--rate)", true},
		{"bad threshold", b, b, Options{Threshold: 0, Confidence: 0.95}, "threshold", false},
		{"bad confidence", b, b, Options{Threshold: 0.05, Confidence: 1}, "confidence", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Runs(tt.base, tt.cur, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.Is(err, ErrInvalid) != tt.invalid {
				t.Errorf("err %v, want %q (invalid %v)", err, tt.wantErr, tt.invalid)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	b, c := bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {100}})
	c.Device, c.Error = "mlx5_1", "size 8192: server: gone"
	b.TxDepth, c.TxDepth = 128, 512
	b.Results[0].Iterations, c.Results[0].Iterations = 1000, 5000
	o := DefaultOptions
	o.AllowPartial = true // the error's note is what a partial run compared anyway keeps
	rep, err := Runs(b, c, o)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Notes, "\n")
	for _, want := range []string{"device differs: base mlx5_0, new mlx5_1", "the new run ended with an error", "tx depth (-t) differs: base 128, new 512", "iterations differ at 1 size(s), e.g. 4096 B: base 1000, new 5000"} {
		if !strings.Contains(got, want) {
			t.Errorf("notes %q, want %q", got, want)
		}
	}
}

// mesh makes a mesh on the hosts given (by rank): every direction 100 Gb/s
// and 2 us, changed by f.
func mesh(hosts []string, f func(from, to string, p *results.MeshPair)) *results.Mesh {
	m := &results.Mesh{Kind: results.MeshKind, Schema: results.MeshSchema, BWSize: 1 << 20, LatSize: 8}
	for r, h := range hosts {
		m.Ranks = append(m.Ranks, results.MeshRank{Rank: r, Host: h})
	}
	for a := range hosts {
		for b := range hosts {
			if a == b {
				continue
			}
			p := results.MeshPair{From: a, To: b, MeshFigures: results.MeshFigures{BWGbps: 100, LatP50us: 2, LatP99us: 3}}
			if f != nil {
				f(hosts[a], hosts[b], &p)
			}
			m.Pairs = append(m.Pairs, p)
		}
	}
	return m
}

func TestMeshes(t *testing.T) {
	hosts := []string{"n1", "n2", "n3"}
	eight := []string{"n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8"} // 56 directions: noise across them
	slowLink := func(from, to string, p *results.MeshPair) {
		if from == "n1" && to == "n3" {
			p.BWGbps = 80
		}
		if from == "n3" && to == "n2" {
			p.LatP50us = 3
		}
	}
	n1Failed := func(f, _ string, p *results.MeshPair) {
		if f == "n1" {
			p.Error = "rank 0 left the mesh"
		}
	}
	for _, tc := range []struct {
		name        string
		base, cur   *results.Mesh
		o           Options
		regressions int
		worse       []string // "from>to metric"
		note        string
		err         string
	}{
		{"same", mesh(hosts, nil), mesh(hosts, nil), DefaultOptions, 0, nil, "", ""},
		{"within the threshold", mesh(hosts, nil), mesh(hosts, func(_, _ string, p *results.MeshPair) { p.BWGbps = 96 }), DefaultOptions, 0, nil, "", ""},
		{"a slow link and a slow ping-pong", mesh(hosts, nil), mesh(hosts, slowLink), DefaultOptions, 2, []string{"n1>n3 bw_avg_gbps", "n3>n2 lat_p50_us"}, "", ""},
		// The new job put the ranks on other nodes: matched by host.
		{"ranks on other nodes", mesh(hosts, nil), mesh([]string{"n3", "n1", "n2"}, slowLink), DefaultOptions, 2, []string{"n1>n3 bw_avg_gbps", "n3>n2 lat_p50_us"}, "", ""},
		{"one host for all ranks", mesh([]string{"h", "h", "h"}, nil), mesh([]string{"h", "h", "h"}, func(_, _ string, p *results.MeshPair) { p.BWGbps = 50 }), DefaultOptions, 6, nil, "matched by rank", ""},
		// n1's two directions, three metrics each.
		{"directions failed in the new mesh", mesh(hosts, nil), mesh(hosts, n1Failed), DefaultOptions, 6, nil, "", ""},
		{"failed directions allowed", mesh(hosts, nil), mesh(hosts, n1Failed), Options{Threshold: 0.05, Confidence: 0.95, AllowMissing: true}, 0, nil, "", ""},
		{"noise across directions", mesh(eight, nil), mesh(eight, slowLink), DefaultOptions, 2, []string{"n1>n3 bw_avg_gbps", "n3>n2 lat_p50_us"}, "", ""},
		// Every direction 10% slower: the median row says so.
		{"the whole fabric slower", mesh(eight, nil), mesh(eight, func(_, _ string, p *results.MeshPair) { p.BWGbps = 90 }), DefaultOptions, 57, nil, "", ""},
		{"nothing in common", mesh(hosts, nil), mesh([]string{"x", "y", "z"}, nil), DefaultOptions, 0, nil, "", "share no measured direction"},
		{"other sizes", mesh(hosts, nil), func() *results.Mesh { m := mesh(hosts, nil); m.BWSize = 65536; return m }(), DefaultOptions, 0, nil, "", "message sizes differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Meshes(tc.base, tc.cur, tc.o)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rep.Regressions != tc.regressions {
				t.Errorf("%d regressions, want %d: %+v", rep.Regressions, tc.regressions, rep.Rows)
			}
			var worse []string
			for _, r := range rep.Rows {
				if r.Verdict == Regression && tc.worse != nil {
					worse = append(worse, r.From+">"+r.To+" "+string(r.Metric))
				}
			}
			if tc.worse != nil && strings.Join(worse, ",") != strings.Join(tc.worse, ",") {
				t.Errorf("regressions %v, want %v", worse, tc.worse)
			}
			if tc.note != "" && !strings.Contains(strings.Join(rep.Notes, ";"), tc.note) {
				t.Errorf("notes %v, want %q", rep.Notes, tc.note)
			}
		})
	}
}

func TestMemoryNotes(t *testing.T) {
	zero, one := 0, 1
	host0 := &results.Memory{Kind: results.HostMemory, Nodes: "0"}
	host1 := &results.Memory{Kind: results.HostMemory, Nodes: "1", NodeAsked: &one}
	gpu := &results.Memory{Kind: results.GPUMemory, GPU: &zero, GPUPCI: "0000:3b:00.0", Registration: results.RegDmabuf}
	for _, tc := range []struct {
		name      string
		base, cur *results.Memory
		want      string
	}{
		{"same", host0, host0, ""},
		{"old baseline, host", nil, host0, ""},
		{"old baseline, gpu", nil, gpu, "memory differs: base host memory, new GPU 0 (0000:3b:00.0), dma-buf registration"},
		{"other node", host0, host1, "memory differs: base host memory, NUMA node 0, new host memory, NUMA node 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, c := bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {100}})
			b.Memory, c.Memory = tc.base, tc.cur
			rep, err := Runs(b, c, DefaultOptions)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(rep.Notes, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("notes %q, want %q", got, tc.want)
			}
		})
	}
}

// studentQ agrees with gonum where gonum is right, and with the normal
// quantile's expansion where gonum's tail is not.
func TestStudentQ(t *testing.T) {
	for _, tc := range []struct{ p, df, want float64 }{
		{0.975, 4, 2.776445105},
		{0.95, 8, 1.859548038},
		{1 - 1.67e-8, 991, 5.5668},      // gonum, still right there
		{1 - 1.67e-8, 999000, 5.522654}, // gonum 0.17 says 258
		{1 - 1.67e-5, 1e5, 4.149141},
	} {
		if got := studentQ(tc.p, tc.df); math.Abs(got-tc.want) > 1e-4*tc.want {
			t.Errorf("q(%g, %g df) = %v, want %v", tc.p, tc.df, got, tc.want)
		}
	}
}

// Verdicts and noises travel in JSON by name and come back the same.
func TestEnumNames(t *testing.T) {
	for v := Same; v <= OnlyNew; v++ {
		b, err := v.MarshalText()
		var back Verdict
		if err != nil || back.UnmarshalText(b) != nil || back != v || v.String() != string(b) {
			t.Errorf("verdict %d: %q %v, back %v", int(v), b, err, back)
		}
	}
	for n := NoNoise; n <= AcrossDirections; n++ {
		b, err := n.MarshalText()
		var back Noise
		if err != nil || back.UnmarshalText(b) != nil || back != n {
			t.Errorf("noise %d: %q %v, back %v", int(n), b, err, back)
		}
	}
	var v Verdict
	if _, err := Verdict(99).MarshalText(); err == nil || v.UnmarshalText([]byte("worse")) == nil {
		t.Error("an unknown verdict went through")
	}
}
