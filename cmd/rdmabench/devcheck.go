package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/verbs"
)

// errNoDevices is the one line for a kernel with RDMA and no device in it.
var errNoDevices = fmt.Errorf("%w (is a driver loaded? try 'make demo' for the Soft-RoCE target)", verbs.ErrNoDevices)

// checkDevice tells, before anything listens, connects or measures,
// whether the device, port and GID index a side will use exist, as
// perftest does at start: BadInput for a name, port or index that is not
// there (the line lists what is), NotMeasured for no RDMA at all. A port
// that exists but is not ACTIVE is left to the run, which says why.
func checkDevice(dc engine.DeviceConfig, flag string) (int, error) {
	names, err := verbs.DeviceNames()
	if err != nil {
		return exitcode.NotMeasured, err
	}
	if len(names) == 0 {
		return exitcode.NotMeasured, errNoDevices
	}
	name := dc.Device
	if name == "" {
		name = names[0]
	} else if !slices.Contains(names, name) {
		return exitcode.BadInput, fmt.Errorf("%s %s: no such RDMA device (devices: %s)", flag, name, strings.Join(names, ", "))
	}
	ctx, err := verbs.Open(name)
	if err != nil {
		return exitcode.NotMeasured, err
	}
	defer ctx.Close()
	port := max(dc.Port, 1)
	da, err := ctx.QueryDevice()
	if err != nil {
		return exitcode.NotMeasured, err
	}
	if port > da.PhysPortCnt {
		return exitcode.BadInput, fmt.Errorf("--ib-port %d: %s has %s", port, name, portRange(da.PhysPortCnt))
	}
	if dc.GIDIndex >= 0 {
		gids, err := ctx.GIDTable(port)
		if err != nil {
			return 0, nil // the run's own query says more
		}
		idx := make([]string, 0, len(gids))
		for _, g := range gids {
			if g.Index == dc.GIDIndex {
				return 0, nil
			}
			idx = append(idx, strconv.Itoa(g.Index))
		}
		return exitcode.BadInput, fmt.Errorf("--gid-index %d: %s port %d has no such GID (populated: %s)", dc.GIDIndex, name, port, orNone(idx))
	}
	return 0, nil
}

func portRange(n int) string {
	if n == 1 {
		return "port 1 only"
	}
	return fmt.Sprintf("ports 1..%d", n)
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

// isNoRDMA: no RDMA in the kernel, or no device in it.
func isNoRDMA(err error) bool {
	return errors.Is(err, verbs.ErrNoRDMA) || errors.Is(err, verbs.ErrNoDevices)
}
