/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_xbzrle_decode on hostile input returns 0 or -EBADMSG and
 * never writes outside [page, page + len) (guard bytes on both sides):
 * random bytes, valid-looking streams with random field values, mutated
 * valid encodings, and hand-made malformed streams (which must be refused).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/xbzrle.h"
#include "codec_gen.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define GUARD_BYTES	64
#define GUARD		0xA5
#define PAGE		4096
#define SRC_MAX		(3 * PAGE)

static uint8_t area[GUARD_BYTES + PAGE + GUARD_BYTES];

static int decode_guarded(const uint8_t *src, size_t src_len, size_t len)
{
	uint8_t *page = area + GUARD_BYTES;
	size_t i;
	int r;

	memset(area, GUARD, sizeof(area));
	r = gw_xbzrle_decode(src, src_len, page, len);
	TEST_CHECK(r == 0 || r == -EBADMSG, "returned %d", r);
	for (i = 0; i < GUARD_BYTES; i++)
		if (area[i] != GUARD)
			break;
	TEST_CHECK(i == GUARD_BYTES, "wrote before page");
	for (i = GUARD_BYTES + len; i < sizeof(area); i++)
		if (area[i] != GUARD)
			break;
	TEST_CHECK(i == sizeof(area), "wrote past len %zu at %zu", len, i - GUARD_BYTES);
	return r;
}

static size_t put_uleb(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

static void bad(const uint8_t *src, size_t n, size_t len, const char *what)
{
	TEST_CHECK(decode_guarded(src, n, len) == -EBADMSG, "%s accepted", what);
}

int main(void)
{
	static uint8_t src[SRC_MAX + 16];
	uint64_t rng = 11;
	size_t accepted = 0;
	int iter;

	/* Malformed by construction. */
	{
		const uint8_t zrun_past[] = { 0x81, 0x20, 1, 0 };	/* 4097 */
		const uint8_t nz_zero[] = { 0, 0 };
		const uint8_t nz_past_src[] = { 0, 5, 1, 2 };
		const uint8_t nz_past_page[] = { 0xFF, 0x1F, 2, 1, 2 };	/* 4095 + 2 */
		const uint8_t trunc_uleb[] = { 0x80 };
		const uint8_t trunc_pair[] = { 3 };
		const uint8_t overlong[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 1 };
		const uint8_t second_zrun_zero[] = { 0, 1, 7, 0, 1, 7 };
		const uint8_t huge[] = { 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 1, 1 };

		bad(zrun_past, sizeof(zrun_past), PAGE, "zrun past page");
		bad(nz_zero, sizeof(nz_zero), PAGE, "zero nzrun");
		bad(nz_past_src, sizeof(nz_past_src), PAGE, "nzrun past src");
		bad(nz_past_page, sizeof(nz_past_page), PAGE, "nzrun past page");
		bad(trunc_uleb, sizeof(trunc_uleb), PAGE, "truncated uleb128");
		bad(trunc_pair, sizeof(trunc_pair), PAGE, "zrun without nzrun");
		bad(overlong, sizeof(overlong), PAGE, "6-byte uleb128");
		bad(second_zrun_zero, sizeof(second_zrun_zero), PAGE, "second zrun 0");
		bad(huge, sizeof(huge), PAGE, "4 GiB zrun");
		/* Exactly filling the page is fine; one more byte is not. */
		src[0] = 0;
		put_uleb(src + 1, PAGE);
		memset(src + 3, 0x5A, PAGE);
		TEST_CHECK(decode_guarded(src, 3 + PAGE, PAGE) == 0, "whole page literal");
		bad(src, 3 + PAGE, PAGE - 1, "literal one past len");
	}

	/* Random bytes. */
	for (iter = 0; iter < 20000; iter++) {
		size_t n = gen_rand(&rng) % 64, len = 1 + gen_rand(&rng) % PAGE;

		gen_random(src, n, &rng);
		if (decode_guarded(src, n, len) == 0)
			accepted++;
	}

	/* Structured: plausible pairs with field values near the limits. */
	for (iter = 0; iter < 20000; iter++) {
		size_t n = 0, len = 1 + gen_rand(&rng) % PAGE;
		int pairs = 1 + (int)(gen_rand(&rng) % 6), p;

		for (p = 0; p < pairs && n + 16 < SRC_MAX; p++) {
			uint64_t z = gen_rand(&rng) % (len + 2), nz = gen_rand(&rng) % 80;
			size_t lit;

			if (gen_rand(&rng) % 8 == 0)
				nz = len - (gen_rand(&rng) % 3);
			n += put_uleb(src + n, z);
			n += put_uleb(src + n, nz);
			lit = nz;
			if (gen_rand(&rng) % 8 == 0 && lit)
				lit -= 1;	/* truncated literal */
			if (lit > SRC_MAX - n)
				lit = SRC_MAX - n;
			gen_random(src + n, lit, &rng);
			n += lit;
		}
		if (decode_guarded(src, n, len) == 0)
			accepted++;
	}

	/* Mutated valid encodings. */
	for (iter = 0; iter < 5000; iter++) {
		static uint8_t old[PAGE], new[PAGE];
		ssize_t n;
		size_t k;

		gen_text(old, PAGE, &rng);
		memcpy(new, old, PAGE);
		for (k = 0; k < 20; k++)
			new[gen_rand(&rng) % PAGE] ^= (uint8_t)(1 + gen_rand(&rng) % 255);
		n = gw_xbzrle_encode(old, new, PAGE, src, SRC_MAX);
		TEST_ASSERT(n > 0, "encode %zd", n);
		for (k = 0; k < 1 + gen_rand(&rng) % 4; k++)
			src[gen_rand(&rng) % (size_t)n] ^= (uint8_t)(1u << (gen_rand(&rng) % 8));
		if (gen_rand(&rng) % 4 == 0)
			n = (ssize_t)(gen_rand(&rng) % (size_t)n);
		if (decode_guarded(src, (size_t)n, PAGE - gen_rand(&rng) % 16) == 0)
			accepted++;
	}
	printf("fuzz: %zu inputs decoded cleanly, none wrote outside the page\n", accepted);
	TEST_EXIT();
}
