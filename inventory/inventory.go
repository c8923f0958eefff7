// Package inventory describes the RDMA devices of a host: what ibv_devinfo,
// ibstat and show_gids tell operators, in one report. Collect reads live
// devices through verbs and sysfs; the reports are plain functions of the data.
package inventory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rdmabench/rdmabench/internal/version"
	"github.com/rdmabench/rdmabench/rdmasys"
	"github.com/rdmabench/rdmabench/verbs"
)

// SchemaVersion is the version of the JSON document WriteJSON emits.
const SchemaVersion = 1

// Port is one port: the port model (state, rate, MTUs, LID and GID table,
// from ibv_query_port or a sysfs tree) and what the inventory derives from
// its GID table.
type Port struct {
	rdmasys.Port
	Netdev string `json:"netdev,omitempty"`
	// NCCLGIDIndex is the index NCCL_IB_GID_INDEX should name on RoCE (the
	// RoCE v2 IPv4 entry), -1 when there is none or the port is InfiniBand.
	NCCLGIDIndex int    `json:"nccl_gid_index"`
	GIDReason    string `json:"gid_reason,omitempty"`
}

// Device is one RDMA device.
type Device struct {
	Name     string `json:"name"`
	FWVer    string `json:"fw_ver,omitempty"`
	NodeType string `json:"node_type,omitempty"`
	// IWARP, set for an iWARP device, says how it was told: "node type 4:
	// RNIC", or in a capture without node_type what the driver writes
	// ("hca_type I40IW; no node_type in the capture").
	IWARP string `json:"iwarp,omitempty"`
	Ports []Port `json:"ports"`
	// Capture is the sysfs tree the device was read from (FromSysfs);
	// NotInCapture names the fields such a tree cannot hold, left zero.
	Capture      string   `json:"capture,omitempty"`
	NotInCapture []string `json:"not_in_capture,omitempty"`
}

