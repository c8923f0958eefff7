package engine

import (
	"fmt"
	"math/rand/v2"

	"github.com/rdmabench/rdmabench/csrc"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/verbs"
)

// DeviceConfig says which device, port and GID a side uses.
type DeviceConfig struct {
	Device   string // "" picks the first device
	Port     int    // from 1
	GIDIndex int    // -1 picks the default (RoCE v2 IPv4 on Ethernet)
	CPUs     []int  // threads are pinned to these, in turn; nil: the NIC's NUMA node
}

// lane is one thread's completion queues. With a shared CQ every lane has
// the same ones.
type lane struct {
	sendCQ, recvCQ *verbs.CQ
}

// side is one end of a connection: the device, the QPs (QP i belongs to lane
// i % lanes) and one registered buffer. Each QP has a [send | recv] region
// pair; bandwidth tests without --verify let all QPs share the first pair.
// The peer writes into and reads from recv regions; sends go from send ones.
type side struct {
	ctx       *verbs.Context
	pd        *verbs.PD
	lanes     []lane
	qps       []*verbs.QP
	ahs       []*verbs.AH // UD: the peer's QP for each of ours
	buf       *verbs.Buffer
	mr        *verbs.MR
	region    int // bytes in one region
	perQP     bool
	slots     int // --verify: message slots per region
	stride    int // bytes between slots
	port      int
	gidIndex  int
	gidDesc   string
	activeMTU int
	linkLayer string
	psns      []uint32
	inline    int
	// recvPosted counts the receives each QP has posted: loops repost every
	// one they consume, so what a loop leaves the next one finds.
	recvPosted []int
	cpus       []int
}

// accessFor is the MR and QP access a test needs, and no more.
func accessFor(t Test) verbs.Access {
	a := verbs.AccessLocalWrite
	switch t.Op() {
	case "write":
		a |= verbs.AccessRemoteWrite
	case "read":
		a |= verbs.AccessRemoteRead
	case "atomic":
		a |= verbs.AccessRemoteAtomic
	}
	return a
}

func qpType(transport string) verbs.QPType {
	switch transport {
	case "UC":
		return verbs.UC
	case "UD":
		return verbs.UD
	}
	return verbs.RC
}

// udGRH is the room UD receives need for the GRH in front of the payload.
const udGRH = 40

// verifyBytes bounds the memory --verify's message slots take per region.
const verifyBytes = 32 << 20

func openSide(dc DeviceConfig, plan Plan) (*side, error) {
	name := dc.Device
	if name == "" {
		names, err := verbs.DeviceNames()
		if err != nil {
			return nil, fmt.Errorf("list RDMA devices: %w", err)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("no RDMA devices found")
		}
		name = names[0]
	}
	s := &side{port: dc.Port, gidIndex: dc.GIDIndex}
	opened := false
	defer func() {
		if !opened {
			s.Close() // whatever was made before the failure
		}
	}()
	if s.port == 0 {
		s.port = 1
	}
	var err error
	if s.ctx, err = verbs.Open(name); err != nil {
		return nil, err
	}
	pa, err := s.ctx.QueryPort(s.port)
	if err != nil {
		return nil, err
	}
	if pa.State != "ACTIVE" {
		return nil, fmt.Errorf("%s port %d is %s, not ACTIVE", name, s.port, pa.State)
	}
	s.activeMTU, s.linkLayer = int(pa.ActiveMTU), pa.LinkLayer
	if s.gidIndex < 0 {
		if s.gidIndex, s.gidDesc, err = s.ctx.DefaultGIDIndex(s.port); err != nil {
			return nil, err
		}
	} else {
		s.gidDesc = fmt.Sprintf("gid %d (given)", s.gidIndex)
		if gids, err := s.ctx.GIDTable(s.port); err == nil {
			for _, g := range gids {
				if g.Index == s.gidIndex {
					s.gidDesc = rdmasys.DescribeGID(g)
				}
			}
		}
	}
	s.cpus = dc.CPUs
	if s.cpus == nil {
		s.cpus = nicCPUs(name)
	}
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return nil, err
	}
	if err := s.createQPs(plan); err != nil {
		return nil, err
	}
	if err := s.allocMemory(plan); err != nil {
		return nil, err
	}
	opened = true
	return s, nil
}

