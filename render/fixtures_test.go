package render

import "github.com/rdmabench/rdmabench/results"

// Fixture runs cover every part of the text table: a bandwidth sweep over
// QP counts with every line under a row, a single-QP bandwidth run, and a
// latency run with an interrupted size, and a loopback latency run on GPU
// memory with loads (--load) and open-loop rates (--rate).
func fixtureRuns() map[string]*results.Run {
	bad := uint64(3)
	peerInline := 64
	bw := &results.Run{
		Test: results.WriteBW, Device: "mlx5_0", Port: 1, GIDIndex: 3, GID: "::ffff:198.18.0.1 RoCE v2", MTU: 4096,
		LinkLayer: "Ethernet", Transport: results.RC, Mode: "client", Peer: "node2:18515", TxDepth: 128, CQMod: 100,
		Inline: 0, InlineGranted: 16, PeerInline: &peerInline, Duration: 2, Interval: 1, QPs: []int{1, 4}, Threads: 2,
		CPUs: []int{0, 1}, PeerCPUs: []int{6, 7}, Notes: []string{"tx depth lowered to 64: max_cqe 32767"},
		Bidirectional: true, PostList: 4, Verify: true, Imm: true,
		Results: []results.Result{
			{Size: 65536, QPs: 1, Iterations: 100000, BWAvgGbps: 92.5, BWBurstGbps: 96.25, MsgRateMpps: 0.176,
				Bidir: &results.Bidir{SentGbps: 46.5, ReceivedGbps: 46}, CPU: &results.CPUUsage{Local: results.CPUFigure{UserPct: 99.5, SysPct: 0.5}, Remote: results.CPUFigure{UserPct: 98, SysPct: 1}},
				Intervals: []results.Interval{{StartS: 0, EndS: 1, Messages: 50000, Bytes: 50000 * 65536, Gbps: 26.2}}},
			{Size: 65536, QPs: 4, Iterations: 400000, BWAvgGbps: 97.1, BWBurstGbps: 98, MsgRateMpps: 0.185,
				PerQPGbps: []float64{24, 24.5, 24.3, 24.3}, Spread: &results.QPSpread{MinGbps: 24, MedianGbps: 24.3, MaxGbps: 24.5, Jain: 0.9999},
				BadBytes: &bad, Received: 399000, PortCounters: map[string]uint64{"rcvd_seq_err": 4, "duplicate_request": 1},
				PeerPortCounters: map[string]uint64{"out_of_seq_request": 2}},
		},
	}
	single := &results.Run{
		Test: results.SendBW, Device: "rxe0", Port: 1, GIDIndex: 1, GID: "::ffff:198.18.0.1 RoCE v2", MTU: 1024,
		LinkLayer: "Ethernet", Transport: results.UD, Mode: "loopback", TxDepth: 128, CQMod: 100, QPs: []int{1}, Threads: 1,
		PostList: 1, Results: []results.Result{
			{Size: 2, QPs: 1, Iterations: 5000, BWAvgGbps: 0.01, BWBurstGbps: 0.02, MsgRateMpps: 0.6, Received: 4990},
			{Size: 1024, QPs: 1, Iterations: 5000, BWAvgGbps: 3.2, BWBurstGbps: 3.4, MsgRateMpps: 0.39},
		},
		Error: "size 4096: transport retry counter exceeded (status 12)",
	}
	lat := &results.Run{
		Test: results.SendLat, Device: "mlx5_1", Port: 1, GIDIndex: -1, MTU: 4096, LinkLayer: "InfiniBand",
		Transport: results.RC, Mode: "client", Peer: "10.0.0.2:18515", TxDepth: 1, CQMod: 1, Inline: 236, Warmup: 100,
		Latency: results.LatencyMeaning(results.SendLat), QPs: []int{1}, Threads: 1, PostList: 1, Atomic: results.FetchAndAdd,
		Results: []results.Result{
			{Size: 8, QPs: 1, Iterations: 1000, Lat: &results.LatencyStats{Min: 1.01, P50: 1.1, P90: 1.2, P99: 1.5, P99_9: 2.5, P99_99: 7.25, Max: 9.5, Mean: 1.125, Stdev: 0.2}},
			{Size: 4096, QPs: 1, Iterations: 20, Partial: true, Lat: &results.LatencyStats{Min: 2, P50: 2.1, P90: 2.2, P99: 2.4, P99_9: 2.4, P99_99: 2.4, Max: 2.4, Mean: 2.1, Stdev: 0.1}},
		},
		Interrupted: true, Error: "interrupted after 2 of 2 measurements",
	}
	gpu := 0
	rate := &results.Run{
		Test: results.WriteLat, Device: "rxe0", Port: 1, GIDIndex: 1, GID: "::ffff:198.18.0.1 RoCE v2", MTU: 1024,
		LinkLayer: "Ethernet", Transport: results.RC, Mode: "loopback", Peer: "127.0.0.1:37023", TxDepth: 1, CQMod: 1, Warmup: 100,
		Latency: results.LatencyMeaning(results.WriteLat), RateLatency: "whole round trip: due time (or post) to the peer's reply seen",
		QPs: []int{1}, Threads: 1, PostList: 1,
		Memory:     &results.Memory{Kind: results.GPUMemory, GPU: &gpu, GPUPCI: "0000:17:00.0", Registration: results.RegDmabuf},
		PeerMemory: &results.Memory{Kind: results.HostMemory},
		Results: []results.Result{{
			Size: 64, QPs: 1, Iterations: 2000,
			Lat:      &results.LatencyStats{Min: 2, P50: 2.5, P90: 2.75, P99: 3, P99_9: 4, P99_99: 5, Max: 6, Mean: 2.5, Stdev: 0.25},
			Loaded:   &results.LatencyStats{Min: 3, P50: 4, P90: 5, P99: 8, P99_9: 12, P99_99: 16, Max: 20, Mean: 4.5, Stdev: 1},
			Loads:    []results.LoadFigures{{Load: "write_bw,65536,4", Test: results.WriteBW, Size: 65536, QPs: 4, Messages: 150000, Seconds: 0.5, Gbps: 80}, {Load: "read_bw,4096,1", Test: results.ReadBW, Size: 4096, QPs: 1, Messages: 10, Seconds: 0.01, TooShort: true}},
			RateIdle: &results.LatencyStats{Min: 4, P50: 5, P90: 5.5, P99: 6, P99_9: 8, P99_99: 10, Max: 12, Mean: 5, Stdev: 0.5},
			Rates: []results.RateSeries{
				{Rate: 1000, Achieved: 1000, Reached: true, Iterations: 1000, Lat: results.LatencyStats{Min: 4, P50: 5, P90: 6, P99: 7, P99_9: 8, P99_99: 9, Max: 10, Mean: 5.5, Stdev: 0.5}, Uncorrected: results.LatencyStats{Min: 4, P50: 5, P90: 6, P99: 6.5, P99_9: 8, P99_99: 9, Max: 10, Mean: 5.25, Stdev: 0.5}},
				{Rate: 100000, Achieved: 62500, Iterations: 62500, Knee: true, Lat: results.LatencyStats{Min: 5, P50: 250, P90: 400, P99: 500, P99_9: 600, P99_99: 700, Max: 800, Mean: 260, Stdev: 90}, Uncorrected: results.LatencyStats{Min: 5, P50: 8, P90: 12, P99: 20, P99_9: 30, P99_99: 40, Max: 50, Mean: 9, Stdev: 3}},
			},
		}},
	}
	return map[string]*results.Run{"bw": bw, "single": single, "lat": lat, "rate": rate}
}
