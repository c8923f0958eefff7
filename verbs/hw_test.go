package verbs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// openTestDevice opens the device the hardware tests run on: $RDMABENCH_DEVICE,
// else the first one found. Without one the test skips, unless
// RDMABENCH_REQUIRE_HW=1 (set by make test on the rxe target), where a skip
// would hide a broken target.
func openTestDevice(t *testing.T) *Context {
	t.Helper()
	name := os.Getenv("RDMABENCH_DEVICE")
	if name == "" {
		names, err := DeviceNames()
		if err == nil && len(names) > 0 {
			name = names[0]
		}
	}
	if name == "" {
		if os.Getenv("RDMABENCH_REQUIRE_HW") == "1" {
			t.Fatal("RDMABENCH_REQUIRE_HW=1 but no RDMA device found")
		}
		t.Skip("needs an RDMA device (e.g. rxe0); runs for real on the rxe target in make test")
	}
	c, err := Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close device: %v", err)
		}
	})
	return c
}

func testGIDIndex(t *testing.T, c *Context) int {
	t.Helper()
	idx, reason, err := c.DefaultGIDIndex(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s", c.Name(), reason)
	return idx
}

func TestHWPortActive(t *testing.T) {
	c := openTestDevice(t)
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s port 1: %+v", c.Name(), pa)
	if pa.State != "ACTIVE" {
		t.Errorf("port state %s, want ACTIVE", pa.State)
	}
	if strings.HasPrefix(c.Name(), "rxe") && pa.LinkLayer != "Ethernet" {
		t.Errorf("rxe link layer %s, want Ethernet", pa.LinkLayer)
	}
	if pa.ActiveMTU == 0 || pa.ActiveMTU > pa.MaxMTU {
		t.Errorf("active MTU %d, max %d", pa.ActiveMTU, pa.MaxMTU)
	}
	da, err := c.QueryDevice()
	if err != nil {
		t.Fatal(err)
	}
	if da.PhysPortCnt < 1 || da.MaxQP < 1 || da.MaxCQE < 1 {
		t.Errorf("device attributes implausible: %+v", da)
	}
	if _, err := c.QueryPort(0); err == nil {
		t.Error("port 0 accepted")
	}
}

func TestHWRoCEv2GID(t *testing.T) {
	c := openTestDevice(t)
	pa, err := c.QueryPort(1)
	if err != nil {
		t.Fatal(err)
	}
	if pa.LinkLayer != "Ethernet" {
		t.Skip("InfiniBand port: no RoCE GIDs")
	}
	gids, err := c.GIDTable(1)
	if err != nil {
		t.Fatal(err)
	}
	g, reason, err := rdmasys.PickRoCEv2IPv4(gids)
	if err != nil {
		t.Fatalf("%v (table %+v)", err, gids)
	}
	t.Log(reason)
	addr, err := c.GID(1, g.Index)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(addr[:], g.Addr.To16()) {
		t.Errorf("ibv_query_gid %x differs from sysfs %v", addr, g.Addr)
	}
}

// pair is two RC QPs on one device connected to each other (loopback).
type pair struct {
	pd     *PD
	cq     [2]*CQ
	qp     [2]*QP
	buf    [2]*Buffer
	mr     [2]*MR
	access Access
}

func newLoopbackPair(t *testing.T, c *Context, typ QPType, size int) *pair {
	t.Helper()
	gidIdx := testGIDIndex(t, c)
	pd, err := c.AllocPD()
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{pd: pd, access: AccessLocalWrite | AccessRemoteWrite | AccessRemoteRead | AccessRemoteAtomic}
	for i := range 2 {
		if p.cq[i], err = c.CreateCQ(64); err != nil {
			t.Fatal(err)
		}
		if p.qp[i], err = pd.CreateQP(QPSpec{Type: typ, SendCQ: p.cq[i], RecvCQ: p.cq[i], MaxSendWR: 16, MaxRecvWR: 16, SignalAll: true}); err != nil {
			t.Fatal(err)
		}
		if p.buf[i], err = AllocBuffer(size); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.buf[i].Close() }) // buffers are not the device's children
		if p.mr[i], err = pd.RegisterMR(p.buf[i], p.access); err != nil {
			t.Fatal(err)
		}
	}
	var eps [2]Endpoint
	for i := range 2 {
		if eps[i], err = c.LocalEndpoint(p.qp[i], 1, gidIdx, uint32(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		o := DefaultConnectOptions(1, gidIdx)
		o.Access = p.access
		o.LocalPSN = eps[i].PSN
		if err := p.qp[i].Connect(eps[1-i], o); err != nil {
			t.Fatal(err)
		}
		if typ != UD {
			if st, err := p.qp[i].State(); err != nil || st != "RTS" {
				t.Fatalf("QP state %q %v, want RTS", st, err)
			}
		}
	}
	return p
}

func fill(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i*7)
	}
}

