package render

import "github.com/rdmabench/rdmabench/results"

// Fixture runs cover every part of the text table: a bandwidth sweep over
// QP counts with every line under a row, a single-QP bandwidth run, and a
// latency run with an interrupted size.
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
	return map[string]*results.Run{"bw": bw, "single": single, "lat": lat}
}
