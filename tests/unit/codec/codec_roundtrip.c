/* SPDX-License-Identifier: MIT */
/*
 * Invariant: for every codec that probes OK and for its min, default and
 * max level, compress then decompress returns the input exactly, for zero,
 * text-like, random and mixed data from 0 bytes to 512 KiB batches; the
 * compressed size never exceeds bound(); output too small for the result
 * gives -ENOSPC (or a smaller encoding that fits) without writing past
 * dst_cap, and the context still works
 * afterwards; decompressing into dst_len - 1 or dst_len + 1 fails with
 * -EBADMSG without writing past the buffer it was given; bound() holds for
 * random input of many lengths; out-of-range levels are clamped by ctx_new.
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
#define BATCH_BYTES	(512 * 1024)

static int guard_ok(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != GUARD)
			return 0;
	return 1;
}

struct sample {
	const char *name;
	size_t len;
	int kind;	/* 0 zero, 1 text, 2 random, 3 mix */
};

static const struct sample samples[] = {
	{ "empty", 0, 0 }, { "1-byte", 1, 2 }, { "zero-page", 4096, 0 },
	{ "text-page", 4096, 1 }, { "random-page", 4096, 2 }, { "odd-text", 4097, 1 },
	{ "zero-batch", BATCH_BYTES, 0 }, { "text-batch", BATCH_BYTES, 1 },
	{ "random-batch", BATCH_BYTES, 2 }, { "mix-batch", BATCH_BYTES, 3 },
	{ "mix-odd", BATCH_BYTES - 333, 3 },
};

static void fill(uint8_t *p, const struct sample *s, uint64_t *rng)
{
	switch (s->kind) {
	case 0: memset(p, 0, s->len); break;
	case 1: gen_text(p, s->len, rng); break;
	case 2: gen_random(p, s->len, rng); break;
	default: gen_mix(p, s->len, rng); break;
	}
}

static void check_sample(const struct gw_codec_ops *ops, void *ctx, int level,
			 const struct sample *s, uint64_t *rng)
{
	size_t bound = ops->bound(s->len);
	uint8_t *src = malloc(s->len + 1);
	uint8_t *comp = malloc(bound + GUARD_BYTES);
	uint8_t *out = malloc(s->len + 1 + GUARD_BYTES);
	ssize_t clen;
	int r;

	TEST_ASSERT(src && comp && out, "malloc");
	fill(src, s, rng);

	memset(comp, GUARD, bound + GUARD_BYTES);
	clen = ops->compress(ctx, src, s->len, comp, bound);
	TEST_CHECK(clen >= 0 && (size_t)clen <= bound, "%s/%d %s: compress %zd bound %zu",
		   ops->name, level, s->name, clen, bound);
	TEST_CHECK(guard_ok(comp + bound, GUARD_BYTES), "%s/%d %s: wrote past bound",
		   ops->name, level, s->name);
	if (clen < 0)
		goto out;

	/* Exact size: round trip. */
	memset(out, GUARD, s->len + 1 + GUARD_BYTES);
	r = ops->decompress(ctx, comp, (size_t)clen, out, s->len);
	TEST_CHECK(r == 0, "%s/%d %s: decompress %d", ops->name, level, s->name, r);
	TEST_CHECK(memcmp(out, src, s->len) == 0, "%s/%d %s: data differs",
		   ops->name, level, s->name);
	TEST_CHECK(guard_ok(out + s->len, 1 + GUARD_BYTES), "%s/%d %s: wrote past dst_len",
		   ops->name, level, s->name);

	/* One byte short: refused, nothing written past dst_len - 1. */
	if (s->len > 0) {
		memset(out, GUARD, s->len + 1 + GUARD_BYTES);
		r = ops->decompress(ctx, comp, (size_t)clen, out, s->len - 1);
		TEST_CHECK(r == -EBADMSG, "%s/%d %s: into len-1 gave %d", ops->name, level,
			   s->name, r);
		TEST_CHECK(guard_ok(out + s->len - 1, 2 + GUARD_BYTES),
			   "%s/%d %s: len-1 wrote past dst_len", ops->name, level, s->name);
	}
	/* One byte long: refused. */
	memset(out, GUARD, s->len + 1 + GUARD_BYTES);
	r = ops->decompress(ctx, comp, (size_t)clen, out, s->len + 1);
	TEST_CHECK(r == -EBADMSG, "%s/%d %s: into len+1 gave %d", ops->name, level, s->name, r);
	TEST_CHECK(guard_ok(out + s->len + 1, GUARD_BYTES), "%s/%d %s: len+1 overflow",
		   ops->name, level, s->name);

	/* Too little room to compress: -ENOSPC, bounded, ctx reusable. */
	if (clen > 0) {
		size_t cap = (size_t)clen - 1;

		memset(comp, GUARD, bound + GUARD_BYTES);
		/*
		 * A codec may find a smaller encoding when squeezed (igzip
		 * does): then it must fit in cap and still round-trip.
		 */
		r = (int)ops->compress(ctx, src, s->len, comp, cap);
		TEST_CHECK(r == -ENOSPC || (r >= 0 && (size_t)r <= cap),
			   "%s/%d %s: cap %zu gave %d", ops->name, level, s->name, cap, r);
		if (r >= 0) {
			TEST_CHECK(ops->decompress(ctx, comp, (size_t)r, out, s->len) == 0 &&
				   memcmp(out, src, s->len) == 0,
				   "%s/%d %s: squeezed round trip", ops->name, level, s->name);
		}
		TEST_CHECK(guard_ok(comp + cap, bound + GUARD_BYTES - cap),
			   "%s/%d %s: wrote past dst_cap %zu", ops->name, level, s->name, cap);
		clen = ops->compress(ctx, src, s->len, comp, bound);
		TEST_CHECK(clen >= 0, "%s/%d %s: compress after -ENOSPC %zd", ops->name,
			   level, s->name, clen);
		if (clen >= 0) {
			r = ops->decompress(ctx, comp, (size_t)clen, out, s->len);
			TEST_CHECK(r == 0 && memcmp(out, src, s->len) == 0,
				   "%s/%d %s: round trip after -ENOSPC", ops->name, level,
				   s->name);
		}
	}
out:
	free(out);
	free(comp);
	free(src);
}