func waitOK(t *testing.T, cq *CQ, want WCOpcode) Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wc, err := cq.WaitOne(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if wc.Opcode != want {
		t.Fatalf("completion opcode %d, want %d", wc.Opcode, want)
	}
	return wc
}

func TestHWLoopbackRC(t *testing.T) {
	c := openTestDevice(t)
	const size = 64 << 10
	p := newLoopbackPair(t, c, RC, size)
	a, b := p.buf[0].Bytes(), p.buf[1].Bytes()

	// SEND/RECV: A sends its pattern into B's receive buffer.
	fill(a, 1)
	if err := p.qp[1].PostRecv(1, p.mr[1].Addr(), size, p.mr[1].LKey()); err != nil {
		t.Fatal(err)
	}
	if err := p.qp[0].PostSend(SendWR{ID: 2, Opcode: OpSendWithImm, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: size, LKey: p.mr[0].LKey(), Imm: 0xabc}); err != nil {
		t.Fatal(err)
	}
	waitOK(t, p.cq[0], WCSend)
	wc := waitOK(t, p.cq[1], WCRecv)
	if wc.ByteLen != size || !wc.HasImm || wc.Imm != 0xabc {
		t.Errorf("recv completion %+v", wc)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("SEND/RECV: data differs")
	}

	// RDMA WRITE: A writes a new pattern into B.
	fill(a, 2)
	if err := p.qp[0].PostSend(SendWR{ID: 3, Opcode: OpWrite, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: size, LKey: p.mr[0].LKey(), RemoteAddr: p.mr[1].Addr(), RKey: p.mr[1].RKey()}); err != nil {
		t.Fatal(err)
	}
	waitOK(t, p.cq[0], WCRDMAWrite)
	if !bytes.Equal(a, b) {
		t.Fatal("RDMA WRITE: data differs")
	}

	// RDMA READ: A reads B's buffer after B changes it locally.
	fill(b, 3)
	if err := p.qp[0].PostSend(SendWR{ID: 4, Opcode: OpRead, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: size, LKey: p.mr[0].LKey(), RemoteAddr: p.mr[1].Addr(), RKey: p.mr[1].RKey()}); err != nil {
		t.Fatal(err)
	}
	waitOK(t, p.cq[0], WCRDMARead)
	if !bytes.Equal(a, b) {
		t.Fatal("RDMA READ: data differs")
	}

	// Atomics on the first 8 bytes of B.
	copy(b[:8], []byte{5, 0, 0, 0, 0, 0, 0, 0})
	if err := p.qp[0].PostSend(SendWR{ID: 5, Opcode: OpFetchAdd, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: 8, LKey: p.mr[0].LKey(), RemoteAddr: p.mr[1].Addr(), RKey: p.mr[1].RKey(), CompareAdd: 10}); err != nil {
		t.Fatal(err)
	}
	waitOK(t, p.cq[0], WCFetchAdd)
	if a[0] != 5 || b[0] != 15 {
		t.Errorf("fetch-and-add: fetched %d, remote now %d; want 5 and 15", a[0], b[0])
	}

	// Compare-and-swap: a matching compare swaps, a stale one does not.
	for _, c := range []struct {
		compare, swap   uint64
		fetched, remote byte
	}{{15, 99, 15, 99}, {15, 7, 99, 99}} {
		if err := p.qp[0].PostSend(SendWR{ID: 6, Opcode: OpCompareSwap, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: 8, LKey: p.mr[0].LKey(), RemoteAddr: p.mr[1].Addr(), RKey: p.mr[1].RKey(), CompareAdd: c.compare, Swap: c.swap}); err != nil {
			t.Fatal(err)
		}
		waitOK(t, p.cq[0], WCCompSwap)
		if a[0] != c.fetched || b[0] != c.remote {
			t.Errorf("CAS(%d→%d): fetched %d, remote now %d; want %d and %d", c.compare, c.swap, a[0], b[0], c.fetched, c.remote)
		}
	}
}

