package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/rdmabench/rdmabench/engine"
	"github.com/rdmabench/rdmabench/rdmasys"
)

// deviceFlags are the flags both sides share.
type deviceFlags struct {
	dev      *string
	port     *int
	gidIndex *int
	tcpPort  *int
}

func addDeviceFlags(fs *pflag.FlagSet) deviceFlags {
	return deviceFlags{
		dev:      fs.StringP("ib-dev", "d", "", "RDMA device (default: the first one)"),
		port:     fs.IntP("ib-port", "i", 1, "device port"),
		gidIndex: fs.IntP("gid-index", "x", -1, "GID index (default: the port's RoCE v2 IPv4 GID on Ethernet)"),
		tcpPort:  fs.IntP("port", "p", engine.DefaultPort, "TCP port of the control connection"),
	}
}

func (d deviceFlags) config() engine.DeviceConfig {
	return engine.DeviceConfig{Device: *d.dev, Port: *d.port, GIDIndex: *d.gidIndex}
}

func (d deviceFlags) validate() error {
	if *d.port < 1 || *d.port > 255 {
		return fmt.Errorf("--ib-port %d outside 1..255", *d.port)
	}
	if *d.gidIndex < -1 || *d.gidIndex > 255 {
		return fmt.Errorf("--gid-index %d outside 0..255", *d.gidIndex)
	}
	if *d.tcpPort < 1 || *d.tcpPort > 65535 {
		return fmt.Errorf("--port %d outside 1..65535", *d.tcpPort)
	}
	return nil
}

// parseCPUFlag reads a CPU list flag; "" is nil (the default).
func parseCPUFlag(name, v string) ([]int, error) {
	if v == "" {
		return nil, nil
	}
	list, err := rdmasys.ParseCPUList(v)
	if err != nil || len(list) == 0 {
		return nil, fmt.Errorf("%s %q: want a CPU list such as 0-3,8", name, v)
	}
	return list, nil
}
