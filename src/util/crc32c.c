/* SPDX-License-Identifier: MIT */
/*
 * CRC-32C through ISA-L's crc32_iscsi (which dispatches to the SSE4.2 crc32
 * or PCLMUL code itself).
 *
 * ISA-L conventions: crc32_iscsi(buf, len, init) does no pre- or
 * post-inversion; the standard CRC-32C is ~crc32_iscsi(buf, len, ~0). We
 * keep the standard, chainable form (start at 0, result feeds the next call)
 * by inverting on the way in and out: the inverted running value is exactly
 * ISA-L's register state, so chaining composes. Its length is an int, hence
 * the chunking for buffers of 2 GiB and more.
 */
#include "util/crc32c.h"

#include <isa-l/crc.h>

#define CHUNK_BYTES (1u << 30)

uint32_t gw_crc32c(uint32_t crc, const void *buf, size_t len_bytes)
{
	/* ISA-L takes a non-const pointer but only reads the buffer. */
	unsigned char *p = (unsigned char *)(uintptr_t)buf;
	uint32_t state = ~crc;

	while (len_bytes > 0) {
		size_t n = len_bytes < CHUNK_BYTES ? len_bytes : CHUNK_BYTES;

		state = crc32_iscsi(p, (int)n, state);
		p += n;
		len_bytes -= n;
	}
	return ~state;
}
