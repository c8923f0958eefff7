package doctor

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// DevinfoMTUs is a PortQuerier over saved `ibv_devinfo -v` output, for hosts
// and fixtures where the verbs package is not at hand. Keys are "dev:port".
type DevinfoMTUs map[string][2]int // active, max

// PortMTU implements PortQuerier.
func (d DevinfoMTUs) PortMTU(dev string, port int) (active, max int, err error) {
	v, ok := d[fmt.Sprintf("%s:%d", dev, port)]
	if !ok {
		return 0, 0, fmt.Errorf("%s port %d not in the ibv_devinfo output", dev, port)
	}
	return v[0], v[1], nil
}

// ParseDevinfo reads the "hca_id:", "port:", "max_mtu:" and "active_mtu:"
// lines of `ibv_devinfo` output ("active_mtu:  1024 (3)").
func ParseDevinfo(r io.Reader) (DevinfoMTUs, error) {
	out := DevinfoMTUs{}
	var dev string
	var port int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		key, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		if len(fields) == 0 {
			continue
		}
		switch key {
		case "hca_id":
			dev, port = fields[0], 0
		case "port":
			n, err := strconv.Atoi(fields[0])
			if err != nil {
				return nil, fmt.Errorf("ibv_devinfo: bad port line %q", sc.Text())
			}
			port = n
		case "max_mtu", "active_mtu":
			if dev == "" || port == 0 {
				return nil, fmt.Errorf("ibv_devinfo: %s outside a port section", key)
			}
			n, err := strconv.Atoi(fields[0])
			if err != nil {
				return nil, fmt.Errorf("ibv_devinfo: bad %s %q", key, val)
			}
			k := fmt.Sprintf("%s:%d", dev, port)
			v := out[k]
			if key == "active_mtu" {
				v[0] = n
			} else {
				v[1] = n
			}
			out[k] = v
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read ibv_devinfo output: %w", err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("ibv_devinfo output lists no port MTUs")
	}
	return out, nil
}
