/* SPDX-License-Identifier: MIT */
/*
 * Zero detection with AVX2 (32-byte vectors), built with -mavx2. Same shape
 * as zero_portable.c: unaligned head (early exit), aligned middle OR-ed
 * 8 vectors (256 bytes) per test, unaligned tail. Never reads outside
 * [buf, buf+len).
 */
#include "mem/zero_impl.h"

#include <immintrin.h>
#include <stdint.h>

#define VEC_BYTES 32
#define BLOCK_VECS 8			/* 256 bytes per early-exit test */

static bool avx2_cpu_has(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2");
}

static inline bool vec_is_zero(__m256i v)
{
	return _mm256_testz_si256(v, v);
}

static bool avx2_is_zero(const void *buf, size_t len)
{
	const unsigned char *s = buf, *end = s + len;
	const __m256i *p, *e;
	__m256i acc;

	if (len < VEC_BYTES)
		return gw_zero_small(s, len);
	if (!vec_is_zero(_mm256_loadu_si256((const __m256i *)s)))
		return false;
	/* [s, p) is covered by the head, [e, end) by the tail; s <= p, e <= end. */
	p = (const __m256i *)(((uintptr_t)s + VEC_BYTES) & ~(uintptr_t)(VEC_BYTES - 1));
	e = (const __m256i *)((uintptr_t)end & ~(uintptr_t)(VEC_BYTES - 1));
	for (; e - p >= BLOCK_VECS; p += BLOCK_VECS) {
		__m256i a = _mm256_or_si256(_mm256_or_si256(p[0], p[1]),
					    _mm256_or_si256(p[2], p[3]));
		__m256i b = _mm256_or_si256(_mm256_or_si256(p[4], p[5]),
					    _mm256_or_si256(p[6], p[7]));

		if (!vec_is_zero(_mm256_or_si256(a, b)))
			return false;
	}
	acc = _mm256_loadu_si256((const __m256i *)(end - VEC_BYTES));
	for (; p < e; p++)
		acc = _mm256_or_si256(acc, *p);
	return vec_is_zero(acc);
}

const struct gw_zero_variant gw_zero_avx2 = {
	.name = "avx2",
	.cpu_has = avx2_cpu_has,
	.is_zero = avx2_is_zero,
};
