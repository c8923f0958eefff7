package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// QPType is the transport of a queue pair.
type QPType int

const (
	RC QPType = C.IBV_QPT_RC
	UC QPType = C.IBV_QPT_UC
	UD QPType = C.IBV_QPT_UD
)

func (t QPType) String() string {
	switch t {
	case RC:
		return "RC"
	case UC:
		return "UC"
	case UD:
		return "UD"
	}
	return fmt.Sprintf("QPType(%d)", int(t))
}

// QPSpec describes a QP to create: plain data, no live objects but the CQs.
type QPSpec struct {
	Type       QPType
	SendCQ     *CQ
	RecvCQ     *CQ
	MaxSendWR  int
	MaxRecvWR  int
	MaxSendSGE int // default 1
	MaxRecvSGE int // default 1
	MaxInline  int
	// SignalAll makes every send work request generate a completion; when
	// false only requests posted with SendSignaled do (CQ moderation).
	SignalAll bool
}

// QP is a queue pair. It belongs to its PD and uses its CQs.
type QP struct {
	res    resource
	qp     *C.struct_ibv_qp
	pd     *PD
	typ    QPType
	inline int
	sqSize int
	port   int
	gidIdx int
}

// UDQKey is the Q_Key every rdmabench UD QP uses.
const UDQKey = 0x11111111

// CreateQP creates a QP in the RESET state.
func (p *PD) CreateQP(spec QPSpec) (*QP, error) {
	if p.res.isClosed() {
		return nil, ErrClosed
	}
	if spec.SendCQ == nil || spec.RecvCQ == nil {
		return nil, errors.New("create QP: send and receive CQs are required")
	}
	if spec.SendCQ.res.isClosed() || spec.RecvCQ.res.isClosed() {
		return nil, ErrClosed
	}
	if spec.MaxSendWR <= 0 || spec.MaxRecvWR <= 0 {
		return nil, fmt.Errorf("create %v QP: max send/recv WRs must be positive (got %d/%d)", spec.Type, spec.MaxSendWR, spec.MaxRecvWR)
	}
	if spec.MaxSendSGE == 0 {
		spec.MaxSendSGE = 1
	}
	if spec.MaxRecvSGE == 0 {
		spec.MaxRecvSGE = 1
	}
	var a C.struct_ibv_qp_init_attr
	a.send_cq = spec.SendCQ.cq
	a.recv_cq = spec.RecvCQ.cq
	a.qp_type = C.enum_ibv_qp_type(spec.Type)
	a.cap.max_send_wr = C.uint32_t(spec.MaxSendWR)
	a.cap.max_recv_wr = C.uint32_t(spec.MaxRecvWR)
	a.cap.max_send_sge = C.uint32_t(spec.MaxSendSGE)
	a.cap.max_recv_sge = C.uint32_t(spec.MaxRecvSGE)
	a.cap.max_inline_data = C.uint32_t(spec.MaxInline)
	if spec.SignalAll {
		a.sq_sig_all = 1
	}
	qp, err := C.ibv_create_qp(p.pd, &a)
	if qp == nil {
		return nil, verbErr("ibv_create_qp", fmt.Sprintf("%v, %d/%d WRs, inline %d", spec.Type, spec.MaxSendWR, spec.MaxRecvWR, spec.MaxInline), err)
	}
	q := &QP{qp: qp, pd: p, typ: spec.Type, inline: int(a.cap.max_inline_data), sqSize: int(a.cap.max_send_wr), gidIdx: -1}
	num := uint32(qp.qp_num)
	q.res.init("qp", func() error {
		return rcErr("ibv_destroy_qp", fmt.Sprintf("QP %d", num), C.ibv_destroy_qp(qp))
	}, &p.res, &spec.SendCQ.res, &spec.RecvCQ.res)
	return q, nil
}

// Num is the QP number peers address.
func (q *QP) Num() uint32 { return uint32(q.qp.qp_num) }

