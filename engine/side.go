package engine

import (
	"fmt"
	"github.com/rdmabench/rdmabench/proto"
	"io"
	"math/rand/v2"
	"sync"

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
	// Warnings receives one line per problem that does not stop the run (a
	// thread that could not be pinned); nil discards.
	Warnings io.Writer
	// Kept, if set, keeps the device and registered buffers open across
	// the plans that share it (a mesh rank's tasks): a side takes its
	// device and a buffer from it and gives the buffer back.
	Kept    *Kept
	fromEnd bool // a server: take the NIC node's CPUs from the end
}

// lane is one thread's completion queues. With a shared CQ every lane has
// the same ones.
type lane struct {
	sendCQ, recvCQ *verbs.CQ
}

// side is one end of a connection: the device, the QPs (QP i belongs to lane
// i % lanes) and one registered buffer. Each QP has a [send | recv] region
// pair; bandwidth tests without --verify let the QPs of a lane share one
// (memoryLayout). The peer writes into and reads from recv regions; sends
// go from send ones.
type side struct {
	ctx       *verbs.Context
	pd        *verbs.PD
	lanes     []lane
	qps       []*verbs.QP
	ahs       []*verbs.AH // UD: the peer's QP for each of ours
	mem       *sideMemory
	mr        *verbs.MR
	region    int // bytes in one region
	pairs     int // region pairs: QP i uses pair i % pairs
	slots     int // --verify: message slots per region
	stride    int // bytes between slots
	port      int
	gidIndex  int
	gidDesc   string
	activeMTU int
	linkLayer rdmasys.LinkLayer
	psns      []uint32
	// inline is the inline size used: the smaller of the plan's and what the
	// device granted (rxe grants 16 B when asked for 0, mlx5 rounds up).
	inline        int
	inlineGranted int
	attr          verbs.DeviceAttr
	// txDepth and rxDepth are the plan's depths, lowered where the CQs could
	// not hold them (max_cqe); notes say why.
	txDepth, rxDepth int
	notes            []string
	// recvPosted counts the receives each QP has posted: loops repost every
	// one they consume, so what a loop leaves the next one finds.
	recvPosted []int
	cpus       []int
	warnings   io.Writer
	warnMu     sync.Mutex
	warned     map[string]bool
	// kept is where the device and buffer came from, when a Kept lent
	// them: Close then gives the buffer back and leaves the device open.
	kept    *Kept
	keptDev *keptDevice
	keptMem *keptMemory
	// shape is what the QPs, CQs and buffer were made to hold, path what
	// they were opened and connected for: the next plan of a session
	// that fits both runs on them (reuse.go). memNotes are the buffer's
	// notes, which a plan that reuses it repeats.
	shape    sideShape
	path     pathKey
	memNotes []string
}

// warnf writes a warning once per distinct text.
func (s *side) warnf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	s.warnMu.Lock()
	defer s.warnMu.Unlock()
	if s.warnings == nil || s.warned[msg] {
		return
	}
	if s.warned == nil {
		s.warned = map[string]bool{}
	}
	s.warned[msg] = true
	fmt.Fprintf(s.warnings, "rdmabench: warning: %s\n", msg)
}

// accessFor is the MR and QP access a test needs, and no more.
func accessFor(t Test) verbs.Access {
	a := verbs.AccessLocalWrite
	switch t.Op() {
	case OpWrite:
		a |= verbs.AccessRemoteWrite
	case OpRead:
		a |= verbs.AccessRemoteRead
	case OpAtomic:
		a |= verbs.AccessRemoteAtomic
	}
	return a
}

func qpType(transport Transport) verbs.QPType {
	switch transport {
	case UC:
		return verbs.UC
	case UD:
		return verbs.UD
	}
	return verbs.RC
}

// udGRH is the room UD receives need for the GRH in front of the payload.
const udGRH = 40

// verifyBytes bounds the memory --verify's message slots take per region.
const verifyBytes = 32 << 20

