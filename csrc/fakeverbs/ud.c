// ud.c: what UD QPs need besides the QP (qp.c carries the datagrams out):
// address handles and the GRH a receiver finds ahead of each datagram.
//
// As hostile as a NIC: an address handle is freed at ibv_destroy_ah (its
// memory poisoned first, so a send through it fails instead of reaching
// someone), a datagram nobody receives (no such QP, another Q_Key, no
// receive posted) is dropped while its send completes successfully, and a
// datagram longer than the receive is that receive's error.
#include "fv.h"

#include <errno.h>

FV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) {
	// RoCE: every address handle carries a GRH, and there is one port.
	int bad = !pd || !attr || !attr->is_global || attr->port_num != 1;
	struct fv_ah *a = bad ? NULL : calloc(1, sizeof(*a));
	if (!a) {
		errno = bad ? EINVAL : ENOMEM;
		return NULL;
	}
	a->ah.context = pd->context;
	a->ah.pd = pd;
	a->magic = FV_MAGIC_AH;
	a->dgid = attr->grh.dgid;
	a->dev = fv_device_by_gid(&a->dgid); // a peer not there yet is looked up again at each send
	return &a->ah;
}

FV_EXPORT int ibv_destroy_ah(struct ibv_ah *ah) {
	struct fv_ah *a = (struct fv_ah *)ah;
	if (!a || a->magic != FV_MAGIC_AH)
		return EINVAL;
	memset(a, 0x5a, sizeof(*a)); // a send through it after this fails (or worse), never reaches the old peer
	free(a);
	return 0;
}

static uint16_t ipv4_checksum(const uint8_t *h) {
	uint32_t sum = 0;
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)h[i] << 8 | h[i + 1];
	while (sum > 0xffff)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static int v4_mapped(const union ibv_gid *g) {
	static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return memcmp(g->raw, pre, 12) == 0;
}

// fv_ud_grh writes what a RoCE v2 NIC puts in a UD receive's first 40
// bytes. For IPv4 the first 20 are not written by a NIC: they are left as
// garbage here, so that a reader that looks there finds nothing useful.
void fv_ud_grh(uint8_t grh[FV_GRH], const union ibv_gid *src, const union ibv_gid *dst, uint32_t payload) {
	if (v4_mapped(src) && v4_mapped(dst)) {
		memset(grh, 0xa5, 20);
		uint8_t *ip = grh + 20;
		uint32_t len = 20 + 8 + 12 + payload + 4; // IP, UDP, BTH+DETH, payload, ICRC
		memset(ip, 0, 20);
		ip[0] = 0x45;
		ip[2] = (uint8_t)(len >> 8), ip[3] = (uint8_t)len;
		ip[8] = 64; // TTL
		ip[9] = 17; // UDP
		memcpy(ip + 12, src->raw + 12, 4);
		memcpy(ip + 16, dst->raw + 12, 4);
		uint16_t c = ipv4_checksum(ip);
		ip[10] = (uint8_t)(c >> 8), ip[11] = (uint8_t)c;
		return;
	}
	memset(grh, 0, FV_GRH);
	grh[0] = 0x60;
	uint32_t len = 8 + 12 + payload + 4;
	grh[4] = (uint8_t)(len >> 8), grh[5] = (uint8_t)len;
	grh[6] = 17; // UDP
	grh[7] = 64; // hop limit
	memcpy(grh + 8, src->raw, 16);
	memcpy(grh + 24, dst->raw, 16);
}
