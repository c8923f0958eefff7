package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/rdmabench/rdmabench/internal/exitcode"
	"github.com/rdmabench/rdmabench/rdmasys"

	"github.com/rdmabench/rdmabench/inventory"
)

func init() {
	register("devices", "list RDMA devices, ports, rates, MTUs and GID tables", runDevices)
}

func runDevices(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("devices", stderr)
	dev := fs.StringP("ib-dev", "d", "", "show only this device (e.g. mlx5_0, rxe0)")
	asJSON := fs.Bool("json", false, "write one JSON document to stdout")
	sysRoot := fs.String("sysfs-root", "", "describe the devices of this sysfs tree (a capture) without opening any; MTUs, which only ibv_query_port knows, are left out")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		return usageErr(stderr, "devices", "unexpected argument %q", fs.Arg(0))
	}
	var names []string
	if *dev != "" {
		names = []string{*dev}
	}
	var devs []inventory.Device
	var err error
	if *sysRoot != "" {
		if st, serr := os.Stat(*sysRoot); serr != nil || !st.IsDir() {
			return usageErr(stderr, "devices", "--sysfs-root %s is not a readable directory", *sysRoot)
		}
		devs, err = inventory.FromSysfs(*sysRoot, names)
	} else {
		devs, err = inventory.Collect(names)
	}
	switch {
	case err != nil && errors.Is(err, rdmasys.ErrNoDevice): // verbs.ErrNoDevice too
		return usageErr(stderr, "devices", "%v", err) // -d names what is not there
	case err != nil && isNoRDMA(err):
		fmt.Fprintf(stderr, "rdmabench devices: %v\n", err)
		return exitcode.NotMeasured
	case err != nil:
		return fail(stderr, "devices: %v", err)
	case len(devs) == 0 && *sysRoot != "":
		fmt.Fprintf(stderr, "rdmabench devices: no RDMA devices in %s (no class/infiniband entries)\n", *sysRoot)
		return exitcode.NotMeasured
	case len(devs) == 0:
		fmt.Fprintln(stderr, "rdmabench devices: no RDMA devices found (is rdma-core installed and a driver loaded? try 'make demo' for the Soft-RoCE target)")
		return exitcode.NotMeasured
	}
	if *asJSON {
		err = inventory.WriteJSON(stdout, devs, toolInfo())
	} else {
		err = inventory.WriteText(stdout, devs)
	}
	if err != nil {
		return fail(stderr, "devices: %v", err)
	}
	return 0
}