// Type is the QP's transport.
func (q *QP) Type() QPType { return q.typ }

// MaxInline is the inline size the device granted.
func (q *QP) MaxInline() int { return q.inline }

// SendQueueSize is the send queue capacity the device granted.
func (q *QP) SendQueueSize() int { return q.sqSize }

// Raw is the native ibv_qp pointer, for the C loops in csrc/.
func (q *QP) Raw() unsafe.Pointer { return unsafe.Pointer(q.qp) }

// Close destroys the QP.
func (q *QP) Close() error { return q.res.close() }

// Endpoint is what one side tells the other to connect: plain data that goes
// over the out-of-band exchange.
type Endpoint struct {
	QPN uint32   `json:"qpn"`
	PSN uint32   `json:"psn"`
	LID uint16   `json:"lid"`
	GID [16]byte `json:"gid"`
	MTU MTU      `json:"mtu"`
}

// ConnectOptions are the path and reliability settings of a connection.
type ConnectOptions struct {
	Port     int    // local port, from 1
	GIDIndex int    // local GID index; -1 for IB without a GRH
	Access   Access // remote access the QP allows (RC, UC)
	MTU      MTU    // path MTU; 0 takes the smaller of both ends' MTUs
	LocalPSN uint32
	// Timeout is the local ACK timeout exponent (4.096 µs × 2^Timeout); 14
	// is about 67 ms. RetryCount must stay below 7: rxe treats 7 as "retry
	// forever", and a dead peer would then never produce an error. The
	// default, 6, rides out bursts of loss (a run over two emulated hosts
	// with four QPs exhausted 3 now and then); a dead peer still ends the
	// run, and the control connection tells of a dead server sooner.
	Timeout      uint8
	RetryCount   uint8
	RNRRetry     uint8
	MinRNRTimer  uint8
	MaxRdAtomic  uint8 // outstanding READ/atomic requests (initiator and responder)
	ServiceLevel uint8
	TrafficClass uint8
}

// DefaultConnectOptions are sensible settings for benchmarks.
func DefaultConnectOptions(port, gidIndex int) ConnectOptions {
	return ConnectOptions{
		Port: port, GIDIndex: gidIndex,
		Access:  AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead,
		Timeout: 14, RetryCount: 6, RNRRetry: 3, MinRNRTimer: 12, MaxRdAtomic: 16,
	}
}

// Init moves the QP from RESET to INIT.
func (q *QP) Init(o ConnectOptions) error {
	if q.res.isClosed() {
		return ErrClosed
	}
	isUD := C.int(0)
	if q.typ == UD {
		isUD = 1
	}
	q.port, q.gidIdx = o.Port, o.GIDIndex
	return rcErr("ibv_modify_qp(INIT)", fmt.Sprintf("QP %d", q.Num()),
		C.rb_modify_init(q.qp, C.uint8_t(o.Port), C.int(o.Access), UDQKey, isUD))
}

// ReadyToReceive moves the QP from INIT to RTR towards the remote endpoint.
func (q *QP) ReadyToReceive(remote Endpoint, o ConnectOptions) error {
	if q.res.isClosed() {
		return ErrClosed
	}
	if o.RetryCount >= 7 {
		return fmt.Errorf("connect QP %d: retry count %d would retry forever on rxe; use 0..6", q.Num(), o.RetryCount)
	}
	mtu := o.MTU
	if mtu == 0 {
		mtu = remote.MTU
	}
	e := C.enum_ibv_mtu(0)
	if q.typ != UD {
		var err error
		if e, err = mtu.enum(); err != nil {
			return fmt.Errorf("connect QP %d: %w", q.Num(), err)
		}
	}
	gid := remote.GID
	return rcErr("ibv_modify_qp(RTR)", fmt.Sprintf("QP %d → remote QP %d", q.Num(), remote.QPN),
		C.rb_modify_rtr(q.qp, C.int(q.typ), C.int(e), C.uint32_t(remote.QPN), C.uint32_t(remote.PSN),
			(*C.uint8_t)(unsafe.Pointer(&gid[0])), C.uint16_t(remote.LID), C.uint8_t(o.Port), C.int(o.GIDIndex),
			C.uint8_t(o.MaxRdAtomic), C.uint8_t(o.MinRNRTimer), C.uint8_t(o.ServiceLevel), C.uint8_t(o.TrafficClass)))
}

