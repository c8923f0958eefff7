package ncclog

import (
	"slices"
	"strings"
	"testing"
)

// logClass is one misreading of logs that nobody here wrote; the lines
// are from the public issue named, unless marked synthetic.
type logClass struct {
	name, log string
	check     func(*Report) string // "" when right, else what is wrong
}

func errKinds(r *Report) []string {
	var out []string
	for _, e := range r.Analysis.Errors {
		out = append(out, string(e.Kind))
	}
	return out
}

func hasErr(kind ErrorKind, meaning string) func(*Report) string {
	return func(r *Report) string {
		for _, e := range r.Analysis.Errors {
			if e.Kind == kind && strings.Contains(e.Meaning, meaning) {
				return ""
			}
		}
		return "errors " + strings.Join(errKinds(r), ",") + ", want " + string(kind) + " meaning " + meaning
	}
}

func overallIs(network Network, transport string, fallback bool) func(*Report) string {
	return func(r *Report) string {
		a := r.Analysis
		if a.Network != network || a.Transport != transport || a.SocketFallback != fallback {
			return "network " + string(a.Network) + " transport " + a.Transport + " fallback " + map[bool]string{true: "yes", false: "no"}[a.SocketFallback]
		}
		return ""
	}
}

func findingHas(s string) func(*Report) string {
	return func(r *Report) string {
		if slices.ContainsFunc(r.Analysis.Findings, func(f string) bool { return strings.Contains(f, s) }) {
			return ""
		}
		return "findings " + strings.Join(r.Analysis.Findings, " | ")
	}
}

