/* SPDX-License-Identifier: MIT */
/*
 * gwpktgen's frame (the format is documented in gwpktgen.c): built,
 * sealed and checked here, for gwpktgen and for the tests that send the
 * same frames through a guest (tests/kvm/test_kvm_net.c).
 */
#ifndef GW_BENCH_PGFRAME_H
#define GW_BENCH_PGFRAME_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <godwit/buf.h>
#include "util/crc32c.h"

#define PG_ETHERTYPE 0x88b5
#define PG_MAGIC 0x47575047u
#define PG_VERSION 1
#define PG_HDR_BYTES 36
#define ETH_HDR_BYTES 14

/* Frame @seq of @len bytes (no FCS, at least ETH_HDR_BYTES + PG_HDR_BYTES); pg_frame_seal stamps it. */
static inline void pg_frame_build(uint8_t *f, unsigned len, const uint8_t dst[6],
				  const uint8_t src[6], uint32_t run_id, uint64_t seq)
{
	uint8_t *p = f + ETH_HDR_BYTES;
	unsigned plen = len - ETH_HDR_BYTES;

	memcpy(f, dst, 6);
	memcpy(f + 6, src, 6);
	f[12] = PG_ETHERTYPE >> 8;
	f[13] = PG_ETHERTYPE & 0xff;
	gw_le32_put(p, PG_MAGIC);
	gw_le16_put(p + 4, PG_VERSION);
	gw_le16_put(p + 6, (uint16_t)plen);
	gw_le32_put(p + 8, run_id);
	gw_le32_put(p + 12, 0);
	gw_le64_put(p + 16, seq);
	for (unsigned i = PG_HDR_BYTES; i < plen; i++)
		p[i] = (uint8_t)(seq + i);
}

/* The send stamp and the CRC, last before the send. */
static inline void pg_frame_seal(uint8_t *f, unsigned len, uint64_t stamp_ns)
{
	uint8_t *p = f + ETH_HDR_BYTES;

	gw_le64_put(p + 24, stamp_ns);
	gw_le32_put(p + 32, 0);
	gw_le32_put(p + 32, gw_crc32c(0, p, len - ETH_HDR_BYTES));
}

enum pg_verdict {
	PG_NOT_OURS,		/* another address or ethertype: ARP, IPv6, flooded frames */
	PG_FOREIGN,		/* another run's */
	PG_CORRUPT,		/* ours, but its length, version or CRC is wrong */
	PG_OK,
};

/*
 * Classify @f (@len bytes) for the receiver at @mac, run @run_id; *seq and
 * *stamp_ns when PG_OK. Zeroes the frame's CRC field to check it.
 */
static inline enum pg_verdict pg_frame_check(uint8_t *f, size_t len, const uint8_t mac[6],
					     uint32_t run_id, uint64_t *seq, uint64_t *stamp_ns)
{
	uint8_t *p = f + ETH_HDR_BYTES;
	uint32_t crc;
	size_t plen;

	if (len < ETH_HDR_BYTES + PG_HDR_BYTES || memcmp(f, mac, 6) != 0 ||
	    f[12] != PG_ETHERTYPE >> 8 || f[13] != (PG_ETHERTYPE & 0xff))
		return PG_NOT_OURS;
	if (gw_le32_get(p) != PG_MAGIC || gw_le32_get(p + 8) != run_id)
		return PG_FOREIGN;
	plen = gw_le16_get(p + 6);
	crc = gw_le32_get(p + 32);
	gw_le32_put(p + 32, 0);
	if (plen < PG_HDR_BYTES || plen > len - ETH_HDR_BYTES || gw_le16_get(p + 4) != PG_VERSION ||
	    gw_crc32c(0, p, plen) != crc)
		return PG_CORRUPT;
	*seq = gw_le64_get(p + 16);
	*stamp_ns = gw_le64_get(p + 24);
	return PG_OK;
}

#endif