func (s *side) createQPs(plan Plan) error {
	nqp, threads := plan.MaxQPs(), min(plan.Threads, plan.MaxQPs())
	if plan.Test.IsLatency() {
		threads = nqp // one ping-pong per QP, each on its own thread
	}
	depth := max(plan.TxDepth, plan.RxDepth) + 8
	perLane := (nqp + threads - 1) / threads
	cqe := perLane * (depth + 8)
	if plan.SharedCQ {
		cqe = nqp * (depth + 8)
	}
	for t := 0; t < threads; t++ {
		if plan.SharedCQ && t > 0 {
			s.lanes = append(s.lanes, s.lanes[0])
			continue
		}
		var l lane
		var err error
		if l.sendCQ, err = s.ctx.CreateCQ(cqe); err != nil {
			return err
		}
		if l.recvCQ, err = s.ctx.CreateCQ(cqe); err != nil {
			return err
		}
		s.lanes = append(s.lanes, l)
	}
	for i := 0; i < nqp; i++ {
		l := s.lanes[i%len(s.lanes)]
		// Latency loops poll one CQ for both directions.
		recvCQ := l.recvCQ
		if plan.Test.IsLatency() {
			recvCQ = l.sendCQ
		}
		spec := verbs.QPSpec{Type: qpType(plan.Transport), SendCQ: l.sendCQ, RecvCQ: recvCQ,
			MaxSendWR: depth, MaxRecvWR: depth, MaxInline: plan.Inline}
		qp, err := s.pd.CreateQP(spec)
		if err != nil {
			return fmt.Errorf("QP %d of %d: %w", i+1, nqp, err)
		}
		s.qps = append(s.qps, qp)
		s.psns = append(s.psns, rand.Uint32()&0xffffff)
		s.recvPosted = append(s.recvPosted, 0)
	}
	s.inline = s.qps[0].MaxInline()
	return nil
}

func (s *side) allocMemory(plan Plan) error {
	size := plan.MaxSize()
	if plan.Transport == "UD" {
		size += udGRH
	}
	s.slots, s.stride = 1, (size+63)&^63
	if plan.Verify {
		s.slots = max(1, min(max(plan.TxDepth, plan.RxDepth), verifyBytes/s.stride))
	}
	s.region = (s.slots*s.stride + 4095) &^ 4095
	s.perQP = plan.Test.IsLatency() || plan.Verify
	pairs := 1
	if s.perQP {
		pairs = len(s.qps)
	}
	var err error
	if s.buf, err = verbs.AllocBuffer(2 * s.region * pairs); err != nil {
		return err
	}
	s.mr, err = s.pd.RegisterMR(s.buf, accessFor(plan.Test))
	return err
}

// pairOffset is where QP i's region pair starts in the buffer.
func (s *side) pairOffset(i int) int {
	if !s.perQP {
		return 0
	}
	return 2 * s.region * i
}

func (s *side) sendAddr(i int) uint64 { return s.mr.Addr() + uint64(s.pairOffset(i)) }
func (s *side) recvAddr(i int) uint64 { return s.sendAddr(i) + uint64(s.region) }

// sendRegion and recvRegion are QP i's regions as Go memory.
func (s *side) sendRegion(i int) []byte {
	o := s.pairOffset(i)
	return s.buf.Bytes()[o : o+s.region]
}

func (s *side) recvRegion(i int) []byte {
	o := s.pairOffset(i) + s.region
	return s.buf.Bytes()[o : o+s.region]
}

