package verbs

import "encoding/binary"

// NetworkOrder is v laid out big-endian in memory, as immediate data travels
// (ibv_send_wr.imm_data and ibv_wc.imm_data are __be32), whatever the host's
// byte order. It is its own inverse.
func NetworkOrder(v uint32) uint32 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return binary.NativeEndian.Uint32(b[:])
}
