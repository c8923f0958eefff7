package verbs

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// DeviceNames lists the RDMA devices libibverbs sees.
func DeviceNames() ([]string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, listErr(err)
	}
	defer C.ibv_free_device_list(list)
	devs := unsafe.Slice(list, int(n))
	names := make([]string, 0, len(devs))
	for _, d := range devs {
		names = append(names, C.GoString(C.ibv_get_device_name(d)))
	}
	return names, nil
}

// DefaultDevice is the first RDMA device, the one every command uses when
// none is named.
func DefaultDevice() (string, error) {
	names, err := DeviceNames()
	if errors.Is(err, ErrNoRDMA) {
		return "", err // one line that says what to do
	}
	if err != nil {
		return "", fmt.Errorf("list RDMA devices: %w", err)
	}
	if len(names) == 0 {
		return "", ErrNoDevices
	}
	return names[0], nil
}

// ErrNoDevices: libibverbs lists no RDMA device at all.
var ErrNoDevices = errors.New("no RDMA devices found")

// Context is an open device. It owns the PDs and CQs made from it.
type Context struct {
	res  resource
	ctx  *C.struct_ibv_context
	name string
}

// Open opens a device by name (e.g. "mlx5_0", "rxe0").
func Open(name string) (*Context, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		if err, ok := listErr(err).(*noRDMAError); ok {
			err.noDevice = true
			return nil, err
		}
		return nil, fmt.Errorf("%w %q: %w", ErrNoDevice, name, listErr(err))
	}
	defer C.ibv_free_device_list(list)
	var known []string
	for _, d := range unsafe.Slice(list, int(n)) {
		known = append(known, C.GoString(C.ibv_get_device_name(d)))
		if C.GoString(C.ibv_get_device_name(d)) != name {
			continue
		}
		ctx, err := C.ibv_open_device(d)
		if ctx == nil {
			return nil, verbErr("ibv_open_device", name, err)
		}
		c := &Context{ctx: ctx, name: name}
		c.res.init("context", func() error {
			return rcErr("ibv_close_device", name, C.ibv_close_device(ctx))
		})
		return c, nil
	}
	if len(known) == 0 {
		return nil, fmt.Errorf("%w: %q (%w)", ErrNoDevice, name, ErrNoDevices)
	}
	return nil, fmt.Errorf("%w: %q (devices: %s)", ErrNoDevice, name, strings.Join(known, ", "))
}

// Name is the device name.
func (c *Context) Name() string { return c.name }

// Close closes every PD, CQ, QP and MR made from the device, then the device.
func (c *Context) Close() error { return c.res.close() }

// DeviceAttr holds the device capabilities benchmarks size themselves by.
type DeviceAttr struct {
	FWVer           string
	MaxMRSize       uint64
	MaxQP           int
	MaxQPWR         int
	MaxSGE          int
	MaxCQ           int
	MaxCQE          int
	MaxMR           int
	MaxPD           int
	MaxQPRdAtom     int
	MaxQPInitRdAtom int
	AtomicCap       int // 0 none, 1 HCA, 2 global
	PhysPortCnt     int
	VendorID        uint32
	VendorPartID    uint32
}

// QueryDevice reads the device's attributes.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	if c.res.isClosed() {
		return DeviceAttr{}, ErrClosed
	}
	var a C.struct_ibv_device_attr
	if err := rcErr("ibv_query_device", c.name, C.ibv_query_device(c.ctx, &a)); err != nil {
		return DeviceAttr{}, err
	}
	return DeviceAttr{
		FWVer:           C.GoString(&a.fw_ver[0]),
		MaxMRSize:       uint64(a.max_mr_size),
		MaxQP:           int(a.max_qp),
		MaxQPWR:         int(a.max_qp_wr),
		MaxSGE:          int(a.max_sge),
		MaxCQ:           int(a.max_cq),
		MaxCQE:          int(a.max_cqe),
		MaxMR:           int(a.max_mr),
		MaxPD:           int(a.max_pd),
		MaxQPRdAtom:     int(a.max_qp_rd_atom),
		MaxQPInitRdAtom: int(a.max_qp_init_rd_atom),
		AtomicCap:       int(a.atomic_cap),
		PhysPortCnt:     int(a.phys_port_cnt),
		VendorID:        uint32(a.vendor_id),
		VendorPartID:    uint32(a.vendor_part_id),
	}, nil
}