// ReadyToSend moves the QP from RTR to RTS.
func (q *QP) ReadyToSend(o ConnectOptions) error {
	if q.res.isClosed() {
		return ErrClosed
	}
	return rcErr("ibv_modify_qp(RTS)", fmt.Sprintf("QP %d", q.Num()),
		C.rb_modify_rts(q.qp, C.int(q.typ), C.uint32_t(o.LocalPSN), C.uint8_t(o.Timeout),
			C.uint8_t(o.RetryCount), C.uint8_t(o.RNRRetry), C.uint8_t(o.MaxRdAtomic)))
}

// Connect runs the whole handshake to RTS: INIT, RTR towards remote, RTS.
// The QP must be in RESET.
func (q *QP) Connect(remote Endpoint, o ConnectOptions) error {
	if err := q.Init(o); err != nil {
		return err
	}
	if err := q.ReadyToReceive(remote, o); err != nil {
		return err
	}
	return q.ReadyToSend(o)
}

// SetError moves the QP to the error state, flushing outstanding requests.
func (q *QP) SetError() error {
	if q.res.isClosed() {
		return ErrClosed
	}
	return rcErr("ibv_modify_qp(ERR)", fmt.Sprintf("QP %d", q.Num()), C.rb_modify_error(q.qp))
}

// State returns the QP state as ibv_query_qp reports it ("RESET", "RTS", ...).
func (q *QP) State() (string, error) {
	if q.res.isClosed() {
		return "", ErrClosed
	}
	var s C.int
	if err := rcErr("ibv_query_qp", fmt.Sprintf("QP %d", q.Num()), C.rb_query_qp_state(q.qp, &s)); err != nil {
		return "", err
	}
	names := []string{"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"}
	if int(s) < len(names) {
		return names[s], nil
	}
	return fmt.Sprintf("state %d", int(s)), nil
}

// LocalEndpoint is this QP's side of the exchange, for the given port, GID
// index, PSN and MTU.
func (c *Context) LocalEndpoint(q *QP, port, gidIndex int, psn uint32) (Endpoint, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return Endpoint{}, err
	}
	ep := Endpoint{QPN: q.Num(), PSN: psn & 0xffffff, LID: pa.LID, MTU: MTU(pa.ActiveMTU)}
	if gidIndex >= 0 {
		if ep.GID, err = c.GID(port, gidIndex); err != nil {
			return Endpoint{}, err
		}
	}
	return ep, nil
}

// SendOpcode is a send work request's operation (enum ibv_wr_opcode).
type SendOpcode int

const (
	OpWrite        SendOpcode = C.IBV_WR_RDMA_WRITE
	OpWriteWithImm SendOpcode = C.IBV_WR_RDMA_WRITE_WITH_IMM
	OpSend         SendOpcode = C.IBV_WR_SEND
	OpSendWithImm  SendOpcode = C.IBV_WR_SEND_WITH_IMM
	OpRead         SendOpcode = C.IBV_WR_RDMA_READ
	OpCompareSwap  SendOpcode = C.IBV_WR_ATOMIC_CMP_AND_SWP
	OpFetchAdd     SendOpcode = C.IBV_WR_ATOMIC_FETCH_AND_ADD
)