func TestHWWrongRKeyIsTypedError(t *testing.T) {
	c := openTestDevice(t)
	p := newLoopbackPair(t, c, RC, 4096)
	err := p.qp[0].PostSend(SendWR{ID: 9, Opcode: OpWrite, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: 64, LKey: p.mr[0].LKey(), RemoteAddr: p.mr[1].Addr(), RKey: p.mr[1].RKey() + 0x100})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = p.cq[0].WaitOne(ctx)
	var ce *CompletionError
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *CompletionError", err)
	}
	if !errors.Is(err, WCRemoteAccessErr) {
		t.Fatalf("status %v, want remote access error", ce.Status)
	}
	if !strings.Contains(err.Error(), "remote access error") {
		t.Errorf("%q does not name the status", err)
	}
	t.Log(err)
}

func TestHWLoopbackUD(t *testing.T) {
	c := openTestDevice(t)
	const grh = 40 // UD receives start with the 40-byte GRH
	p := newLoopbackPair(t, c, UD, 4096)
	gidIdx := testGIDIndex(t, c)
	remote, err := c.LocalEndpoint(p.qp[1], 1, gidIdx, 0)
	if err != nil {
		t.Fatal(err)
	}
	ah, err := p.pd.CreateAH(remote, 1, gidIdx)
	if err != nil {
		t.Fatal(err)
	}
	fill(p.buf[0].Bytes()[:256], 4)
	if err := p.qp[1].PostRecv(1, p.mr[1].Addr(), grh+256, p.mr[1].LKey()); err != nil {
		t.Fatal(err)
	}
	if err := p.qp[0].PostSend(SendWR{ID: 2, Opcode: OpSend, Flags: SendSignaled, Addr: p.mr[0].Addr(), Length: 256, LKey: p.mr[0].LKey(), AH: ah, RemoteQPN: remote.QPN}); err != nil {
		t.Fatal(err)
	}
	waitOK(t, p.cq[0], WCSend)
	wc := waitOK(t, p.cq[1], WCRecv)
	if wc.ByteLen != grh+256 || wc.SrcQP != p.qp[0].Num() {
		t.Errorf("UD recv %+v", wc)
	}
	if !bytes.Equal(p.buf[0].Bytes()[:256], p.buf[1].Bytes()[grh:grh+256]) {
		t.Fatal("UD SEND: data differs")
	}
}

func TestHWCloseOrder(t *testing.T) {
	c := openTestDevice(t)
	p := newLoopbackPair(t, c, RC, 4096)
	// Closing the CQ first must take the QP with it rather than fail EBUSY.
	if err := p.cq[0].Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.qp[0].PostSend(SendWR{Opcode: OpSend}); !errors.Is(err, ErrClosed) {
		t.Errorf("post on closed QP: %v, want ErrClosed", err)
	}
	// Closing a buffer deregisters its MR first.
	if err := p.buf[1].Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.pd.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.pd.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if err := p.buf[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.pd.RegisterMR(p.buf[0], AccessLocalWrite); !errors.Is(err, ErrClosed) {
		t.Errorf("register on closed PD: %v", err)
	}
}

func TestOpenUnknownDevice(t *testing.T) {
	_, err := Open("no_such_dev0")
	if !errors.Is(err, ErrNoDevice) {
		t.Fatalf("err = %v, want ErrNoDevice", err)
	}
}

// The one-verb GID table and sysfs's say the same, entry for entry.
func TestHWGIDTableVerbMatchesSysfs(t *testing.T) {
	c := openTestDevice(t)
	fromVerb, err := c.queryGIDTable(1)
	if err != nil {
		t.Fatalf("ibv_query_gid_table: %v", err)
	}
	fromSysfs, err := rdmasys.ReadGIDs(SysfsRoot, c.Name(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromVerb) == 0 || len(fromVerb) != len(fromSysfs) {
		t.Fatalf("verb %+v, sysfs %+v", fromVerb, fromSysfs)
	}
	for i := range fromVerb {
		v, s := fromVerb[i], fromSysfs[i]
		if v.Index != s.Index || v.Type != s.Type || !v.Addr.Equal(s.Addr) || v.Netdev != s.Netdev {
			t.Errorf("entry %d: verb %+v, sysfs %+v", i, v, s)
		}
	}
}