// MTU is a path MTU in bytes (256, 512, 1024, 2048, 4096).
type MTU int

func mtuFromEnum(e C.enum_ibv_mtu) MTU {
	if e < 1 || e > 5 {
		return 0
	}
	return MTU(128 << uint(e))
}

func (m MTU) enum() (C.enum_ibv_mtu, error) {
	for e := C.enum_ibv_mtu(1); e <= 5; e++ {
		if mtuFromEnum(e) == m {
			return e, nil
		}
	}
	return 0, fmt.Errorf("invalid path MTU %d (want 256, 512, 1024, 2048 or 4096)", int(m))
}

var portStates = map[C.enum_ibv_port_state]rdmasys.PortState{
	C.IBV_PORT_NOP: rdmasys.PortNOP, C.IBV_PORT_DOWN: rdmasys.PortDown, C.IBV_PORT_INIT: rdmasys.PortInit,
	C.IBV_PORT_ARMED: rdmasys.PortArmed, C.IBV_PORT_ACTIVE: rdmasys.PortActive, C.IBV_PORT_ACTIVE_DEFER: rdmasys.PortActiveDefer,
}

var physStates = map[int]string{
	1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining",
	5: "LinkUp", 6: "LinkErrorRecovery", 7: "PhyTest",
}

// Port speeds per lane in Gb/s as ibstat and the kernel's rate file report them.
var laneSpeeds = map[int]struct {
	gbps float64
	name string
}{
	1: {2.5, "SDR"}, 2: {5, "DDR"}, 4: {10, "QDR"}, 8: {10, "FDR10"}, 16: {14, "FDR"},
	32: {25, "EDR"}, 64: {50, "HDR"}, 128: {100, "NDR"}, 256: {200, "XDR"},
}

var laneWidths = map[int]int{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}

// RateFromPort turns the active_speed and active_width codes into a rate.
func RateFromPort(speedCode, widthCode int) (rate float64, lanes int, speedName string) {
	s, ok := laneSpeeds[speedCode]
	lanes = laneWidths[widthCode]
	if !ok || lanes == 0 {
		return 0, lanes, s.name
	}
	return s.gbps * float64(lanes), lanes, s.name
}

// QueryPort reads a port's attributes into the port model. What only sysfs
// holds (RateText) stays empty, and the GID table is GIDTable's.
func (c *Context) QueryPort(port int) (rdmasys.Port, error) {
	if c.res.isClosed() {
		return rdmasys.Port{}, ErrClosed
	}
	if port < 1 || port > 255 {
		return rdmasys.Port{}, fmt.Errorf("port %d of %s: port numbers start at 1", port, c.name)
	}
	var a C.struct_ibv_port_attr
	if err := rcErr("ibv_query_port", fmt.Sprintf("%s port %d", c.name, port), C.rb_query_port(c.ctx, C.uint8_t(port), &a)); err != nil {
		return rdmasys.Port{}, err
	}
	p := rdmasys.Port{
		Device:     c.name,
		Number:     port,
		State:      portStates[a.state],
		PhysState:  physStates[int(a.phys_state)],
		ActiveMTU:  int(mtuFromEnum(a.active_mtu)),
		MaxMTU:     int(mtuFromEnum(a.max_mtu)),
		LID:        uint16(a.lid),
		GIDTblLen:  int(a.gid_tbl_len),
		MaxMsgSize: uint32(a.max_msg_sz),
		LinkLayer:  rdmasys.InfiniBand,
	}
	if a.link_layer == C.IBV_LINK_LAYER_ETHERNET {
		p.LinkLayer = rdmasys.Ethernet
	}
	if p.State == "" {
		p.State = rdmasys.PortState(fmt.Sprintf("state %d", int(a.state)))
	}
	p.RateGbps, p.Width, p.SpeedName = RateFromPort(int(a.active_speed), int(a.active_width))
	return p, nil
}

// GID reads one GID table entry's address.
func (c *Context) GID(port, index int) ([16]byte, error) {
	var g C.union_ibv_gid
	var out [16]byte
	if c.res.isClosed() {
		return out, ErrClosed
	}
	if err := rcErr("ibv_query_gid", fmt.Sprintf("%s port %d index %d", c.name, port, index),
		C.ibv_query_gid(c.ctx, C.uint8_t(port), C.int(index), &g)); err != nil {
		return out, err
	}
	copy(out[:], C.GoBytes(unsafe.Pointer(&g), 16))
	return out, nil
}
