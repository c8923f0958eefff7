package verbs

import (
	"fmt"

	"github.com/rdmabench/rdmabench/rdmasys"
)

// SysfsRoot is where GID types and netdevs are read from; libibverbs has no
// portable verb for them on every kernel, sysfs does.
var SysfsRoot = "/sys"

// GIDTable returns a port's populated GID entries with type and netdev.
func (c *Context) GIDTable(port int) ([]rdmasys.GID, error) {
	return rdmasys.ReadGIDs(SysfsRoot, c.name, port)
}

// DefaultGIDIndex is the GID index connections use when the user gives none:
// the RoCE v2 IPv4 entry on Ethernet ports, and -1 (no GRH, LID routing) on
// InfiniBand. The reason says what was chosen and why.
func (c *Context) DefaultGIDIndex(port int) (int, string, error) {
	pa, err := c.QueryPort(port)
	if err != nil {
		return 0, "", err
	}
	if pa.LinkLayer != "Ethernet" {
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
