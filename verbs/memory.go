package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Buffer is page-aligned memory outside the Go heap (an anonymous mmap), so
// the NIC can own it for as long as an MR does and the Go GC never moves it.
type Buffer struct {
	res  resource
	data []byte
}

// AllocBuffer maps size bytes of zeroed memory wherever the kernel puts it.
func AllocBuffer(size int) (*Buffer, error) {
	return AllocHostBuffer(size, HostOptions{Node: -1})
}

// AllocHostBuffer maps size bytes of zeroed memory, placed as o says (see
// HostOptions) and populated before it returns.
func AllocHostBuffer(size int, o HostOptions) (*Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("allocate buffer: size %d must be positive", size)
	}
	data, err := mapHost(size, o)
	if err != nil {
		return nil, err
	}
	b := &Buffer{data: data}
	b.res.init("buffer", func() error {
		if err := unix.Munmap(data); err != nil {
			return fmt.Errorf("munmap: %w", err)
		}
		return nil
	})
	return b, nil
}

// Bytes is the memory itself; invalid after Close.
func (b *Buffer) Bytes() []byte { return b.data }

// Addr is the buffer's virtual address, as work requests carry it.
func (b *Buffer) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(&b.data[0]))) }

// Len is the buffer's size in bytes.
func (b *Buffer) Len() int { return len(b.data) }

// Close unmaps the memory.
func (b *Buffer) Close() error { return b.res.close() }

// Access is a set of MR and QP access flags.
type Access int

const (
	AccessLocalWrite   Access = C.IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = C.IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = C.IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = C.IBV_ACCESS_REMOTE_ATOMIC
)

// PD is a protection domain. It owns the MRs, QPs and AHs made from it.
type PD struct {
	res resource
	pd  *C.struct_ibv_pd
	ctx *Context
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (*PD, error) {
	if c.res.isClosed() {
		return nil, ErrClosed
	}
	pd, err := C.ibv_alloc_pd(c.ctx)
	if pd == nil {
		return nil, verbErr("ibv_alloc_pd", c.name, err)
	}
	p := &PD{pd: pd, ctx: c}
	p.res.init("pd", func() error {
		return rcErr("ibv_dealloc_pd", c.name, C.ibv_dealloc_pd(pd))
	}, &c.res)
	return p, nil
}

// Context is the device the PD belongs to.
func (p *PD) Context() *Context { return p.ctx }

// Close deregisters the PD's MRs, destroys its QPs and AHs, then the PD.
func (p *PD) Close() error { return p.res.close() }

// MR is a registered memory region.
type MR struct {
	res  resource
	mr   *C.struct_ibv_mr
	buf  *Buffer
	addr uint64
	size int
}

// RegisterMR registers a whole buffer with exactly the given access flags.
// The MR keeps the buffer in use: closing the buffer deregisters it first.
func (p *PD) RegisterMR(buf *Buffer, access Access) (*MR, error) {
	return p.RegisterRange(buf, 0, buf.Len(), access)
}

// RegisterRange registers [offset, offset+length) of a buffer.
func (p *PD) RegisterRange(buf *Buffer, offset, length int, access Access) (*MR, error) {
	if p.res.isClosed() || buf.res.isClosed() {
		return nil, ErrClosed
	}
	if offset < 0 || length <= 0 || offset+length > buf.Len() {
		return nil, fmt.Errorf("register MR: range [%d, %d) outside a %d-byte buffer", offset, offset+length, buf.Len())
	}
	addr := unsafe.Pointer(&buf.data[offset])
	mr, err := C.ibv_reg_mr(p.pd, addr, C.size_t(length), C.int(access))
	if mr == nil {
		return nil, verbErr("ibv_reg_mr", fmt.Sprintf("%d bytes, access 0x%x", length, int(access)), err)
	}
	m := &MR{mr: mr, buf: buf, addr: uint64(uintptr(addr)), size: length}
	m.res.init("mr", func() error {
		return rcErr("ibv_dereg_mr", "", C.ibv_dereg_mr(mr))
	}, &p.res, &buf.res)
	return m, nil
}

// RegisterAddr registers length bytes at addr, memory this package does not
// own: GPU memory from cudaMalloc, which the kernel can pin only through a
// peer-memory client (nvidia_peermem). The caller keeps the memory alive
// until the MR is closed.
func (p *PD) RegisterAddr(addr uintptr, length int, access Access) (*MR, error) {
	if p.res.isClosed() {
		return nil, ErrClosed
	}
	if addr == 0 || length <= 0 {
		return nil, fmt.Errorf("register MR: bad range %#x + %d", addr, length)
	}
	// The address is not Go memory: it goes to C as an integer and the
	// kernel resolves it.
	mr, err := C.rb_reg_mr_addr(p.pd, C.uintptr_t(addr), C.size_t(length), C.int(access))
	if mr == nil {
		return nil, verbErr("ibv_reg_mr", fmt.Sprintf("%d bytes at %#x, access 0x%x", length, addr, int(access)), err)
	}
	m := &MR{mr: mr, addr: uint64(addr), size: length}
	m.res.init("mr", func() error {
		return rcErr("ibv_dereg_mr", "", C.ibv_dereg_mr(mr))
	}, &p.res)
	return m, nil
}

// RegisterDmabuf registers length bytes from offset of the dma-buf fd,
// addressed in work requests from iova (ibv_reg_dmabuf_mr). The MR holds its
// own reference to the dma-buf: the caller may close fd once this returns.
func (p *PD) RegisterDmabuf(fd int, offset uint64, length int, iova uint64, access Access) (*MR, error) {
	if p.res.isClosed() {
		return nil, ErrClosed
	}
	if fd < 0 || length <= 0 {
		return nil, fmt.Errorf("register dma-buf MR: bad fd %d or length %d", fd, length)
	}
	mr, err := C.ibv_reg_dmabuf_mr(p.pd, C.uint64_t(offset), C.size_t(length), C.uint64_t(iova), C.int(fd), C.int(access))
	if mr == nil {
		return nil, verbErr("ibv_reg_dmabuf_mr", fmt.Sprintf("%d bytes of fd %d, access 0x%x", length, fd, int(access)), err)
	}
	m := &MR{mr: mr, addr: iova, size: length}
	m.res.init("mr", func() error {
		return rcErr("ibv_dereg_mr", "", C.ibv_dereg_mr(mr))
	}, &p.res)
	return m, nil
}

// LKey is the local key for scatter/gather entries.
func (m *MR) LKey() uint32 { return uint32(m.mr.lkey) }

// RKey is the key a peer needs for RDMA READ, WRITE and atomics.
func (m *MR) RKey() uint32 { return uint32(m.mr.rkey) }

// Addr is the registered range's start address.
func (m *MR) Addr() uint64 { return m.addr }

// Len is the registered range's length.
func (m *MR) Len() int { return m.size }

// Close deregisters the region.
func (m *MR) Close() error { return m.res.close() }