// Collect reads the named devices (all of them when names is empty).
func Collect(names []string) ([]Device, error) {
	all, err := verbs.DeviceNames()
	if errors.Is(err, verbs.ErrNoRDMA) {
		return nil, err // one line that says what to do
	}
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	if len(names) == 0 {
		names = all
	}
	var devs []Device
	for _, n := range names {
		d, err := collectOne(n, all)
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func collectOne(name string, known []string) (Device, error) {
	found := false
	for _, k := range known {
		found = found || k == name
	}
	if !found {
		return Device{}, fmt.Errorf("%w %q (devices: %s)", verbs.ErrNoDevice, name, listOrNone(known))
	}
	ctx, err := verbs.Open(name)
	if err != nil {
		return Device{}, err
	}
	defer ctx.Close()
	da, err := ctx.QueryDevice()
	if err != nil {
		return Device{}, err
	}
	sys, serr := rdmasys.ReadDevice(verbs.SysfsRoot, name) // node type only; verbs is authoritative
	d := Device{Name: name, FWVer: da.FWVer, NodeType: nodeTypeName(sys.NodeType)}
	if serr == nil {
		d.IWARP = iwarpClue(verbs.SysfsRoot, sys)
	}
	for port := 1; port <= da.PhysPortCnt; port++ {
		pa, err := ctx.QueryPort(port)
		if err != nil {
			return Device{}, err
		}
		gids, err := ctx.GIDTable(port)
		if err != nil {
			return Device{}, err
		}
		pa.GIDs = gids
		p := Port{Port: pa}
		Annotate(&p)
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

// Annotate fills the derived fields of a port: its netdev and the GID index
// NCCL should use.
func Annotate(p *Port) {
	for _, g := range p.GIDs {
		if g.Netdev != "" {
			p.Netdev = g.Netdev
			break
		}
	}
	p.NCCLGIDIndex = -1
	if p.LinkLayer != rdmasys.Ethernet {
		return
	}
	g, reason, err := rdmasys.PickRoCEv2IPv4(p.GIDs)
	if err != nil {
		p.GIDReason = err.Error()
		return
	}
	p.NCCLGIDIndex, p.GIDReason = g.Index, reason
}

func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// WriteText prints devices the way operators read ibstat and show_gids.
func WriteText(w io.Writer, devs []Device) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for i, d := range devs {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintf(tw, "%s", d.Name)
		switch {
		case d.NodeType != "":
			fmt.Fprintf(tw, "  node type %s", d.NodeType)
		case d.IWARP != "": // told otherwise: say how
			fmt.Fprintf(tw, "  iWARP (%s)", d.IWARP)
		}
		if d.FWVer != "" {
			fmt.Fprintf(tw, "  fw %s", d.FWVer)
		}
		if d.Capture != "" {
			fmt.Fprintf(tw, "  (read from %s, no device opened)", d.Capture)
		}
		fmt.Fprintln(tw)
		for _, p := range d.Ports {
			writePortText(tw, p, d.Capture != "")
		}
	}
	return tw.Flush()
}

func writePortText(w io.Writer, p Port, fromSysfs bool) {
	rate := fmt.Sprintf("%g Gb/s", p.RateGbps)
	if p.SpeedName != "" {
		rate += fmt.Sprintf(" (%dX %s)", p.Width, p.SpeedName)
	}
	mtu := fmt.Sprintf("MTU %d/%d (active/max)", p.ActiveMTU, p.MaxMTU)
	if fromSysfs {
		mtu = "MTU not in sysfs (ibv_query_port)"
	}
	fmt.Fprintf(w, "  port %d: %s (%s)  rate %s  %s  link %s", p.Number, p.State, p.PhysState, rate, mtu, p.LinkLayer)
	if p.Netdev != "" {
		fmt.Fprintf(w, "  netdev %s", p.Netdev)
	}
	if p.LinkLayer != rdmasys.Ethernet {
		fmt.Fprintf(w, "  lid %d", p.LID)
	}
	fmt.Fprintln(w)
	if len(p.GIDs) == 0 {
		fmt.Fprintln(w, "    no GIDs")
		return
	}
	fmt.Fprintln(w, "    GID\ttype\taddress\tnetdev\t")
	for _, g := range p.GIDs {
		mark := ""
		if g.Index == p.NCCLGIDIndex {
			mark = fmt.Sprintf("<- NCCL_IB_GID_INDEX=%d", g.Index)
		}
		fmt.Fprintf(w, "    %d\t%s\t%s\t%s\t%s\n", g.Index, g.Type, g.AddrString(), dash(g.Netdev), mark)
	}
	if p.LinkLayer == rdmasys.Ethernet && p.NCCLGIDIndex < 0 {
		fmt.Fprintf(w, "    warning: %s\n", p.GIDReason)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type jsonGID struct {
	Index   int    `json:"index"`
	Type    string `json:"type"`
	Address string `json:"address"`
	Netdev  string `json:"netdev,omitempty"`
}

// WriteJSON writes {"schema":1,"devices":[...],"version":{...}}; v is the
// binary's version (nil: left out).
func WriteJSON(w io.Writer, devs []Device, v *version.Info) error {
	type port struct {
		Port
		GIDs []jsonGID `json:"gids"`
	}
	type device struct {
		Device
		Ports []port `json:"ports"`
	}
	doc := struct {
		Schema  int           `json:"schema"`
		Devices []device      `json:"devices"`
		Version *version.Info `json:"version,omitempty"`
	}{Schema: SchemaVersion, Devices: []device{}, Version: v}
	for _, d := range devs {
		jd := device{Device: d, Ports: []port{}}
		for _, p := range d.Ports {
			jp := port{Port: p, GIDs: []jsonGID{}}
			for _, g := range p.GIDs {
				jp.GIDs = append(jp.GIDs, jsonGID{g.Index, string(g.Type), g.AddrString(), g.Netdev})
			}
			jd.Ports = append(jd.Ports, jp)
		}
		doc.Devices = append(doc.Devices, jd)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}
