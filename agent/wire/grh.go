package wire

import (
	"encoding/binary"
	"errors"
)

// GRHSize is the room a UD receive buffer keeps in front of the payload:
// the verbs write the packet's Global Route Header there (on RoCE v2 over
// IPv4, its last 20 bytes are the IPv4 header instead).
const GRHSize = 40

// ErrGRH is a receive whose header names no sender the agent can answer.
var ErrGRH = errors.New("no source GID in the datagram's header")

// SourceGID is the sender's GID from a UD receive's first GRHSize bytes,
// as ibv_init_ah_from_wc reads it: an IPv4 header in bytes 20 to 39 (RoCE
// v2 over IPv4) gives the IPv4-mapped GID of its source address; else an
// IPv6 or IB GRH (version 6) gives its SGID field. The IPv4 header is told
// apart from the tail of a GRH by its checksum, as rdma-core does, or,
// since rxe copies the header of a packet it sent to itself with the
// checksum left 0, by a zero checksum with the 20 bytes before it zero
// (where a GRH has its version 6).
func SourceGID(h []byte) ([16]byte, error) {
	var gid [16]byte
	if len(h) < GRHSize {
		return gid, ErrGRH
	}
	if ip := h[20:40]; ip[0] == 0x45 && (ipv4Checksum(ip) == 0 || ip[10] == 0 && ip[11] == 0 && allZero(h[:20])) {
		gid[10], gid[11] = 0xff, 0xff
		copy(gid[12:], ip[12:16])
		return gid, nil
	}
	if h[0]>>4 == 6 {
		copy(gid[:], h[8:24])
		return gid, nil
	}
	return gid, ErrGRH
}

// ipv4Checksum is the ones' complement sum of a 20-byte header: 0 when its
// checksum field is right.
func ipv4Checksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
