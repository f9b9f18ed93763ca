/* SPDX-License-Identifier: MIT */
/*
 * Zero detection with AVX-512 (64-byte vectors), built with -mavx512f
 * -mavx512bw. Same shape as zero_portable.c: unaligned head (early exit),
 * aligned middle OR-ed 4 vectors (256 bytes) per test, unaligned tail.
 * Buffers shorter than a vector use one byte-masked load (AVX512BW), whose
 * masked-off bytes are never accessed, so nothing outside [buf, buf+len)
 * is read.
 */
#include "mem/zero_impl.h"

#include <immintrin.h>
#include <stdint.h>

#define VEC_BYTES 64
#define BLOCK_VECS 4			/* 256 bytes per early-exit test */

static bool avx512_cpu_has(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

static inline bool vec_is_zero(__m512i v)
{
	return _mm512_test_epi64_mask(v, v) == 0;
}

static bool avx512_is_zero(const void *buf, size_t len)
{
	const unsigned char *s = buf, *end = s + len;
	const __m512i *p, *e;
	__m512i acc;

	if (len < VEC_BYTES) {
		__mmask64 m = (1ULL << len) - 1;	/* len < 64: no overflow */

		return vec_is_zero(_mm512_maskz_loadu_epi8(m, s));
	}
	if (!vec_is_zero(_mm512_loadu_si512(s)))
		return false;
	/* [s, p) is covered by the head, [e, end) by the tail; s <= p, e <= end. */
	p = (const __m512i *)(((uintptr_t)s + VEC_BYTES) & ~(uintptr_t)(VEC_BYTES - 1));
	e = (const __m512i *)((uintptr_t)end & ~(uintptr_t)(VEC_BYTES - 1));
	for (; e - p >= BLOCK_VECS; p += BLOCK_VECS) {
		__m512i a = _mm512_or_si512(p[0], p[1]);
		__m512i b = _mm512_or_si512(p[2], p[3]);

		if (!vec_is_zero(_mm512_or_si512(a, b)))
			return false;
	}
	acc = _mm512_loadu_si512(end - VEC_BYTES);
	for (; p < e; p++)
		acc = _mm512_or_si512(acc, *p);
	return vec_is_zero(acc);
}

const struct gw_zero_variant gw_zero_avx512 = {
	.name = "avx512",
	.cpu_has = avx512_cpu_has,
	.is_zero = avx512_is_zero,
};
