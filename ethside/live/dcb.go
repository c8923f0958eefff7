package live

import (
	"fmt"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdmabench/rdmabench/ethside"
)

// linux/dcbnl.h; x/sys/unix has RTM_GETDCB but none of these.
const (
	dcbCmdIEEEGet     = 21 // DCB_CMD_IEEE_GET
	dcbAttrIfname     = 1  // DCB_ATTR_IFNAME
	dcbAttrIEEE       = 13 // DCB_ATTR_IEEE
	dcbAttrIEEEPFC    = 2  // DCB_ATTR_IEEE_PFC: struct ieee_pfc
	dcbAttrIEEEApps   = 3  // DCB_ATTR_IEEE_APP_TABLE
	dcbAttrIEEEApp    = 1  // DCB_ATTR_IEEE_APP: struct dcb_app
	ieeeAppSelDSCP    = 5  // IEEE_8021QAZ_APP_SEL_DSCP
	pfcEnOffset       = 1  // struct ieee_pfc: pfc_cap, pfc_en, ...
	dcbAppLen         = 4  // struct dcb_app: selector, priority, protocol u16
	rtnlTimeout       = 5 * time.Second
	maxApps           = 1024 // 64 DSCP values, a few other selectors
	afUnspecDCBFamily = unix.AF_UNSPEC
)

type rtnlConn struct{ c *netlink.Conn }

func (r *rtnlConn) close() { _ = r.c.Close() }

// dcb asks RTM_GETDCB with DCB_CMD_IEEE_GET: the IEEE 802.1Qaz PFC enable
// bits and the APP table, whose DSCP entries are the DSCP-to-priority map.
func (k *kernel) dcb(name string, p *problems) *ethside.DCB {
	if k.rtnl == nil {
		c, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
		if err != nil {
			note(p, "netlink NETLINK_ROUTE dial", name, err)
			return nil
		}
		k.rtnl = &rtnlConn{c}
	}
	ae := netlink.NewAttributeEncoder()
	ae.String(dcbAttrIfname, name)
	attrs, err := ae.Encode()
	if err != nil {
		note(p, "RTM_GETDCB encode", name, err)
		return nil
	}
	// struct dcbmsg: dcb_family, cmd, dcb_pad.
	data := append([]byte{afUnspecDCBFamily, dcbCmdIEEEGet, 0, 0}, attrs...)
	_ = k.rtnl.c.SetDeadline(time.Now().Add(rtnlTimeout))
	msgs, err := k.rtnl.c.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETDCB, Flags: netlink.Request},
		Data:   data,
	})
	if err != nil {
		note(p, "RTM_GETDCB DCB_CMD_IEEE_GET", name, err)
		return nil
	}
	if len(msgs) != 1 || len(msgs[0].Data) < 4 {
		p.add("RTM_GETDCB DCB_CMD_IEEE_GET %s: %d replies", name, len(msgs))
		return nil
	}
	d, err := parseDCBIEEE(msgs[0].Data[4:])
	if err != nil {
		p.add("RTM_GETDCB DCB_CMD_IEEE_GET %s: %v", name, err)
		return nil
	}
	d.Source = "rtnetlink RTM_GETDCB DCB_CMD_IEEE_GET " + name
	return d
}

// parseDCBIEEE reads the attributes after struct dcbmsg.
func parseDCBIEEE(b []byte) (*ethside.DCB, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return nil, err
	}
	d := &ethside.DCB{}
	for ad.Next() {
		if ad.Type() == dcbAttrIEEE {
			ad.Nested(func(nd *netlink.AttributeDecoder) error {
				return parseIEEE(nd, d)
			})
		}
	}
	if err := ad.Err(); err != nil {
		return nil, err
	}
	return d, nil
}

func parseIEEE(nd *netlink.AttributeDecoder, d *ethside.DCB) error {
	for nd.Next() {
		switch nd.Type() {
		case dcbAttrIEEEPFC:
			b := nd.Bytes()
			if len(b) <= pfcEnOffset {
				return fmt.Errorf("DCB_ATTR_IEEE_PFC of %d bytes", len(b))
			}
			var en [8]bool
			for prio := range en {
				en[prio] = b[pfcEnOffset]&(1<<prio) != 0
			}
			d.PFCEnabled = &en
		case dcbAttrIEEEApps:
			nd.Nested(func(ad *netlink.AttributeDecoder) error {
				return parseApps(ad, d)
			})
		}
	}
	return nil
}

// parseApps keeps the DSCP entries of the APP table (selector 5: the
// protocol is the DSCP); a driver in DSCP trust shows them (mlx5 adds
// them when trust is set to dscp).
func parseApps(ad *netlink.AttributeDecoder, d *ethside.DCB) error {
	for n := 0; ad.Next(); n++ {
		if n >= maxApps {
			return fmt.Errorf("APP table over %d entries", maxApps)
		}
		b := ad.Bytes()
		if ad.Type() != dcbAttrIEEEApp || len(b) < dcbAppLen || b[0] != ieeeAppSelDSCP {
			continue
		}
		dscp := int(nativeU16(b[2:]))
		if dscp > 63 || b[1] > 7 {
			continue
		}
		if d.DSCPPrio == nil {
			d.DSCPPrio = map[int]int{}
		}
		d.DSCPPrio[dscp] = int(b[1])
	}
	return nil
}