/*
 * bound() suffices for incompressible input of any length: random data of
 * every length up to 300 bytes, then a spread of lengths up to 200 KiB.
 */
static void check_bound_sweep(const struct gw_codec_ops *ops, void *ctx, int level,
			      uint64_t *rng)
{
	const size_t max_len = 200 * 1024;
	uint8_t *src = malloc(max_len), *comp = malloc(ops->bound(max_len));
	uint8_t *out = malloc(max_len);
	size_t len;

	TEST_ASSERT(src && comp && out, "malloc");
	gen_random(src, max_len, rng);
	for (len = 0; len <= max_len; len = len < 300 ? len + 1 : len * 5 / 4 + 7) {
		ssize_t clen = ops->compress(ctx, src, len, comp, ops->bound(len));

		TEST_CHECK(clen >= 0 && (size_t)clen <= ops->bound(len),
			   "%s/%d: random %zu bytes: %zd (bound %zu)", ops->name, level, len,
			   clen, ops->bound(len));
		if (clen >= 0)
			TEST_CHECK(ops->decompress(ctx, comp, (size_t)clen, out, len) == 0 &&
				   memcmp(out, src, len) == 0, "%s/%d: random %zu bytes",
				   ops->name, level, len);
	}
	free(out);
	free(comp);
	free(src);
}

/* ctx_new clamps out-of-range levels itself rather than failing. */
static void check_clamp(const struct gw_codec_ops *ops, uint64_t *rng)
{
	const struct sample s = { "clamped", 4096, 1 };
	int levels[] = { ops->min_level - 100, ops->max_level + 100 }, i;

	for (i = 0; i < 2; i++) {
		void *ctx = ops->ctx_new(levels[i]);

		TEST_CHECK(ctx != NULL, "%s: ctx_new(%d)", ops->name, levels[i]);
		if (ctx)
			check_sample(ops, ctx, levels[i], &s, rng);
		ops->ctx_free(ctx);
	}
}

int main(void)
{
	uint64_t rng = 42;
	int i, tested = 0;

	for (i = 0; i < GW_CODEC__COUNT; i++) {
		const struct gw_codec_ops *ops = gw_codecs[i];
		int levels[3], l, nlevels = 0;

		if (!ops || ops->probe() != 0)
			continue;
		levels[nlevels++] = ops->min_level;
		if (ops->default_level != ops->min_level)
			levels[nlevels++] = ops->default_level;
		if (ops->max_level != ops->default_level)
			levels[nlevels++] = ops->max_level;
		for (l = 0; l < nlevels; l++) {
			void *ctx = ops->ctx_new(levels[l]);
			size_t k;

			TEST_ASSERT(ctx, "%s: ctx_new(%d)", ops->name, levels[l]);
			for (k = 0; k < sizeof(samples) / sizeof(samples[0]); k++)
				check_sample(ops, ctx, levels[l], &samples[k], &rng);
			check_bound_sweep(ops, ctx, levels[l], &rng);
			ops->ctx_free(ctx);
		}
		check_clamp(ops, &rng);
		printf("%s: levels", ops->name);
		for (l = 0; l < nlevels; l++)
			printf(" %d", levels[l]);
		printf(" ok\n");
		tested++;
	}
	TEST_ASSERT(tested > 0, "no codec usable");
	TEST_EXIT();
}
