/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_xbzrle_decode(gw_xbzrle_encode(old, new)) applied to old
 * gives new, for sparse random modifications, edits at the first and last
 * byte, and lengths that are not multiples of 8; equal pages encode to 0
 * bytes; an encoding larger than dst_cap gives -ENOSPC without writing
 * past dst_cap; the bytes match QEMU's format on hand-made vectors.
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

static int guard_ok(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != GUARD)
			return 0;
	return 1;
}

/* Encode, decode onto a copy of old, compare with new. Returns enc length. */
static ssize_t round_trip(const uint8_t *old, const uint8_t *new, size_t len, size_t cap,
			  const char *what)
{
	uint8_t *enc = malloc(cap + GUARD_BYTES), *page = malloc(len + GUARD_BYTES);
	ssize_t n;
	int r;

	TEST_ASSERT(enc && page, "malloc");
	memset(enc, GUARD, cap + GUARD_BYTES);
	n = gw_xbzrle_encode(old, new, len, enc, cap);
	TEST_CHECK(guard_ok(enc + cap, GUARD_BYTES), "%s: encode wrote past cap", what);
	if (n >= 0) {
		memcpy(page, old, len);
		memset(page + len, GUARD, GUARD_BYTES);
		r = gw_xbzrle_decode(enc, (size_t)n, page, len);
		TEST_CHECK(r == 0, "%s: decode %d", what, r);
		TEST_CHECK(memcmp(page, new, len) == 0, "%s: result differs", what);
		TEST_CHECK(guard_ok(page + len, GUARD_BYTES), "%s: decode overflow", what);
	}
	free(page);
	free(enc);
	return n;
}

static void check_vector(const uint8_t *old, const uint8_t *new, size_t len,
			 const uint8_t *want, size_t want_len, const char *what)
{
	uint8_t enc[64];
	ssize_t n = gw_xbzrle_encode(old, new, len, enc, sizeof(enc));

	TEST_CHECK(n == (ssize_t)want_len && memcmp(enc, want, want_len) == 0,
		   "%s: got %zd bytes", what, n);
	round_trip(old, new, len, sizeof(enc), what);
}

int main(void)
{
	const size_t page = 4096;
	uint8_t *old = malloc(page), *new = malloc(page);
	uint64_t rng = 3;
	size_t i, total_enc = 0;
	int iter;

	TEST_ASSERT(old && new, "malloc");

	/* Hand-made vectors in QEMU's format. */
	{
		uint8_t o[16] = { 0 }, n[16] = { 0 };
		const uint8_t v1[] = { 3, 1, 0xAA };
		const uint8_t v2[] = { 0, 1, 0x11, 14, 1, 0x22 };
		uint8_t big_o[300] = { 0 }, big_n[300] = { 0 };
		const uint8_t v3[] = { 0xAB, 0x02, 1, 0x33 };	/* zrun 299 */

		n[3] = 0xAA;
		check_vector(o, n, 16, v1, sizeof(v1), "one byte");
		n[3] = 0;
		n[0] = 0x11;
		n[15] = 0x22;
		check_vector(o, n, 16, v2, sizeof(v2), "first and last byte");
		big_n[299] = 0x33;
		check_vector(big_o, big_n, 300, v3, sizeof(v3), "two-byte uleb128");
	}

	/* Identical pages. */
	gen_text(old, page, &rng);
	memcpy(new, old, page);
	TEST_CHECK(gw_xbzrle_encode(old, new, page, NULL, 0) == 0, "equal pages");
	TEST_CHECK(gw_xbzrle_encode(old, new, 0, NULL, 0) == 0, "empty pages");

	/* Sparse random modifications, with lengths around multiples of 8. */
	for (iter = 0; iter < 3000; iter++) {
		size_t len = iter % 3 ? page : 1 + gen_rand(&rng) % page;
		size_t nmods = gen_rand(&rng) % 40, k;
		ssize_t n;

		gen_text(old, len, &rng);
		memcpy(new, old, len);
		for (k = 0; k < nmods; k++) {
			size_t at = gen_rand(&rng) % len;
			size_t run = 1 + gen_rand(&rng) % (k % 5 == 0 ? 64 : 6);

			if (run > len - at)
				run = len - at;
			gen_random(new + at, run, &rng);
		}
		if (iter % 7 == 0)
			new[0] ^= 0xFF;
		if (iter % 11 == 0)
			new[len - 1] ^= 0xFF;
		n = round_trip(old, new, len, 2 * len + 16, "sparse");
		TEST_CHECK(n >= 0, "sparse: encode %zd", n);
		TEST_CHECK(n != 0 || memcmp(old, new, len) == 0, "sparse: 0 for a change");
		if (n > 0)
			total_enc += (size_t)n;
	}
	printf("sparse: mean encoding %zu bytes\n", total_enc / 3000);

	/* Alternating bytes: the worst case still round-trips with room. */
	memset(old, 0, page);
	for (i = 0; i < page; i++)
		new[i] = i % 2 ? 0 : 0xFF;
	TEST_CHECK(round_trip(old, new, page, 2 * page + 16, "alternating") > 0,
		   "alternating");

	/* Too different for the room given: -ENOSPC, nothing past cap. */
	gen_random(old, page, &rng);
	gen_random(new, page, &rng);
	for (i = 0; i < 8; i++) {
		size_t cap = (size_t[]){ 0, 1, 2, 3, 100, page / 2, page, page + 1 }[i];
		ssize_t n = round_trip(old, new, page, cap, "random");

		TEST_CHECK(n == -ENOSPC, "random page, cap %zu: %zd", cap, n);
	}
	/* ...and fits with enough room. */
	TEST_CHECK(round_trip(old, new, page, page + 64, "random") > 0, "random with room");
	/* Gaps of 1-2 equal bytes stay inside a run; 3 split it. */
	{
		uint8_t o[16] = { 0 }, n[16] = { 0 };
		const uint8_t gap2[] = { 0, 4, 1, 0, 0, 2 };
		const uint8_t gap3[] = { 0, 1, 1, 3, 1, 2 };

		n[0] = 1;
		n[3] = 2;
		check_vector(o, n, 16, gap2, sizeof(gap2), "gap of 2");
		n[3] = 0;
		n[4] = 2;
		check_vector(o, n, 16, gap3, sizeof(gap3), "gap of 3");
	}

	free(new);
	free(old);
	TEST_EXIT();
}