func (o SendOpcode) String() string {
	switch o {
	case OpWrite:
		return "RDMA_WRITE"
	case OpWriteWithImm:
		return "RDMA_WRITE_WITH_IMM"
	case OpSend:
		return "SEND"
	case OpSendWithImm:
		return "SEND_WITH_IMM"
	case OpRead:
		return "RDMA_READ"
	case OpCompareSwap:
		return "ATOMIC_CMP_AND_SWP"
	case OpFetchAdd:
		return "ATOMIC_FETCH_AND_ADD"
	}
	return fmt.Sprintf("opcode %d", int(o))
}

// Send flags.
const (
	SendSignaled = C.IBV_SEND_SIGNALED
	SendInline   = C.IBV_SEND_INLINE
	SendFence    = C.IBV_SEND_FENCE
)

// SendWR is one send-queue work request with a single scatter/gather entry.
type SendWR struct {
	ID         uint64
	Opcode     SendOpcode
	Flags      int
	Addr       uint64 // local buffer
	Length     uint32
	LKey       uint32
	RemoteAddr uint64 // RDMA and atomics
	RKey       uint32
	Imm        uint32 // host order
	CompareAdd uint64 // atomics
	Swap       uint64
	AH         *AH // UD only
	RemoteQPN  uint32
}

// PostSend posts one send work request. For tests, set-up and the agent's
// probes (tens a second a peer); the measurement loops post from C.
func (q *QP) PostSend(wr SendWR) error {
	if q.res.isClosed() {
		return ErrClosed
	}
	s := C.struct_rb_send_args{
		wr_id: C.uint64_t(wr.ID), addr: C.uint64_t(wr.Addr), length: C.uint32_t(wr.Length),
		lkey: C.uint32_t(wr.LKey), opcode: C.int(wr.Opcode), flags: C.int(wr.Flags),
		remote_addr: C.uint64_t(wr.RemoteAddr), rkey: C.uint32_t(wr.RKey), imm: C.uint32_t(NetworkOrder(wr.Imm)),
		compare_add: C.uint64_t(wr.CompareAdd), swap: C.uint64_t(wr.Swap),
	}
	if wr.AH != nil {
		if wr.AH.res.isClosed() {
			return ErrClosed
		}
		s.ah = wr.AH.ah
		s.remote_qpn = C.uint32_t(wr.RemoteQPN)
		s.remote_qkey = UDQKey
	}
	return rcErr("ibv_post_send("+wr.Opcode.String()+")", fmt.Sprintf("QP %d", q.Num()), C.rb_post_send(q.qp, &s))
}

// PostRecv posts one receive work request.
func (q *QP) PostRecv(id uint64, addr uint64, length uint32, lkey uint32) error {
	if q.res.isClosed() {
		return ErrClosed
	}
	return rcErr("ibv_post_recv", fmt.Sprintf("QP %d", q.Num()),
		C.rb_post_recv(q.qp, C.uint64_t(id), C.uint64_t(addr), C.uint32_t(length), C.uint32_t(lkey)))
}

// AH is an address handle, the destination of UD sends.
type AH struct {
	res resource
	ah  *C.struct_ibv_ah
}

// CreateAH makes an address handle towards a remote endpoint.
func (p *PD) CreateAH(remote Endpoint, port, gidIndex int) (*AH, error) {
	if p.res.isClosed() {
		return nil, ErrClosed
	}
	gid := remote.GID
	ah, err := C.rb_create_ah(p.pd, (*C.uint8_t)(unsafe.Pointer(&gid[0])), C.uint16_t(remote.LID), C.uint8_t(port), C.int(gidIndex))
	if ah == nil {
		return nil, verbErr("ibv_create_ah", fmt.Sprintf("to QP %d", remote.QPN), err)
	}
	a := &AH{ah: ah}
	a.res.init("ah", func() error { return rcErr("ibv_destroy_ah", "", C.ibv_destroy_ah(ah)) }, &p.res)
	return a, nil
}

// Raw is the native ibv_ah pointer, for the C loops in csrc/.
func (a *AH) Raw() unsafe.Pointer { return unsafe.Pointer(a.ah) }

// Close destroys the address handle.
func (a *AH) Close() error { return a.res.close() }
