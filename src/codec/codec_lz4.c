/* SPDX-License-Identifier: MIT */
/*
 * lz4: raw LZ4 blocks (no frame: the wire frame carries the length and a
 * CRC32C). Level 1 is LZ4's fast compressor (acceleration 1); levels
 * 2..12 use LZ4HC at that level, for links slow enough to pay for it.
 *
 * Decoder invariant: LZ4_decompress_safe never writes past its capacity,
 * which is dst_len; success requires exactly dst_len bytes out.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <lz4.h>
#include <lz4hc.h>

#include "codec/codec.h"
#include "codec/codec_impl.h"

#define LZ4_LEVEL_DEFAULT	1
#define LZ4_LEVEL_MIN		1
#define LZ4_LEVEL_MAX		LZ4HC_CLEVEL_MAX

/* Owned by one channel thread at a time (see codec.h). */
struct lz4_ctx {
	int level;	/* 1: fast; 2..12: HC level */
	void *state;	/* LZ4_sizeofState() or LZ4_sizeofStateHC() bytes */
};

static int lz4_probe(void)
{
	return 0;
}

static void lz4_ctx_free(void *p)
{
	struct lz4_ctx *c = p;

	if (!c)
		return;
	free(c->state);
	free(c);
}

static void *lz4_ctx_new(int level)
{
	struct lz4_ctx *c;
	int state_bytes;

	if (level < LZ4_LEVEL_MIN)
		level = LZ4_LEVEL_MIN;
	if (level > LZ4_LEVEL_MAX)
		level = LZ4_LEVEL_MAX;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->level = level;
	state_bytes = level == 1 ? LZ4_sizeofState() : LZ4_sizeofStateHC();
	/* Both states need pointer alignment; malloc gives 16 bytes. */
	c->state = malloc((size_t)state_bytes);
	if (!c->state) {
		free(c);
		errno = ENOMEM;
		return NULL;
	}
	return c;
}

static size_t lz4_bound(size_t len_bytes)
{
	if (len_bytes > LZ4_MAX_INPUT_SIZE)
		return len_bytes + len_bytes / 255 + 16;	/* compress refuses it anyway */
	return (size_t)LZ4_compressBound((int)len_bytes);
}

static ssize_t lz4_compress(void *p, const void *src, size_t src_len,
			    void *dst, size_t dst_cap)
{
	struct lz4_ctx *c = p;
	int cap = dst_cap > INT_MAX ? INT_MAX : (int)dst_cap;
	int r;

	if (src_len > LZ4_MAX_INPUT_SIZE)
		return -E2BIG;
	if (c->level == 1)
		r = LZ4_compress_fast_extState(c->state, src, dst, (int)src_len, cap, 1);
	else
		r = LZ4_compress_HC_extStateHC(c->state, src, dst, (int)src_len, cap,
					       c->level);
	/* Both return 0 when the output does not fit in cap. */
	if (r <= 0)
		return -ENOSPC;
	return r;
}

static int lz4_decompress(void *p, const void *src, size_t src_len,
			  void *dst, size_t dst_len)
{
	int r;

	(void)p;
	if (src_len > INT_MAX || dst_len > INT_MAX)
		return -EBADMSG;
	r = LZ4_decompress_safe(src, dst, (int)src_len, (int)dst_len);
	if (r < 0 || (size_t)r != dst_len)
		return -EBADMSG;
	return 0;
}

const struct gw_codec_ops gw_codec_lz4 = {
	.name = "lz4",
	.id = GW_CODEC_LZ4,
	.default_level = LZ4_LEVEL_DEFAULT,
	.min_level = LZ4_LEVEL_MIN,
	.max_level = LZ4_LEVEL_MAX,
	.probe = lz4_probe,
	.ctx_new = lz4_ctx_new,
	.ctx_free = lz4_ctx_free,
	.bound = lz4_bound,
	.compress = lz4_compress,
	.decompress = lz4_decompress,
};
