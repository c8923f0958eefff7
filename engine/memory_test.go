package engine

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	rbplan "github.com/rdmabench/rdmabench/plan"
	"github.com/rdmabench/rdmabench/verbs"
)

func TestMemorySpecValidate(t *testing.T) {
	one, big := 1, 1024
	for _, tc := range []struct {
		name      string
		mem, peer MemorySpec
		err       string
	}{
		{"host default", MemorySpec{}, MemorySpec{}, ""},
		{"gpu index", MemorySpec{GPU: "0"}, MemorySpec{}, ""},
		{"peer gpu bus id", MemorySpec{}, MemorySpec{GPU: "0000:3b:00.0", Dmabuf: true}, ""},
		{"node and huge pages", MemorySpec{Node: &one, HugePages: true}, MemorySpec{HugePages: true}, ""},
		{"bad gpu", MemorySpec{GPU: "gpu0"}, MemorySpec{}, "--use-cuda: GPU \"gpu0\""},
		{"dmabuf without gpu", MemorySpec{Dmabuf: true}, MemorySpec{}, "--use-dmabuf registers GPU memory"},
		{"node on gpu", MemorySpec{}, MemorySpec{GPU: "1", Node: &one}, "--peer-use-cuda: --mem-node and --hugepages place host memory"},
		{"huge pages on gpu", MemorySpec{GPU: "1", HugePages: true}, MemorySpec{}, "place host memory"},
		{"node out of range", MemorySpec{Node: &big}, MemorySpec{}, "NUMA node 1024 outside"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := rbplan.DefaultPlan(WriteBW)
			p.Memory, p.PeerMemory = tc.mem, tc.peer
			err := p.Validate()
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.err)
			}
		})
	}
}

// TestPlanMemoryOnTheWire: a plan on host memory leaves the fields out, so
// it reads as before --use-cuda; one with GPUs carries both sides'.
func TestPlanMemoryOnTheWire(t *testing.T) {
	b, err := json.Marshal(rbplan.DefaultPlan(WriteBW))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "memory") {
		t.Errorf("host-memory plan carries memory fields: %s", b)
	}
	p := rbplan.DefaultPlan(WriteBW)
	node := 0
	p.Memory, p.PeerMemory = MemorySpec{GPU: "1", Dmabuf: true}, MemorySpec{Node: &node}
	b, _ = json.Marshal(p)
	var back Plan
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Memory != p.Memory || back.PeerMemory.Node == nil || *back.PeerMemory.Node != 0 {
		t.Errorf("round trip: %+v %+v from %s", back.Memory, back.PeerMemory, b)
	}
}

// TestDeviceMemoryChoices: a GPU on either side makes the plan's verify
// pattern fixed and write-lat a WRITE_WITH_IMM ping-pong on both sides,
// with the receives that needs; host plans keep their loops.
func TestDeviceMemoryChoices(t *testing.T) {
	for _, tc := range []struct {
		test           Test
		mem, peer      string
		device, byComp bool
		recvs          int
	}{
		{WriteLat, "", "", false, false, 0},
		{WriteLat, "0", "", true, true, 2},
		{WriteLat, "", "0", true, true, 2},
		{SendLat, "0", "", true, false, 2},
		{WriteBW, "0", "", true, false, 0},
		{ReadLat, "", "1", true, false, 0},
	} {
		p := rbplan.DefaultPlan(tc.test)
		p.Memory.GPU, p.PeerMemory.GPU = tc.mem, tc.peer
		if p.DeviceMemory() != tc.device || p.WriteLatByCompletion() != tc.byComp {
			t.Errorf("%s %q/%q: device %v by completion %v", tc.test, tc.mem, tc.peer, p.DeviceMemory(), p.WriteLatByCompletion())
		}
		st := &step{plan: p}
		if got := st.latencyRecvs(); got != tc.recvs {
			t.Errorf("%s %q/%q: %d receives, want %d", tc.test, tc.mem, tc.peer, got, tc.recvs)
		}
		init, resp, _ := latencyKinds(p)
		if tc.byComp && (init != resp || opcodeFor(p) != verbs.OpWriteWithImm || !receives(p)) {
			t.Errorf("%s on GPU: loops %v/%v opcode %v", tc.test, init, resp, opcodeFor(p))
		}
	}
}

// TestRegistrationRemedies: each refusal gets the remedy its errno points to.
func TestRegistrationRemedies(t *testing.T) {
	verr := func(verb string, en syscall.Errno) error { return &verbs.VerbError{Verb: verb, Errno: en} }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{verr("ibv_reg_dmabuf_mr", syscall.EOPNOTSUPP), "mlx5_0 cannot import dma-buf"},
		{verr("ibv_reg_dmabuf_mr", syscall.ENOSYS), "cannot import dma-buf"},
		{verr("ibv_reg_dmabuf_mr", syscall.ENOMEM), "locked-memory limit"},
		{verr("ibv_reg_dmabuf_mr", syscall.EINVAL), "GPUDirect RDMA is allowed"},
	} {
		if got := dmabufRemedy(tc.err, "mlx5_0"); !strings.Contains(got, tc.want) {
			t.Errorf("dma-buf %v: %q, want %q", tc.err, got, tc.want)
		}
	}
	peer := "load nvidia_peermem"
	if peermemLoaded() {
		peer = "nvidia_peermem is loaded"
	}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{verr("ibv_reg_mr", syscall.EFAULT), peer},
		{verr("ibv_reg_mr", syscall.EINVAL), peer},
		{verr("ibv_reg_mr", syscall.ENOMEM), "locked-memory limit"},
	} {
		if got := peerMemoryRemedy(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("peer memory %v: %q, want %q", tc.err, got, tc.want)
		}
	}
}
