/* SPDX-License-Identifier: MIT */
/*
 * Zero detection with SSE2 (16-byte vectors), built with -msse2. Same shape
 * as zero_portable.c: unaligned head (early exit), aligned middle OR-ed
 * 8 vectors (128 bytes) per test, unaligned tail. Never reads outside
 * [buf, buf+len).
 */
#include "mem/zero_impl.h"

#include <immintrin.h>
#include <stdint.h>

#define VEC_BYTES 16
#define BLOCK_VECS 8			/* 128 bytes per early-exit test */

static bool sse2_cpu_has(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("sse2");
}

static inline bool vec_is_zero(__m128i v)
{
	return _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128())) == 0xffff;
}

static bool sse2_is_zero(const void *buf, size_t len)
{
	const unsigned char *s = buf, *end = s + len;
	const __m128i *p, *e;
	__m128i acc;

	if (len < VEC_BYTES)
		return gw_zero_small(s, len);
	if (!vec_is_zero(_mm_loadu_si128((const __m128i *)s)))
		return false;
	/* [s, p) is covered by the head, [e, end) by the tail; s <= p, e <= end. */
	p = (const __m128i *)(((uintptr_t)s + VEC_BYTES) & ~(uintptr_t)(VEC_BYTES - 1));
	e = (const __m128i *)((uintptr_t)end & ~(uintptr_t)(VEC_BYTES - 1));
	for (; e - p >= BLOCK_VECS; p += BLOCK_VECS) {
		__m128i a = _mm_or_si128(_mm_or_si128(p[0], p[1]), _mm_or_si128(p[2], p[3]));
		__m128i b = _mm_or_si128(_mm_or_si128(p[4], p[5]), _mm_or_si128(p[6], p[7]));

		if (!vec_is_zero(_mm_or_si128(a, b)))
			return false;
	}
	acc = _mm_loadu_si128((const __m128i *)(end - VEC_BYTES));
	for (; p < e; p++)
		acc = _mm_or_si128(acc, *p);
	return vec_is_zero(acc);
}

const struct gw_zero_variant gw_zero_sse2 = {
	.name = "sse2",
	.cpu_has = sse2_cpu_has,
	.is_zero = sse2_is_zero,
};
