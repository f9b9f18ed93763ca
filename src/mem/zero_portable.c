/* SPDX-License-Identifier: MIT */
/*
 * Zero detection in plain C, 64-bit words: the fallback every CPU has and
 * the reference the SIMD variants are tested against.
 *
 * Shape shared by every variant: one unaligned load of the head (returns at
 * once for the common non-zero page), aligned loads of the middle OR-ed
 * together a block at a time with one test per block (coarse early exit),
 * and one unaligned load of the tail overlapping the last aligned word.
 * Loads never touch bytes outside [buf, buf+len).
 */
#include "mem/zero_impl.h"

#include <stdint.h>

/* Aligned word loads through a type that may alias anything. */
typedef uint64_t gw_word_t __attribute__((may_alias));

#define WORD_BYTES 8
#define BLOCK_WORDS 8			/* 64 bytes per early-exit test */

static bool portable_cpu_has(void)
{
	return true;
}

static bool portable_is_zero(const void *buf, size_t len)
{
	const unsigned char *s = buf, *end = s + len;
	const gw_word_t *p, *e;
	uint64_t acc;

	if (len < 64)
		return gw_zero_small(s, len);
	if (gw_zero_load64(s))
		return false;
	/* [s, p) is covered by the head, [e, end) by the tail; s <= p, e <= end. */
	p = (const gw_word_t *)(((uintptr_t)s + WORD_BYTES) & ~(uintptr_t)(WORD_BYTES - 1));
	e = (const gw_word_t *)((uintptr_t)end & ~(uintptr_t)(WORD_BYTES - 1));
	for (; e - p >= BLOCK_WORDS; p += BLOCK_WORDS) {
		uint64_t a = (p[0] | p[1]) | (p[2] | p[3]);
		uint64_t b = (p[4] | p[5]) | (p[6] | p[7]);

		if (a | b)
			return false;
	}
	acc = gw_zero_load64(end - WORD_BYTES);
	for (; p < e; p++)
		acc |= *p;
	return acc == 0;
}

const struct gw_zero_variant gw_zero_portable = {
	.name = "portable",
	.cpu_has = portable_cpu_has,
	.is_zero = portable_is_zero,
};