// endpoints are what this side tells the peer, one per QP.
func (s *side) endpoints() ([]Endpoint, error) {
	var eps []Endpoint
	for i, qp := range s.qps {
		ep, err := s.ctx.LocalEndpoint(qp, s.port, s.gidIndex, s.psns[i])
		if err != nil {
			return nil, err
		}
		eps = append(eps, Endpoint{QPN: ep.QPN, PSN: ep.PSN, LID: ep.LID, GID: ep.GID, MTU: int(ep.MTU),
			Addr: s.recvAddr(i), RKey: s.mr.RKey(), BufSize: uint64(s.region)})
	}
	return eps, nil
}

// pathMTU is the MTU both sides use: the plan's, else the smaller active MTU.
func pathMTU(plan Plan, local, remote int) int {
	if plan.MTU != 0 {
		return plan.MTU
	}
	return min(local, remote)
}

// connect brings every QP to RTS towards its peer QP (UD: RTS, and an
// address handle towards the peer's QP).
func (s *side) connect(remote []Endpoint, plan Plan) error {
	if len(remote) != len(s.qps) {
		return fmt.Errorf("peer offers %d QPs, the plan needs %d", len(remote), len(s.qps))
	}
	for i, ep := range remote {
		if err := ep.validate(); err != nil {
			return fmt.Errorf("peer endpoint %d: %w", i, err)
		}
		if ep.BufSize < uint64(plan.MaxSize()) {
			return fmt.Errorf("peer buffer of %d bytes is smaller than the largest message %d", ep.BufSize, plan.MaxSize())
		}
	}
	mtu := pathMTU(plan, s.activeMTU, remote[0].MTU)
	if plan.Transport == "UD" && plan.MaxSize() > mtu {
		return fmt.Errorf("UD messages must fit one packet: %d bytes exceed the path MTU %d (use -s %d or less)", plan.MaxSize(), mtu, mtu)
	}
	for i, qp := range s.qps {
		o := verbs.DefaultConnectOptions(s.port, s.gidIndex)
		o.Access = accessFor(plan.Test)
		o.MTU = verbs.MTU(mtu)
		o.LocalPSN = s.psns[i]
		o.ServiceLevel, o.TrafficClass = uint8(plan.SL), uint8(plan.TC)
		// Receivers not keeping up is normal in send tests: retry RNR forever
		// (7), as perftest does; our own deadlines bound the wait.
		o.RNRRetry = 7
		r := remote[i]
		if err := qp.Connect(verbs.Endpoint{QPN: r.QPN, PSN: r.PSN, LID: r.LID, GID: r.GID, MTU: o.MTU}, o); err != nil {
			return err
		}
		if plan.Transport == "UD" {
			ah, err := s.pd.CreateAH(verbs.Endpoint{QPN: r.QPN, LID: r.LID, GID: r.GID}, s.port, s.gidIndex)
			if err != nil {
				return err
			}
			s.ahs = append(s.ahs, ah)
		}
	}
	return nil
}

// targets describes QPs idx to the loops.
func (s *side) targets(idx []int, remote []Endpoint) []csrc.Target {
	var ts []csrc.Target
	for _, i := range idx {
		t := csrc.Target{
			QP: s.qps[i], LocalAddr: s.sendAddr(i), LKey: s.mr.LKey(),
			RemoteAddr: remote[i].Addr, RKey: remote[i].RKey,
			RecvAddr: s.recvAddr(i), RecvLKey: s.mr.LKey(), RecvLen: uint32(s.stride),
		}
		if s.ahs != nil {
			t.AH, t.RemoteQPN = s.ahs[i], remote[i].QPN
		}
		ts = append(ts, t)
	}
	return ts
}

// Close releases everything; the device last.
func (s *side) Close() {
	if s.buf != nil {
		s.buf.Close()
	}
	if s.ctx != nil {
		s.ctx.Close()
	}
}
