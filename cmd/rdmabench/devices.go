package main

import (
	"io"
	"os"

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
		return fail(stderr, "devices: unexpected argument %q", fs.Arg(0))
	}
	var names []string
	if *dev != "" {
		names = []string{*dev}
	}
	var devs []inventory.Device
	var err error
	if *sysRoot != "" {
		if st, serr := os.Stat(*sysRoot); serr != nil || !st.IsDir() {
			return fail(stderr, "devices: --sysfs-root %s is not a readable directory", *sysRoot)
		}
		devs, err = inventory.FromSysfs(*sysRoot, names)
	} else {
		devs, err = inventory.Collect(names)
	}
	if err != nil {
		return fail(stderr, "devices: %v", err)
	}
	if len(devs) == 0 && *sysRoot != "" {
		return fail(stderr, "devices: no RDMA devices in %s (no class/infiniband entries)", *sysRoot)
	}
	if len(devs) == 0 {
		return fail(stderr, "devices: no RDMA devices found (is rdma-core installed and a driver loaded? try 'make demo' for the Soft-RoCE target)")
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
