/* SPDX-License-Identifier: MIT */
/*
 * zlib: the zlib format (RFC 1950: header + deflate + adler32), so that
 * payloads are interchangeable with the isal codec (codec_isal.c), which
 * writes and reads the same format. Levels 1..9, default 1.
 *
 * Decoder invariant: inflate writes only inside [dst, dst + dst_len);
 * success requires a complete stream (adler32 checked by zlib) that ends
 * exactly at dst_len and consumes exactly src_len bytes.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <zlib.h>

#include "codec/codec.h"
#include "codec/codec_impl.h"

#define ZLIB_LEVEL_DEFAULT	1
#define ZLIB_LEVEL_MIN		1
#define ZLIB_LEVEL_MAX		9
#define ZLIB_WINDOW_BITS	15	/* zlib wrapper, 32 KiB window */
#define ZLIB_MEM_LEVEL		8	/* the setting compressBound() assumes */

/* Owned by one channel thread at a time (see codec.h). */
struct zlib_ctx {
	z_stream def;	/* reset per call; level fixed at creation */
	z_stream inf;	/* reset per call */
	int def_ok, inf_ok;	/* initialised, so ctx_free must end them */
};

static int zlib_probe(void)
{
	return 0;
}

static void zlib_ctx_free(void *p)
{
	struct zlib_ctx *c = p;

	if (!c)
		return;
	if (c->inf_ok)
		inflateEnd(&c->inf);
	if (c->def_ok)
		deflateEnd(&c->def);
	free(c);
}

static void *zlib_ctx_new(int level)
{
	struct zlib_ctx *c;

	if (level < ZLIB_LEVEL_MIN)
		level = ZLIB_LEVEL_MIN;
	if (level > ZLIB_LEVEL_MAX)
		level = ZLIB_LEVEL_MAX;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (deflateInit2(&c->def, level, Z_DEFLATED, ZLIB_WINDOW_BITS, ZLIB_MEM_LEVEL,
			 Z_DEFAULT_STRATEGY) != Z_OK)
		goto err;
	c->def_ok = 1;
	if (inflateInit2(&c->inf, ZLIB_WINDOW_BITS) != Z_OK)
		goto err;
	c->inf_ok = 1;
	return c;

err:
	zlib_ctx_free(c);
	errno = ENOMEM;
	return NULL;
}

static size_t zlib_bound(size_t len_bytes)
{
	return compressBound(len_bytes);
}

static ssize_t zlib_compress(void *p, const void *src, size_t src_len,
			     void *dst, size_t dst_cap)
{
	struct zlib_ctx *c = p;
	int r;

	if (src_len > UINT_MAX)
		return -E2BIG;
	if (deflateReset(&c->def) != Z_OK)
		return -EINVAL;
	c->def.next_in = (Bytef *)src;
	c->def.avail_in = (uInt)src_len;
	c->def.next_out = dst;
	c->def.avail_out = dst_cap > UINT_MAX ? UINT_MAX : (uInt)dst_cap;
	r = deflate(&c->def, Z_FINISH);
	if (r == Z_STREAM_END)
		return (ssize_t)c->def.total_out;
	/* Z_OK or Z_BUF_ERROR with Z_FINISH: ran out of output space. */
	if (r == Z_OK || r == Z_BUF_ERROR)
		return -ENOSPC;
	return -EINVAL;
}

static int zlib_decompress(void *p, const void *src, size_t src_len,
			   void *dst, size_t dst_len)
{
	struct zlib_ctx *c = p;
	int r;

	if (src_len > UINT_MAX || dst_len > UINT_MAX)
		return -EBADMSG;
	if (inflateReset(&c->inf) != Z_OK)
		return -EINVAL;
	c->inf.next_in = (Bytef *)src;
	c->inf.avail_in = (uInt)src_len;
	c->inf.next_out = dst;
	c->inf.avail_out = (uInt)dst_len;
	/*
	 * Z_STREAM_END: complete and adler32 verified. Anything else
	 * (Z_BUF_ERROR: truncated or output too small; Z_DATA_ERROR;
	 * Z_NEED_DICT: preset dictionaries are never used here) is refused.
	 */
	r = inflate(&c->inf, Z_FINISH);
	if (r != Z_STREAM_END || c->inf.total_out != dst_len || c->inf.avail_in != 0)
		return -EBADMSG;
	return 0;
}

const struct gw_codec_ops gw_codec_zlib = {
	.name = "zlib",
	.id = GW_CODEC_ZLIB,
	.default_level = ZLIB_LEVEL_DEFAULT,
	.min_level = ZLIB_LEVEL_MIN,
	.max_level = ZLIB_LEVEL_MAX,
	.probe = zlib_probe,
	.ctx_new = zlib_ctx_new,
	.ctx_free = zlib_ctx_free,
	.bound = zlib_bound,
	.compress = zlib_compress,
	.decompress = zlib_decompress,
};
