package compare

import (
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

func TestWelchInterval(t *testing.T) {
	// means 11 and 14, variances 1: se √(2/3), 4 degrees of freedom,
	// t(0.975, 4) = 2.776445.
	lo, hi := welchInterval([]float64{10, 11, 12}, []float64{13, 14, 15}, 0.95)
	half := 2.776445105 * math.Sqrt(2.0/3)
	if math.Abs(lo-(3-half)) > 1e-6 || math.Abs(hi-(3+half)) > 1e-6 {
		t.Errorf("interval [%v, %v], want 3 ± %v", lo, hi, half)
	}
}

func TestVerdicts(t *testing.T) {
	noisy := []float64{90, 100, 110, 95, 105}
	tests := []struct {
		name        string
		base, cur   *results.Run
		want        []Verdict // per row, in order
		noiseAware  bool
		regressions int
	}{
		{"same without repeats", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {97}}), []Verdict{Same}, false, 0},
		{"threshold regression", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {90}}), []Verdict{Regression}, false, 1},
		{"threshold improvement", bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {110}}), []Verdict{Improvement}, false, 0},
		// A 10% drop inside noise of ±10% is not a regression...
		{"inside the noise", bw(map[int][]float64{4096: noisy}), bw(map[int][]float64{4096: {80, 90, 100, 85, 95}}), []Verdict{Same}, true, 0},
		// ...but a 3% drop on quiet repeats is.
		{"outside quiet noise", bw(map[int][]float64{4096: {100, 100.2, 99.9, 100.1}}), bw(map[int][]float64{4096: {97, 97.1, 96.9, 97.2}}), []Verdict{Regression}, true, 1},
		{"latency up is a regression", lat([]float64{2, 2.01, 1.99}, []float64{5, 5.1, 4.9}), lat([]float64{2.5, 2.51, 2.49}, []float64{5, 5.05, 4.95}), []Verdict{Regression, Same}, true, 1},
		{"latency down is an improvement", lat([]float64{2}, []float64{5}), lat([]float64{1.5}, []float64{5}), []Verdict{Improvement, Same}, false, 0},
		{"sizes in one run only", bw(map[int][]float64{8: {1}, 4096: {100}}), bw(map[int][]float64{4096: {100}, 65536: {200}}), []Verdict{OnlyBase, Same, OnlyNew}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := Runs(tt.base, tt.cur, DefaultOptions)
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
				if r.Verdict != OnlyBase && r.Verdict != OnlyNew && r.NoiseAware != tt.noiseAware {
					t.Errorf("row %d noise-aware %v", i, r.NoiseAware)
				}
			}
			if rep.Regressions != tt.regressions {
				t.Errorf("%d regressions, want %d", rep.Regressions, tt.regressions)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	b := bw(map[int][]float64{4096: {100}})
	tests := []struct {
		name    string
		base    *results.Run
		cur     *results.Run
		o       Options
		wantErr string
	}{
		{"other test", b, lat([]float64{1}, []float64{2}), DefaultOptions, "the base ran write_bw and the new run send_lat"},
		{"no common size", b, bw(map[int][]float64{8: {1}}), DefaultOptions, "share no size"},
		{"bad threshold", b, b, Options{Threshold: 0, Confidence: 0.95}, "threshold"},
		{"bad confidence", b, b, Options{Threshold: 0.05, Confidence: 1}, "confidence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Runs(tt.base, tt.cur, tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestNotes(t *testing.T) {
	b, c := bw(map[int][]float64{4096: {100}}), bw(map[int][]float64{4096: {100}})
	c.Device, c.Error = "mlx5_1", "size 8192: server: gone"
	rep, err := Runs(b, c, DefaultOptions)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(rep.Notes, "\n")
	if !strings.Contains(got, "device differs: base mlx5_0, new mlx5_1") || !strings.Contains(got, "the new run ended with an error") {
		t.Errorf("notes %q", got)
	}
}

// mesh makes a 3-rank mesh on the hosts given (by rank): every direction
// 100 Gb/s and 2 us, changed by f.
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
	slowLink := func(from, to string, p *results.MeshPair) {
		if from == "n1" && to == "n3" {
			p.BWGbps = 80
		}
		if from == "n3" && to == "n2" {
			p.LatP50us = 3
		}
	}
	for _, tc := range []struct {
		name        string
		base, cur   *results.Mesh
		regressions int
		worse       []string // "from>to metric"
		note        string
		err         string
	}{
		{"same", mesh(hosts, nil), mesh(hosts, nil), 0, nil, "", ""},
		{"within the threshold", mesh(hosts, nil), mesh(hosts, func(_, _ string, p *results.MeshPair) { p.BWGbps = 96 }), 0, nil, "", ""},
		{"a slow link and a slow ping-pong", mesh(hosts, nil), mesh(hosts, slowLink), 2, []string{"n1>n3 bw_avg_gbps", "n3>n2 lat_p50_us"}, "", ""},
		// The new job put the ranks on other nodes: matched by host.
		{"ranks on other nodes", mesh(hosts, nil), mesh([]string{"n3", "n1", "n2"}, slowLink), 2, []string{"n1>n3 bw_avg_gbps", "n3>n2 lat_p50_us"}, "", ""},
		{"one host for all ranks", mesh([]string{"h", "h", "h"}, nil), mesh([]string{"h", "h", "h"}, func(_, _ string, p *results.MeshPair) { p.BWGbps = 50 }), 6, nil, "matched by rank", ""},
		{"a direction failed in the new mesh", mesh(hosts, nil), mesh(hosts, func(f, to string, p *results.MeshPair) {
			if f == "n1" {
				p.Error = "rank 0 left the mesh"
			}
		}), 0, nil, "", ""},
		{"nothing in common", mesh(hosts, nil), mesh([]string{"x", "y", "z"}, nil), 0, nil, "", "share no measured direction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Meshes(tc.base, tc.cur, DefaultOptions)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
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
