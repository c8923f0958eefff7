package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
)

// AddressPath is where an agent serves its address record, beside /metrics.
const AddressPath = "/rdmabench/address"

// MaxAddressBytes bounds an address record as read: a few hundred bytes
// hold one; more is refused, not read on.
const MaxAddressBytes = 2048

// AddressVersion is the record's version.
const AddressVersion = 1

// Address is what a peer needs to send an agent UD probes.
type Address struct {
	Version int    `json:"version"`
	Host    string `json:"host"`
	Dev     string `json:"dev,omitempty"` // the RNIC, for an agent per RNIC
	GID     net.IP `json:"gid"`           // 16 bytes; written as IPv6 text
	QPN     uint32 `json:"qpn"`           // 24 bits
	QKey    uint32 `json:"qkey"`
	LID     uint16 `json:"lid"` // 0 on RoCE
	Clock   Clock  `json:"clock"`
}

// Validate says what is wrong with a; a record that fails is not used.
func (a Address) Validate() error {
	switch {
	case a.Version != AddressVersion:
		return fmt.Errorf("address record version %d, this agent reads %d", a.Version, AddressVersion)
	case a.Host == "" || len(a.Host) > 253 || len(a.Dev) > 64:
		return fmt.Errorf("address record: host %q or dev %q empty or too long", a.Host, a.Dev)
	case len(a.GID) != net.IPv6len:
		return fmt.Errorf("address record: GID of %d bytes, want 16", len(a.GID))
	case a.QPN < 2 || a.QPN > 0xFFFFFF: // QP0 and QP1 are the management QPs
		return fmt.Errorf("address record: QPN %#x outside 2..0xffffff", a.QPN)
	case a.QKey&0x80000000 != 0: // a privileged Q_Key a user process cannot send with
		return fmt.Errorf("address record: Q_Key %#x is privileged", a.QKey)
	case !a.Clock.valid():
		return fmt.Errorf("address record: clock %d", uint8(a.Clock))
	}
	return nil
}

// MarshalJSON writes the GID as 16 bytes' IPv6 text (net.IP would write an
// IPv4-mapped GID as a.b.c.d and lose that it is a GID).
func (a Address) MarshalJSON() ([]byte, error) {
	type plain Address
	gid := ""
	if len(a.GID) == net.IPv6len {
		gid = netip.AddrFrom16([16]byte(a.GID)).String()
	}
	return json.Marshal(struct {
		plain
		GID string `json:"gid"`
	}{plain(a), gid})
}

// UnmarshalJSON reads the GID from IPv6 text into 16 bytes, and refuses
// fields the record does not have (the decoder's own setting does not
// reach a custom unmarshaller).
func (a *Address) UnmarshalJSON(b []byte) error {
	type plain Address
	var v struct {
		plain
		GID string `json:"gid"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*a = Address(v.plain)
	a.GID = nil
	if ip, err := netip.ParseAddr(v.GID); err == nil && ip.Zone() == "" {
		gid := ip.As16()
		a.GID = gid[:]
	}
	return nil
}

// ReadAddress reads one address record of at most MaxAddressBytes, with no
// unknown fields and nothing after it, and validates it.
func ReadAddress(r io.Reader) (Address, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxAddressBytes+1))
	if err != nil {
		return Address{}, err
	}
	if len(b) > MaxAddressBytes {
		return Address{}, fmt.Errorf("address record over %d bytes", MaxAddressBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var a Address
	if err := dec.Decode(&a); err != nil {
		return Address{}, fmt.Errorf("address record: %v", err)
	}
	if dec.More() {
		return Address{}, errors.New("address record: more after the record")
	}
	return a, a.Validate()
}
