/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the zlib and isal codecs share one wire format (RFC 1950):
 * a payload compressed by either, at any of its levels, decompresses with
 * the other to exactly the original bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/codec.h"
#include "codec_gen.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define BATCH_BYTES	(512 * 1024)

static void cross(const struct gw_codec_ops *enc, const struct gw_codec_ops *dec,
		  const uint8_t *src, size_t len, const char *what)
{
	void *dctx = dec->ctx_new(dec->default_level);
	size_t bound = enc->bound(len);
	uint8_t *comp = malloc(bound), *out = malloc(len + 1);
	int level;

	TEST_ASSERT(dctx && comp && out, "setup");
	for (level = enc->min_level; level <= enc->max_level; level++) {
		void *ectx = enc->ctx_new(level);
		ssize_t clen;
		int r;

		TEST_ASSERT(ectx, "%s: ctx_new(%d)", enc->name, level);
		clen = enc->compress(ectx, src, len, comp, bound);
		TEST_CHECK(clen >= 0, "%s/%d %s: compress %zd", enc->name, level, what, clen);
		if (clen >= 0) {
			r = dec->decompress(dctx, comp, (size_t)clen, out, len);
			TEST_CHECK(r == 0 && memcmp(out, src, len) == 0,
				   "%s/%d -> %s %s: r=%d", enc->name, level, dec->name, what, r);
		}
		enc->ctx_free(ectx);
	}
	free(out);
	free(comp);
	dec->ctx_free(dctx);
}

int main(void)
{
	const struct gw_codec_ops *zl = gw_codec_get(GW_CODEC_ZLIB);
	const struct gw_codec_ops *is = gw_codec_get(GW_CODEC_ISAL);
	uint8_t *buf = malloc(BATCH_BYTES);
	uint64_t rng = 1;

	if (!zl || !is)
		test_skip("zlib or isal codec not built");
	TEST_ASSERT(buf, "malloc");

	gen_mix(buf, BATCH_BYTES, &rng);
	cross(is, zl, buf, BATCH_BYTES, "mix-batch");
	cross(zl, is, buf, BATCH_BYTES, "mix-batch");
	gen_text(buf, 4096, &rng);
	cross(is, zl, buf, 4096, "text-page");
	cross(zl, is, buf, 4096, "text-page");
	gen_random(buf, 4096, &rng);
	cross(is, zl, buf, 4096, "random-page");
	cross(zl, is, buf, 4096, "random-page");
	memset(buf, 0, BATCH_BYTES);
	cross(is, zl, buf, BATCH_BYTES, "zero-batch");
	cross(zl, is, buf, BATCH_BYTES, "zero-batch");
	cross(is, zl, buf, 0, "empty");
	cross(zl, is, buf, 0, "empty");
	free(buf);
	printf("zlib <-> isal interoperable\n");
	TEST_EXIT();
}
