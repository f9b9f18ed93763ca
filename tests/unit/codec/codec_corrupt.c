/* SPDX-License-Identifier: MIT */
/*
 * Invariant: every decompressor treats its input as hostile. For every
 * codec that probes OK: each truncation of a valid payload, a trailing
 * extra byte, and random garbage are refused with -EBADMSG (garbage may in
 * principle decode, so there 0 is tolerated); single bit flips and random
 * byte corruption give 0 or -EBADMSG, never anything else; and no call
 * ever writes outside [dst, dst + dst_len) (guard bytes on both sides).
 * Whether corrupt data is *detected* is the wire CRC32C's job, except for
 * zlib/isal whose format carries adler32: a flipped payload they accept
 * (a padding bit after the last block) must decode to the original bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec_gen.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define GUARD_BYTES	64
#define GUARD		0xA5
#define PAGE		4096
#define BATCH_BYTES	(512 * 1024)

static uint8_t *guarded_alloc(size_t len)
{
	uint8_t *p = malloc(len + 2 * GUARD_BYTES);

	TEST_ASSERT(p, "malloc");
	return p + GUARD_BYTES;
}

static void guarded_free(uint8_t *p)
{
	free(p - GUARD_BYTES);
}

static void guard_set(uint8_t *p, size_t len)
{
	memset(p - GUARD_BYTES, GUARD, GUARD_BYTES);
	memset(p + len, GUARD, GUARD_BYTES);
}

static int guard_ok(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < GUARD_BYTES; i++)
		if (p[-1 - (ssize_t)i] != GUARD || p[len + i] != GUARD)
			return 0;
	return 1;
}

/* Decompress hostile @src into a guarded @dst_len buffer; return the code. */
static int try_decode(const struct gw_codec_ops *ops, void *ctx, const uint8_t *src,
		      size_t src_len, uint8_t *dst, size_t dst_len, const char *what)
{
	int r;

	guard_set(dst, dst_len);
	r = ops->decompress(ctx, src, src_len, dst, dst_len);
	TEST_CHECK(r == 0 || r == -EBADMSG, "%s %s: returned %d", ops->name, what, r);
	TEST_CHECK(guard_ok(dst, dst_len), "%s %s: wrote outside dst", ops->name, what);
	return r;
}

static int has_checksum(const struct gw_codec_ops *ops)
{
	return ops->id == GW_CODEC_ZLIB || ops->id == GW_CODEC_ISAL;
}

static void check_codec(const struct gw_codec_ops *ops, uint64_t *rng)
{
	void *ctx = ops->ctx_new(ops->default_level);
	size_t bound = ops->bound(BATCH_BYTES) + 1;
	uint8_t *src = malloc(BATCH_BYTES);
	uint8_t *comp = malloc(bound);
	uint8_t *bad = guarded_alloc(bound);
	uint8_t *dst = guarded_alloc(BATCH_BYTES);
	size_t i, bit, accepted = 0, flips = 0;
	ssize_t clen;
	int r;

	TEST_ASSERT(ctx && src && comp, "%s: setup", ops->name);

	/* A small input: every truncation, every bit flip, a trailing byte. */
	gen_text(src, PAGE, rng);
	clen = ops->compress(ctx, src, PAGE, comp, bound);
	TEST_ASSERT(clen > 0, "%s: compress text page %zd", ops->name, clen);
	for (i = 0; i < (size_t)clen; i++) {
		memcpy(bad, comp, i);
		guard_set(bad, i);
		r = try_decode(ops, ctx, bad, i, dst, PAGE, "truncated");
		TEST_CHECK(r == -EBADMSG, "%s: truncation to %zu/%zd accepted", ops->name,
			   i, clen);
		TEST_CHECK(guard_ok(bad, i), "%s: input modified", ops->name);
	}
	memcpy(bad, comp, (size_t)clen);
	bad[clen] = 0;
	r = try_decode(ops, ctx, bad, (size_t)clen + 1, dst, PAGE, "trailing byte");
	TEST_CHECK(r == -EBADMSG, "%s: trailing byte accepted", ops->name);

	for (bit = 0; bit < (size_t)clen * 8; bit++) {
		memcpy(bad, comp, (size_t)clen);
		bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		r = try_decode(ops, ctx, bad, (size_t)clen, dst, PAGE, "bit flip");
		flips++;
		if (r == 0)
			accepted++;
		if (r == 0 && has_checksum(ops))
			TEST_CHECK(memcmp(dst, src, PAGE) == 0,
				   "%s: flip of bit %zu decoded to wrong data", ops->name, bit);
	}
	printf("%s: page %zd bytes: %zu truncations refused, %zu/%zu bit flips decoded\n",
	       ops->name, clen, (size_t)clen, accepted, flips);

	/* A mixed batch: random byte corruption and random-length cuts. */
	gen_mix(src, BATCH_BYTES, rng);
	clen = ops->compress(ctx, src, BATCH_BYTES, comp, bound);
	TEST_ASSERT(clen > 0, "%s: compress batch %zd", ops->name, clen);
	for (i = 0; i < 200; i++) {
		size_t n = 1 + gen_rand(rng) % 8, k, len = (size_t)clen;

		memcpy(bad, comp, len);
		for (k = 0; k < n; k++)
			bad[gen_rand(rng) % len] = (uint8_t)gen_rand(rng);
		if (i % 4 == 3)
			len = gen_rand(rng) % len;
		r = try_decode(ops, ctx, bad, len, dst, BATCH_BYTES, "corrupt batch");
		if (len < (size_t)clen)
			TEST_CHECK(r == -EBADMSG, "%s: cut batch accepted", ops->name);
	}

	/* Garbage, raw and behind a valid-looking prefix of the real payload. */
	for (i = 0; i < 3000; i++) {
		size_t len = gen_rand(rng) % (2 * PAGE + 1);
		size_t keep = i % 2 ? gen_rand(rng) % 16 : 0;
		size_t dst_len = i % 3 ? PAGE : gen_rand(rng) % (2 * PAGE);

		if (keep > len)
			keep = len;
		if (keep > (size_t)clen)
			keep = (size_t)clen;
		memcpy(bad, comp, keep);
		gen_random(bad + keep, len - keep, rng);
		try_decode(ops, ctx, bad, len, dst, dst_len, "garbage");
	}

	/* The context still decodes valid data after all that. */
	guard_set(dst, BATCH_BYTES);
	r = ops->decompress(ctx, comp, (size_t)clen, dst, BATCH_BYTES);
	TEST_CHECK(r == 0 && memcmp(dst, src, BATCH_BYTES) == 0,
		   "%s: ctx broken after hostile input", ops->name);

	guarded_free(dst);
	guarded_free(bad);
	free(comp);
	free(src);
	ops->ctx_free(ctx);
}

int main(void)
{
	uint64_t rng = 7;
	int i, tested = 0;

	for (i = 0; i < GW_CODEC__COUNT; i++) {
		const struct gw_codec_ops *ops = gw_codecs[i];

		if (!ops || ops->probe() != 0)
			continue;
		check_codec(ops, &rng);
		tested++;
	}
	TEST_ASSERT(tested > 0, "no codec usable");
	TEST_EXIT();
}
