package engine

import (
	"fmt"
	"math/rand/v2"

	"github.com/rdmabench/rdmabench/verbs"
)

// DeviceConfig says which device, port and GID a side uses.
type DeviceConfig struct {
	Device   string // "" picks the first device
	Port     int    // from 1
	GIDIndex int    // -1 picks the default (RoCE v2 IPv4 on Ethernet)
}

// side is one end of a connection: device, QP and a registered buffer of two
// regions, [send | recv]. The peer writes into and reads from the recv
// region; this side sends from the send region.
type side struct {
	ctx       *verbs.Context
	pd        *verbs.PD
	cq        *verbs.CQ
	qp        *verbs.QP
	buf       *verbs.Buffer
	mr        *verbs.MR
	region    int
	port      int
	gidIndex  int
	gidDesc   string
	activeMTU int
	linkLayer string
	psn       uint32
	inline    int
}

// accessFor is the MR and QP access a test needs, and no more.
func accessFor(t Test) verbs.Access {
	a := verbs.AccessLocalWrite
	switch t.Op() {
	case "write":
		a |= verbs.AccessRemoteWrite
	case "read":
		a |= verbs.AccessRemoteRead
	}
	return a
}

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
	s := &side{port: dc.Port, gidIndex: dc.GIDIndex, psn: rand.Uint32() & 0xffffff}
	opened := false
	defer func() {
		if !opened {
			s.Close() // whatever was made before the failure
		}
	}()
	var err error
	if s.port == 0 {
		s.port = 1
	}
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
					s.gidDesc = describeGID(g.Index, string(g.Type), g.AddrString(), g.Netdev)
				}
			}
		}
	}
	depth := max(plan.TxDepth, plan.RxDepth) + 8
	if s.pd, err = s.ctx.AllocPD(); err != nil {
		return nil, err
	}
	if s.cq, err = s.ctx.CreateCQ(plan.TxDepth + plan.RxDepth + 16); err != nil {
		return nil, err
	}
	spec := verbs.QPSpec{Type: verbs.RC, SendCQ: s.cq, RecvCQ: s.cq, MaxSendWR: depth, MaxRecvWR: depth, MaxInline: plan.Inline}
	if s.qp, err = s.pd.CreateQP(spec); err != nil {
		return nil, err
	}
	s.inline = s.qp.MaxInline()
	s.region = (plan.MaxSize() + 4095) &^ 4095
	if s.buf, err = verbs.AllocBuffer(2 * s.region); err != nil {
		return nil, err
	}
	if s.mr, err = s.pd.RegisterMR(s.buf, accessFor(plan.Test)); err != nil {
		return nil, err
	}
	opened = true
	return s, nil
}

func describeGID(idx int, typ, addr, netdev string) string {
	s := fmt.Sprintf("gid %d: %s %s", idx, typ, addr)
	if netdev != "" {
		s += " on " + netdev
	}
	return s
}

func (s *side) sendAddr() uint64 { return s.mr.Addr() }
func (s *side) recvAddr() uint64 { return s.mr.Addr() + uint64(s.region) }

// endpoint is what this side tells the peer.
func (s *side) endpoint() (Endpoint, error) {
	ep, err := s.ctx.LocalEndpoint(s.qp, s.port, s.gidIndex, s.psn)
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint{QPN: ep.QPN, PSN: ep.PSN, LID: ep.LID, GID: ep.GID, MTU: int(ep.MTU),
		Addr: s.recvAddr(), RKey: s.mr.RKey(), BufSize: uint64(s.region)}, nil
}

// pathMTU is the MTU both sides use: the plan's, else the smaller active MTU.
func pathMTU(plan Plan, local, remote int) int {
	if plan.MTU != 0 {
		return plan.MTU
	}
	return min(local, remote)
}

// connect brings the QP to RTS towards the peer.
func (s *side) connect(remote Endpoint, plan Plan) error {
	if err := remote.validate(); err != nil {
		return fmt.Errorf("peer endpoint: %w", err)
	}
	if remote.BufSize < uint64(plan.MaxSize()) {
		return fmt.Errorf("peer buffer of %d bytes is smaller than the largest message %d", remote.BufSize, plan.MaxSize())
	}
	o := verbs.DefaultConnectOptions(s.port, s.gidIndex)
	o.Access = accessFor(plan.Test)
	o.MTU = verbs.MTU(pathMTU(plan, s.activeMTU, remote.MTU))
	o.LocalPSN = s.psn
	o.ServiceLevel, o.TrafficClass = uint8(plan.SL), uint8(plan.TC)
	// Receivers not keeping up is normal in send tests: retry RNR forever
	// (7), as perftest does; our own deadlines bound the wait.
	o.RNRRetry = 7
	return s.qp.Connect(verbs.Endpoint{QPN: remote.QPN, PSN: remote.PSN, LID: remote.LID, GID: remote.GID, MTU: o.MTU}, o)
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