var logClasses = []logClass{
	{name: "device fatal async event, NCCL 2.4 under mpirun's timestamped prefix (nccl#230)",
		log:   "2019-06-02T16:13:44.884Z: [1,12]<stdout>:container-e275-1553839402050-12124-01-000057:815:864 [0] transport/net_ib.cu:80 NCCL WARN NET/IB : Got async event : local catastrophic error\n",
		check: hasErr(ErrAsyncEvent, "the HCA itself failed")},
	{name: "QP access async event with the device named, NCCL 2.20 (nccl#1524)",
		log:   "ubuntu20-server-2:94639:94647 [0] transport/net_ib.cc:100 NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work queue error\n",
		check: hasErr(ErrAsyncEvent, "mlx5_0:1: the QP touched memory")},
	{name: "async fatal event on QP, NCCL 2.25 (nccl#1919)",
		log:   "node-0:139577:139678 [0] transport/net_ib.cc:154 NCCL WARN NET/IB : mlx5_1:1 async fatal event on QP (0x7309dc3bb338): invalid request local work queue error\n",
		check: hasErr(ErrAsyncEvent, "mlx5_1:1: the QP's responder got a request")},
	{name: "async fatal event behind a log shipper's two timestamps (nccl#1905)",
		log:   "2025-11-09 15:39:31.043 +08:00 [2025-11-09 07:39:30] h100-28:238:1219 [0] transport/net_ib.cc:180 NCCL WARN NET/IB : mlx5_ib0:1 async fatal event on QP (0x7f69f01519a8): local access violation work queue error\n",
		check: hasErr(ErrAsyncEvent, "mlx5_ib0:1: the QP touched memory")},
	{name: "async event quoted in markdown with autolinked file names (nccl#1710)",
		log: "> node201:127799:127863 [0] transport/[net_ib.cc:101](http://net_ib.cc:101/) NCCL WARN NET/IB : mlx5_0:1 Got async event : local access violation work queue error\n" +
			"> node023:10214:10303 [0] transport/[net_ib.cc:1909](http://net_ib.cc:1909/) NCCL WARN NET/IB : Got completion from peer [10.1.3.201](http://10.1.3.201/)<33057> with status=9 opcode=0 len=0 vendor err 138 (Send) localGid ::ffff:[10.206.1.23](http://10.206.1.23/) remoteGids::ffff:[10.206.1.11](http://10.206.1.11/)\n",
		check: func(r *Report) string {
			var got []string
			for _, e := range r.Analysis.Errors {
				got = append(got, e.Host+" "+string(e.Kind)+" "+e.Meaning)
			}
			want := []string{"node023 completion IBV_WC_REM_INV_REQ_ERR: remote invalid request: the peer rejected the request (peer 10.1.3.201<33057>)", // hosts in order
				"node201 async_event mlx5_0:1: the QP touched memory"}
			if len(got) != len(want) {
				return strings.Join(got, " | ")
			}
			for i := range want {
				if !strings.HasPrefix(got[i], want[i]) {
					return strings.Join(got, " | ")
				}
			}
			return ""
		}},
	{name: "a non-fatal async event is not an error (NCCL 2.30's format, synthetic)",
		log: "node1:1:2 [0] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async event: SM change(14)\n",
		check: func(r *Report) string {
			if len(r.Analysis.Errors) != 0 {
				return "errors " + strings.Join(errKinds(r), ",") + ", want none"
			}
			return ""
		}},
	{name: "port error async event, NCCL 2.30's format (synthetic)",
		log:   "node1:1:2 [0] transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_3:1 Got non-fatal async event: port error(10)\n",
		check: hasErr(ErrAsyncEvent, "mlx5_3:1: the port left ACTIVE")},
	{name: "socket closed (nccl-tests#166)",
		log:   "gpu004:2200689:2200706 [3] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer gpu004.ds-a4-r02.abc.com<55693>\n",
		check: hasErr(ErrSocketClosed, "a peer closed its connection")},
	{name: "proxy connect (nccl-tests#188)",
		log:   "user:16901:16967 [2] proxy.cc:1519 NCCL WARN [Proxy Service 2] Failed to execute operation Connect from rank 2, retcode 3\n",
		check: hasErr(ErrProxyConnect, "proxy")},
	{name: "CUDA out of memory (synthetic line in NCCL's format)",
		log:   "n1:10:20 [0] include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'\n",
		check: hasErr(ErrCUDAOOM, "out of GPU memory")},
	{name: "ibv_create_qp (nccl#562)",
		log:   "hai-a100-3:3778851:3779883 [4] ibvwrap.c:130 NCCL WARN Call to ibv_create_qp failed\n",
		check: hasErr(ErrVerbsCall, "refused a queue")},
	{name: "ibv_create_cq (nccl#380)",
		log:   "spark01:2683:2826 [0] misc/ibvwrap.cc:268 NCCL WARN Call to ibv_create_cq failed\n",
		check: hasErr(ErrVerbsCall, "refused a queue")},
	{name: "OFI warning (aws-ofi-nccl#24)",
		log:   "[1,23]<stdout>:ip-172-32-45-165:72593:73427 [7] create_nccl_ofi_component:459 NCCL WARN NET/OFI Couldn't open AV. RC: -22, ERROR: Invalid argument\n",
		check: hasErr(ErrNetPlugin, "OFI plugin")},
	{name: "Using network Socket, nodes not shown (synthetic)",
		log:   "h:1:2 [0] NCCL INFO Using network Socket\n",
		check: overallIs("Socket", "socket", true)},
	{name: "network from channel lines (nv_peer_memory#56 style, synthetic)",
		log:   "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n",
		check: overallIs("IB", "ib", false)},
	{name: "network from IBext channel lines (synthetic)",
		log:   "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IBext/0/GDRDMA\n",
		check: overallIs("IB", "ib", false)},
	{name: "log shipper's timestamp glued to the host (aws-ofi-nccl#889)",
		log: "  | 2025-05-16T16:39:51.208-07:00 | ip-10-36-29-253:79:79 [0] NCCL INFO cudaDriverVersion 12040\n" +
			"  | 2025-05-16T16:39:51.208-07:00ip-10-36-29-253:79:79 [0] NCCL INFO Bootstrap : Using eth0:10.36.29.253<0> | ip-10-36-29-253:79:79 [0] NCCL INFO Bootstrap : Using eth0:10.36.29.253<0>\n",
		check: func(r *Report) string {
			if strings.Join(r.Hosts, ",") != "ip-10-36-29-253" || r.Analysis.Hosts[0].Bootstrap != "eth0:10.36.29.253<0>" {
				return "hosts " + strings.Join(r.Hosts, ",")
			}
			return ""
		}},
	{name: "excerpt without the NCCL prefix (synthetic)",
		log:   "Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0\nChannel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0\n",
		check: overallIs("Socket", "socket", true)},
	{name: "anonymised <cluster_name> host (nccl#952)",
		log: "<cluster_name>:925:925 [6] NCCL INFO Bootstrap : Using ibp12s0:10.149.0.32<0>\n" +
			"<cluster_name>:924:1152 [5] NCCL INFO NET/IB : No device found.\n",
		check: func(r *Report) string {
			if strings.Join(r.Hosts, ",") != "<cluster_name>" {
				return "hosts " + strings.Join(r.Hosts, ",")
			}
			return ""
		}},
	{name: "no DMA-BUF remedy for NCCL 2.7 (nccl#380)",
		log: "NCCL version 2.7.8+cuda11.0\n" +
			"spark01:2683:2826 [0] NCCL INFO Channel 00 : 0[3000] -> 1[3000] [send] via NET/IB/0\n",
		check: func(r *Report) string {
			if f := findingHas("predates DMA-BUF support")(r); f != "" {
				return f
			}
			if slices.ContainsFunc(r.Analysis.Findings, func(f string) bool { return strings.Contains(f, "or DMA-BUF") }) {
				return "offers DMA-BUF to NCCL 2.7"
			}
			return ""
		}},
	{name: "excerpt that ends after Init START (synthetic)",
		log:   "h:1:2 [0] NCCL INFO comm 0x5f2 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x1 - Init START\n",
		check: findingHas("no Init COMPLETE line in this log")},
	{name: "NCCL_IB_DISABLE=1 is Socket (synthetic)",
		log:   "h:1:2 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.\n",
		check: overallIs("Socket", "socket", true)},
	{name: "2.4 IB log: NET/Socket : Using is the bootstrap (nv_peer_memory#56)",
		log: "master_node:20:289 [0] NCCL INFO NET/Socket : Using [0]ib0:192.168.11.1<0>\n" +
			"master_node:20:289 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n" +
			"master_node:20:289 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:192.168.11.1<0>\n" +
			"NCCL version 2.4.7+cuda10.0\n" +
			"secondary_node:44:311 [3] NCCL INFO NET/Socket : Using [0]ib0:192.168.11.2<0>\n",
		// The excerpt shows nothing of secondary_node's network: unknown,
		// not Socket; the job's transport is master_node's, as its network
		// is (a host that says nothing does not make it unknown).
		check: func(r *Report) string {
			for _, h := range r.Analysis.Hosts {
				if h.SocketFallback || h.Network == NetSocket || (h.Host == "master_node" && h.Transport != "ib") {
					return h.Host + ": network " + string(h.Network) + " transport " + h.Transport
				}
			}
			return overallIs("IB", "ib", false)(r)
		}},
	{name: "RoCE behind the IBext plugin (synthetic NET/IBext line)",
		log: "h:1:2 [0] NCCL INFO NET/IBext : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n" +
			"h:1:2 [0] NCCL INFO Using network IBext\n",
		check: overallIs("IB", "roce", false)},
	{name: "2.19+ GPUDirect RDMA disabled per HCA, no GPU named (nccl#1537)",
		log: "hostname1:25668:27396 [0] NCCL INFO Using network IB\n" +
			"hostname1:25668:27396 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n",
		check: func(r *Report) string {
			if r.Analysis.GDR != "no" {
				return "gdr " + r.Analysis.GDR
			}
			return findingHas("no GPUDirect RDMA")(r)
		}},
	{name: "NCCL 2.4 names the transport in its NIC distance line (nccl#226)",
		log: "ip-172-31-10-149:45381:45386 [0] NCCL INFO CUDA Dev 0[0], Socket NIC distance :  PHB\n" +
			"ip-172-31-7-227:45354:45359 [0] NCCL INFO CUDA Dev 0[0], Socket NIC distance :  PHB\n",
		check: overallIs("Socket", "socket", true)},
	{name: "SHARP group create failed (nccl#1219)",
		log:   "node:174:4368 [3] sharp_plugin.c:354 NCCL WARN SHARP group create: Streaming Tree lock failed (-18)\n",
		check: hasErr(ErrCollNetPlugin, "SHARP")},
	{name: "CollNet refused is not a plugin failure (nccl-tests#133)",
		log: "nodea:26799:27025 [0] graph/tuning.cc:187 NCCL WARN CollNet is not supported or fails to initialize, ignoring NCCL_ALGO=COLLNET\n",
		check: func(r *Report) string {
			if len(r.Analysis.Errors) > 0 {
				return "errors " + strings.Join(errKinds(r), ",")
			}
			return ""
		}},
	{name: "a host that only loads its plugin leaves the job's transport (nccl#1357)",
		log: "qh100-gpu19:49357:49418 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB/SHARP [1]mlx5_1:1/IB/SHARP [RO]; OOB ibp25s0:10.20.0.119<0>\n" +
			"qh100-gpu19:49357:49418 [3] NCCL INFO Using network IBext\n" +
			"qh100-gpu20:39629:39686 [0] NCCL INFO NET/Plugin: Loaded collnet plugin SHARP (v6)\n",
		check: overallIs("IB", "ib", false)},
	{name: "completion status=12 without a name (nccl#1814)",
		log:   "hostname-test:984:1100 [4] NCCL WARN NET/IB : Got completion from peer xxx.xxx.xxx.xxx<55921> with status=12 opcode=1 len=0 vendor err 129 (Send) localGid ::ffff:29.87.4.221 remoteGids::ffff:29.87.88.182\n",
		check: hasErr(ErrCompletion, "IBV_WC_RETRY_EXC_ERR")},
}

func TestLogClasses(t *testing.T) {
	for _, c := range logClasses {
		t.Run(c.name, func(t *testing.T) {
			r, err := Parse(strings.NewReader(c.log))
			if err != nil {
				t.Fatal(err)
			}
			if msg := c.check(r); msg != "" {
				t.Error(msg)
			}
		})
	}
}