// openSide opens the device and sets up QPs and memory for a plan, and
// for those of also that can share them (ClientConfig.Also); mem is this
// side's memory (the plan's Memory for the client, PeerMemory for the
// server).
func openSide(dc DeviceConfig, plan Plan, also []Plan, mem MemorySpec) (*side, error) {
	name := dc.Device
	if name == "" {
		var err error
		if name, err = verbs.DefaultDevice(); err != nil {
			return nil, err
		}
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
	kept := dc.Kept
	if plan.Verify {
		// --verify judges what lands in the buffer: one an earlier plan
		// used still holds that plan's messages.
		kept = nil
	}
	if err := s.openDevice(name, kept); err != nil {
		return nil, err
	}
	pa, err := s.ctx.QueryPort(s.port)
	if err != nil {
		return nil, err
	}
	if pa.State != rdmasys.PortActive {
		return nil, fmt.Errorf("%s port %d is %s, not ACTIVE", name, s.port, pa.State)
	}
	s.activeMTU, s.linkLayer = pa.ActiveMTU, pa.LinkLayer
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
	s.warnings = dc.Warnings
	if s.cpus, err = s.loopCPUs(dc, name, plan); err != nil {
		return nil, err
	}
	s.shape, s.path = widen(dc, plan, also, s.attr.MaxCQE, dc.fromEnd), pathFor(dc, plan, mem)
	if err := s.createQPs(plan); err != nil {
		return nil, err
	}
	qpsCreated[btoi(dc.fromEnd)].Add(int64(len(s.qps)))
	if err := s.allocMemory(plan, mem); err != nil {
		return nil, err
	}
	opened = true
	return s, nil
}

// loopThreads is how many threads run loops on a side at once: one per
// lane, twice that when -b runs receive loops beside the initiators.
func loopThreads(plan Plan) int {
	lanes := min(plan.Threads, plan.MaxQPs())
	if plan.Test.IsLatency() {
		return plan.MaxQPs() // one ping-pong per QP, each on its own thread
	}
	if plan.Bidirectional && receives(plan) {
		return 2 * lanes
	}
	return lanes
}

// cqShape is how a side's CQs are sized: completions each QP can have
// outstanding on the send and the receive CQ, and the QPs one CQ serves.
type cqShape struct {
	qpsPerCQ      int
	sendPerQP     int
	recvPerQP     int
	latencyOneCQ  bool // latency loops poll one CQ for both directions
	receivesPerQP int  // receives kept posted per QP (0: none)
	maxCQE        int
	txDepth       int
	rxDepth       int
	cappedTx      bool
	cappedRx      bool
}

// shapeCQs sizes the CQs for a plan and lowers the depths where the device's
// max_cqe cannot hold them: a CQ of QPs × depth entries fails to be created
// (rxe: max_cqe 32767, so -q 512 with -r 512 could not run).
func shapeCQs(plan Plan, maxCQE int) cqShape {
	nqp, threads := plan.MaxQPs(), min(plan.Threads, plan.MaxQPs())
	if plan.Test.IsLatency() {
		threads = nqp
	}
	c := cqShape{qpsPerCQ: (nqp + threads - 1) / threads, maxCQE: maxCQE, txDepth: plan.TxDepth, rxDepth: plan.RxDepth}
	if plan.SharedCQ {
		c.qpsPerCQ = nqp
	}
	if maxCQE <= 0 {
		c.maxCQE = 1 << 22
	}
	c.latencyOneCQ = plan.Test.IsLatency()
	// Signaled sends outstanding per QP: the window over the moderation,
	// plus the last; every request when --interval may lower the
	// moderation to 1.
	signaled := func(tx int) int {
		mod := max(1, min(plan.CQMod, tx-min(plan.PostList, tx)+1))
		if plan.Interval > 0 || plan.Test.IsLatency() {
			mod = 1
		}
		return (tx+mod-1)/mod + 2
	}
	room := c.maxCQE/c.qpsPerCQ - 2 // entries per QP the device allows
	if room < 1 {
		room = 1
	}
	c.sendPerQP = signaled(c.txDepth)
	if c.sendPerQP > room {
		c.txDepth = max(1, room-2)
		c.sendPerQP, c.cappedTx = signaled(c.txDepth), true
	}
	if receives(plan) || plan.Test == SendLat {
		c.receivesPerQP = c.rxDepth
		if plan.Test.IsLatency() {
			c.receivesPerQP = plan.LatencyRecvs()
		}
		if c.receivesPerQP > room {
			c.rxDepth, c.receivesPerQP, c.cappedRx = room, room, true
		}
		c.recvPerQP = c.receivesPerQP
	}
	return c
}

func (c cqShape) sendCQE() int {
	per := c.sendPerQP
	if c.latencyOneCQ {
		per += c.recvPerQP
	}
	return min(c.maxCQE, c.qpsPerCQ*per)
}

func (c cqShape) recvCQE() int { return min(c.maxCQE, max(1, c.qpsPerCQ*c.recvPerQP)) }

// depthsFor sets the plan's depths, lowered where the device's CQs
// could not hold them, and says so in the notes.
func (s *side) depthsFor(plan Plan) {
	shape := shapeCQs(plan, s.attr.MaxCQE)
	s.txDepth, s.rxDepth = shape.txDepth, shape.rxDepth
	if shape.cappedTx {
		s.notes = append(s.notes, fmt.Sprintf("tx depth %d, not %d: the device's max_cqe %d over %d QPs a CQ", s.txDepth, plan.TxDepth, s.attr.MaxCQE, shape.qpsPerCQ))
	}
	if shape.cappedRx {
		s.notes = append(s.notes, fmt.Sprintf("rx depth %d, not %d: the device's max_cqe %d over %d QPs a CQ", s.rxDepth, plan.RxDepth, s.attr.MaxCQE, shape.qpsPerCQ))
	}
}

// createQPs makes the side's CQs and QPs as its shape says: for the plan
// alone, exactly what the plan needs.
func (s *side) createQPs(plan Plan) error {
	s.depthsFor(plan)
	sh := s.shape
	for t := 0; t < sh.lanes; t++ {
		if sh.sharedCQ && t > 0 {
			s.lanes = append(s.lanes, s.lanes[0])
			continue
		}
		var l lane
		var err error
		if l.sendCQ, err = s.ctx.CreateCQ(sh.sendCQE); err != nil {
			return err
		}
		if l.recvCQ, err = s.ctx.CreateCQ(sh.recvCQE); err != nil {
			return err
		}
		s.lanes = append(s.lanes, l)
	}
	for i := 0; i < sh.qps; i++ {
		l := s.lanes[i%len(s.lanes)]
		// Latency loops poll one CQ for both directions.
		recvCQ := l.recvCQ
		if sh.oneCQ {
			recvCQ = l.sendCQ
		}
		spec := verbs.QPSpec{Type: qpType(plan.Transport), SendCQ: l.sendCQ, RecvCQ: recvCQ,
			MaxSendWR: sh.sendWR, MaxRecvWR: sh.recvWR, MaxInline: sh.inline}
		qp, err := s.pd.CreateQP(spec)
		if err != nil {
			return fmt.Errorf("QP %d of %d: %w", i+1, sh.qps, err)
		}
		s.qps = append(s.qps, qp)
		s.psns = append(s.psns, rand.Uint32()&0xffffff)
		s.recvPosted = append(s.recvPosted, 0)
	}
	s.inlineGranted = s.qps[0].MaxInline()
	s.inline = min(plan.Inline, s.inlineGranted)
	return nil
}

// noInlineOnGPU turns inline off on a side whose buffers are GPU memory: an
// inline send is the CPU copying the message into the work request, and the
// CPU cannot read GPU memory.
func (s *side) noInlineOnGPU(plan Plan) {
	if s.mem.gpu != nil && s.inline > 0 {
		s.notes = append(s.notes, fmt.Sprintf("inline 0, not %d: an inline send is the CPU reading the message, and it cannot read GPU memory", s.inline))
		s.inline = 0
	}
}

// memoryLayout is how much a plan registers on each side: region bytes per
// [send | recv] region, pairs of them (QP i uses pair i % pairs), and
// --verify's message slots. Latency tests and --verify give each QP a pair
// of its own. Bandwidth tests give each lane (thread) one, shared by its
// QPs: a NIC's DMA does not care where it writes, but a CPU doing the
// NIC's work does (rxe's kernel threads, the zero-cost NIC of
// csrc/fakeverbs): threads writing the same lines took each other's
// cache lines at every message, and two threads' WRITEs on the zero-cost
// NIC cost 26 ns a message each where one thread's cost 15.
type memoryLayout struct {
	region, pairs, slots, stride int
}

func layoutFor(plan Plan, nqp int) memoryLayout {
	size := plan.MaxSize()
	if plan.Transport == UD {
		size += udGRH
	}
	m := memoryLayout{slots: 1, stride: (size + 63) &^ 63, pairs: 1}
	if plan.Verify {
		m.slots = max(1, min(max(plan.TxDepth, plan.RxDepth), verifyBytes/m.stride))
	}
	m.region = (m.slots*m.stride + 4095) &^ 4095
	m.pairs = max(1, min(plan.Threads, nqp))
	if plan.Test.IsLatency() || plan.Verify {
		m.pairs = nqp
	}
	return m
}

// Bytes is the registered memory of one side.
func (m memoryLayout) Bytes() int64 { return 2 * int64(m.region) * int64(m.pairs) }

// PlanMemory is the memory a plan registers on each side.
func PlanMemory(plan Plan) int64 { return layoutFor(plan, plan.MaxQPs()).Bytes() }

func (s *side) allocMemory(plan Plan, spec MemorySpec) error {
	m := s.shape.mem
	s.slots, s.stride, s.region, s.pairs = m.slots, layoutFor(plan, len(s.qps)).stride, m.region, m.pairs
	var notes []string
	access := s.shape.access
	if s.kept != nil {
		km, err := s.kept.memory(s.keptDev, int(m.Bytes()), spec, access)
		if err != nil {
			return err
		}
		s.keptMem, s.mem, s.mr, notes = km, km.mem, km.mr, km.notes
	} else {
		mem, mr, n, err := allocMemory(s.pd, s.ctx.Name(), int(m.Bytes()), spec, access)
		if err != nil {
			return err
		}
		s.mem, s.mr, notes = mem, mr, n
	}
	s.memNotes = notes
	s.notes = append(s.notes, notes...)
	s.noInlineOnGPU(plan)
	return nil
}

// pairOffset is where QP i's region pair starts in the buffer.
func (s *side) pairOffset(i int) int { return 2 * s.region * (i % max(s.pairs, 1)) }

func (s *side) sendAddr(i int) uint64 { return s.mr.Addr() + uint64(s.pairOffset(i)) }
func (s *side) recvAddr(i int) uint64 { return s.sendAddr(i) + uint64(s.region) }

// sendOffset and recvOffset are where QP i's regions start in the memory.
func (s *side) sendOffset(i int) int { return s.pairOffset(i) }
func (s *side) recvOffset(i int) int { return s.pairOffset(i) + s.region }

// endpoints are what this side tells the peer, one per QP.
func (s *side) endpoints() ([]proto.Endpoint, error) {
	var eps []proto.Endpoint
	for i, qp := range s.qps {
		ep, err := s.ctx.LocalEndpoint(qp, s.port, s.gidIndex, s.psns[i])
		if err != nil {
			return nil, err
		}
		eps = append(eps, proto.Endpoint{QPN: ep.QPN, PSN: ep.PSN, LID: ep.LID, GID: ep.GID, MTU: int(ep.MTU),
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
func (s *side) connect(remote []proto.Endpoint, plan Plan) error {
	if len(remote) != len(s.qps) {
		return fmt.Errorf("peer offers %d QPs, the plan needs %d", len(remote), len(s.qps))
	}
	for i, ep := range remote {
		if err := ep.Validate(); err != nil {
			return fmt.Errorf("peer endpoint %d: %w", i, err)
		}
		if ep.BufSize < uint64(plan.MaxSize()) {
			return fmt.Errorf("peer buffer of %d bytes is smaller than the largest message %d", ep.BufSize, plan.MaxSize())
		}
	}
	mtu := pathMTU(plan, s.activeMTU, remote[0].MTU)
	if plan.Transport == UD && plan.MaxSize() > mtu {
		return fmt.Errorf("UD messages must fit one packet: %d bytes exceed the path MTU %d (use -s %d or less)", plan.MaxSize(), mtu, mtu)
	}
	for i, qp := range s.qps {
		o := verbs.DefaultConnectOptions(s.port, s.gidIndex)
		o.Access = s.shape.access
		o.MTU = verbs.MTU(mtu)
		o.LocalPSN = s.psns[i]
		o.ServiceLevel, o.TrafficClass = uint8(plan.SL), uint8(plan.TC)
		if plan.QPTimeout > 0 {
			o.Timeout = uint8(plan.QPTimeout)
		}
		// Outstanding READs and atomics: no more than the device allows.
		o.MaxRdAtomic = uint8(max(1, min(int(o.MaxRdAtomic), s.attr.MaxQPRdAtom, s.attr.MaxQPInitRdAtom)))
		// Receivers not keeping up is normal in send tests: retry RNR forever
		// (7), as perftest does; our own deadlines bound the wait.
		o.RNRRetry = 7
		r := remote[i]
		if err := qp.Connect(verbs.Endpoint{QPN: r.QPN, PSN: r.PSN, LID: r.LID, GID: r.GID, MTU: o.MTU}, o); err != nil {
			return err
		}
		if plan.Transport == UD {
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
func (s *side) targets(idx []int, remote []proto.Endpoint) []csrc.Target {
	var ts []csrc.Target
	for _, i := range idx {
		t := csrc.Target{
			QP: s.qps[i], LocalAddr: s.sendAddr(i), LKey: s.mr.LKey(),
			RemoteAddr: remote[i].Addr, RKey: remote[i].RKey,
			RecvAddr: s.recvAddr(i), RecvLKey: s.mr.LKey(), RecvLen: uint32(s.stride), Index: i,
		}
		if s.ahs != nil {
			t.AH, t.RemoteQPN = s.ahs[i], remote[i].QPN
		}
		ts = append(ts, t)
	}
	return ts
}

// Close releases everything: the MR before the memory under it, the device
// last. A side on a Kept device closes only what it made (address handles,
// QPs, then CQs) and gives its buffer back.
func (s *side) Close() {
	if s.kept != nil {
		s.closeOwn()
		if s.keptMem != nil {
			s.kept.put(s.keptDev, s.keptMem)
		}
		return
	}
	if s.mr != nil {
		s.mr.Close()
	}
	s.mem.close()
	if s.ctx != nil {
		s.ctx.Close()
	}
}

// closeOwn destroys the side's address handles and QPs, then their CQs
// (a CQ outlives the QPs that use it; a shared CQ is one object).
func (s *side) closeOwn() {
	for _, ah := range s.ahs {
		ah.Close()
	}
	for _, qp := range s.qps {
		qp.Close()
	}
	seen := map[*verbs.CQ]bool{}
	for _, l := range s.lanes {
		for _, cq := range []*verbs.CQ{l.sendCQ, l.recvCQ} {
			if cq != nil && !seen[cq] {
				seen[cq] = true
				cq.Close()
			}
		}
	}
}

// openDevice opens the named device and a PD, or takes them from kept.
func (s *side) openDevice(name string, kept *Kept) error {
	if kept != nil {
		d, err := kept.device(name)
		if err != nil {
			return err
		}
		s.kept, s.keptDev, s.ctx, s.pd, s.attr = kept, d, d.ctx, d.pd, d.attr
		return nil
	}
	var err error
	s.ctx, s.attr, s.pd, err = openWithPD(name)
	return err
}
