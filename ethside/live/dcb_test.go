package live

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/mdlayher/netlink"
)

// dcbReply encodes the attributes of an RTM_GETDCB DCB_CMD_IEEE_GET
// answer as dcbnl_ieee_fill builds them: DCB_ATTR_IEEE holding
// DCB_ATTR_IEEE_PFC (struct ieee_pfc) and DCB_ATTR_IEEE_APP_TABLE (one
// DCB_ATTR_IEEE_APP struct dcb_app per entry).
func dcbReply(t *testing.T, pfc []byte, apps [][3]int) []byte {
	t.Helper()
	ae := netlink.NewAttributeEncoder()
	ae.String(dcbAttrIfname, "eth2")
	ae.Nested(dcbAttrIEEE, func(ie *netlink.AttributeEncoder) error {
		if pfc != nil {
			ie.Bytes(dcbAttrIEEEPFC, pfc)
		}
		ie.Nested(dcbAttrIEEEApps, func(te *netlink.AttributeEncoder) error {
			for _, a := range apps { // selector, priority, protocol
				app := []byte{byte(a[0]), byte(a[1]), 0, 0}
				binary.NativeEndian.PutUint16(app[2:], uint16(a[2]))
				te.Bytes(dcbAttrIEEEApp, app)
			}
			return nil
		})
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDCBIEEE(t *testing.T) {
	pfc := make([]byte, 136) // struct ieee_pfc: cap, en, mbc, delay, requests[8], indications[8]
	pfc[0], pfc[1] = 8, 0x08 // PFC on priority 3 only
	d, err := parseDCBIEEE(dcbReply(t, pfc, [][3]int{
		{5, 3, 26}, {5, 6, 48}, // DSCP 26 -> 3, DSCP 48 -> 6
		{1, 4, 0x8915},         // ethertype selector (RoCEv1): not DSCP
		{5, 9, 10}, {5, 1, 64}, // out of range priority / DSCP: ignored
	}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&[8]bool{3: true}); !reflect.DeepEqual(d.PFCEnabled, want) {
		t.Errorf("PFCEnabled = %v, want %v", d.PFCEnabled, want)
	}
	if want := map[int]int{26: 3, 48: 6}; !reflect.DeepEqual(d.DSCPPrio, want) {
		t.Errorf("DSCPPrio = %v, want %v", d.DSCPPrio, want)
	}

	d, err = parseDCBIEEE(dcbReply(t, nil, nil))
	if err != nil || d.PFCEnabled != nil || d.DSCPPrio != nil {
		t.Errorf("empty IEEE: %+v %v, want nil parts", d, err)
	}
}

func TestParseDCBIEEEHostile(t *testing.T) {
	good := dcbReply(t, []byte{8, 1}, [][3]int{{5, 3, 26}})
	for _, b := range [][]byte{dcbReply(t, []byte{8}, nil), {1, 2, 3}, good[:len(good)-3]} {
		if _, err := parseDCBIEEE(b); err == nil {
			t.Errorf("% x: no error", b)
		}
	}
	for n := range len(good) { // every truncation: no panic
		_, _ = parseDCBIEEE(good[:n])
	}
}
