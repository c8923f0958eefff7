package verbs

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"net"
	"unsafe"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// SysfsRoot is where GID types and netdevs are read from; libibverbs has no
// portable verb for them on every kernel, sysfs does.
var SysfsRoot = "/sys"

// GIDTable returns a port's populated GID entries with type and netdev:
// from one ibv_query_gid_table call where the library and kernel have it,
// else from sysfs (three files an entry: on rxe's 1024-entry table that
// is seconds under emulation, a large share of a short run).
func (c *Context) GIDTable(port int) ([]rdmasys.GID, error) {
	if SysfsRoot == "/sys" {
		if gids, err := c.queryGIDTable(port); err == nil {
			return gids, nil
		}
	}
	return rdmasys.ReadGIDs(SysfsRoot, c.name, port)
}

var gidTypes = map[C.uint32_t]rdmasys.GIDType{
	C.IBV_GID_TYPE_IB:      rdmasys.GIDTypeIB,
	C.IBV_GID_TYPE_ROCE_V1: rdmasys.GIDTypeRoCEv1,
	C.IBV_GID_TYPE_ROCE_V2: rdmasys.GIDTypeRoCEv2,
}

func (c *Context) queryGIDTable(port int) ([]rdmasys.GID, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return nil, err
	}
	if c.res.isClosed() {
		return nil, ErrClosed
	}
	// The call returns the valid entries of every port, so the buffer holds
	// a table per port. (Eight tables' worth was refused with EINVAL on
	// rxe under 6.1; on any error GIDTable falls back to sysfs.)
	da, err := c.QueryDevice()
	if err != nil {
		return nil, err
	}
	n := max(pa.GIDTblLen, 1) * max(da.PhysPortCnt, 1)
	entries := make([]C.struct_ibv_gid_entry, n)
	got := C.ibv_query_gid_table(c.ctx, &entries[0], C.size_t(n), 0)
	if got < 0 {
		return nil, rcErr("ibv_query_gid_table", c.name, C.int(got))
	}
	var gids []rdmasys.GID
	for _, e := range entries[:got] {
		if int(e.port_num) != port {
			continue
		}
		addr := net.IP(C.GoBytes(unsafe.Pointer(&e.gid), 16))
		if addr.IsUnspecified() {
			continue
		}
		typ, known := gidTypes[e.gid_type]
		if !known {
			return nil, fmt.Errorf("ibv_query_gid_table %s: GID type %d unknown", c.name, int(e.gid_type))
		}
		g := rdmasys.GID{Index: int(e.gid_index), Type: typ, Addr: addr}
		if e.ndev_ifindex != 0 {
			if ifc, err := net.InterfaceByIndex(int(e.ndev_ifindex)); err == nil {
				g.Netdev = ifc.Name
			}
		}
		gids = append(gids, g)
	}
	return gids, nil
}

// DefaultGIDIndex is the GID index connections use when the user gives none:
// the RoCE v2 IPv4 entry on Ethernet ports, and -1 (no GRH, LID routing) on
// InfiniBand. The reason says what was chosen and why.
func (c *Context) DefaultGIDIndex(port int) (int, string, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return 0, "", err
	}
	if pa.LinkLayer != rdmasys.Ethernet {
		return -1, "InfiniBand port: LID routing, no GRH", nil
	}
	gids, err := c.GIDTable(port)
	if err != nil {
		return 0, "", err
	}
	g, reason, err := rdmasys.PickRoCEv2IPv4(gids)
	if err != nil {
		return 0, "", fmt.Errorf("%s port %d: %w", c.name, port, err)
	}
	return g.Index, reason, nil
}
