/* SPDX-License-Identifier: MIT */
/*
 * gwpktgen's frame (bench/gwpktgen.c documents the layout): Ethernet
 * header, ethertype 0x88b5, then a little-endian header with magic,
 * version, payload length, run id, sequence number, send stamp and the
 * CRC32C of the payload, and a filler. Built, sealed and checked here so
 * that the generator and the tests that push frames through a guest agree
 * on every byte. Header-only; needs libgodwit's crc32c and buf.h.
 */
#ifndef GW_BENCH_PGFRAME_H
#define GW_BENCH_PGFRAME_H

#include <stdint.h>
#include <string.h>
#include <godwit/buf.h>
#include "util/crc32c.h"

#define PG_ETHERTYPE 0x88b5
#define PG_MAGIC 0x47575047u
#define PG_VERSION 1
#define PG_HDR_BYTES 36
#define PG_ETH_HDR_BYTES 14

/* Frame @seq of @len bytes (no FCS, >= PG_ETH_HDR_BYTES + PG_HDR_BYTES) into @f; no stamp yet. */
static inline void pgframe_build(uint8_t *f, const uint8_t dst[6], const uint8_t src[6],
				 unsigned len, uint32_t run_id, uint64_t seq)
{
	uint8_t *p = f + PG_ETH_HDR_BYTES;
	unsigned plen = len - PG_ETH_HDR_BYTES;

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

/* The send stamp, then the CRC over the payload. */
static inline void pgframe_seal(uint8_t *f, unsigned len, uint64_t stamp_ns)
{
	uint8_t *p = f + PG_ETH_HDR_BYTES;

	gw_le64_put(p + 24, stamp_ns);
	gw_le32_put(p + 32, 0);
	gw_le32_put(p + 32, gw_crc32c(0, p, len - PG_ETH_HDR_BYTES));
}

enum pgframe_verdict { PGFRAME_OK = 0, PGFRAME_NOT_OURS, PGFRAME_FOREIGN, PGFRAME_CORRUPT };

/*
 * Classify frame @f of @len bytes addressed to @our_mac from run @run_id:
 * not ours (another ethertype or MAC), foreign (another run), corrupt
 * (bad version, length or CRC), or OK with *@seq set. Leaves @f unchanged.
 */
static inline enum pgframe_verdict pgframe_check(const uint8_t *f, size_t len,
						 const uint8_t our_mac[6], uint32_t run_id,
						 uint64_t *seq)
{
	const uint8_t *p = f + PG_ETH_HDR_BYTES;
	uint8_t zero[4] = { 0, 0, 0, 0 };
	uint32_t crc;
	size_t plen;

	if (len < PG_ETH_HDR_BYTES + PG_HDR_BYTES || memcmp(f, our_mac, 6) != 0 ||
	    f[12] != PG_ETHERTYPE >> 8 || f[13] != (PG_ETHERTYPE & 0xff))
		return PGFRAME_NOT_OURS;
	if (gw_le32_get(p) != PG_MAGIC || gw_le32_get(p + 8) != run_id)
		return PGFRAME_FOREIGN;
	plen = gw_le16_get(p + 6);
	if (plen < PG_HDR_BYTES || plen > len - PG_ETH_HDR_BYTES || gw_le16_get(p + 4) != PG_VERSION)
		return PGFRAME_CORRUPT;
	crc = gw_crc32c(0, p, 32);
	crc = gw_crc32c(crc, zero, 4);
	crc = gw_crc32c(crc, p + 36, plen - 36);
	if (crc != gw_le32_get(p + 32))
		return PGFRAME_CORRUPT;
	*seq = gw_le64_get(p + 16);
	return PGFRAME_OK;
}

#endif
