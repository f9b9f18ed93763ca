/* SPDX-License-Identifier: MIT */
/*
 * Internal to the zero-detection variants (zero.c, zero_<variant>.c); not a
 * module interface. Each variant file is compiled with its own -m flags, so
 * what is shared here must be plain C that any of those flags accepts.
 */
#ifndef GW_ZERO_IMPL_H
#define GW_ZERO_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "mem/zero.h"

extern const struct gw_zero_variant gw_zero_portable;
extern const struct gw_zero_variant gw_zero_sse2;
extern const struct gw_zero_variant gw_zero_avx2;
extern const struct gw_zero_variant gw_zero_avx512;

static inline uint64_t gw_zero_load64(const unsigned char *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));	/* one unaligned load */
	return v;
}

static inline uint32_t gw_zero_load32(const unsigned char *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * Short buffers (below a variant's vector width; any len < 64 works): a few
 * overlapping unaligned scalar loads that never read outside [p, p+len).
 */
static inline bool gw_zero_small(const unsigned char *p, size_t len)
{
	uint64_t acc;

	if (len >= 8) {
		acc = gw_zero_load64(p + len - 8);
		for (size_t i = 0; i + 8 <= len; i += 8)
			acc |= gw_zero_load64(p + i);
		return acc == 0;
	}
	if (len >= 4)
		return (gw_zero_load32(p) | gw_zero_load32(p + len - 4)) == 0;
	acc = 0;
	for (size_t i = 0; i < len; i++)
		acc |= p[i];
	return acc == 0;
}

#endif
