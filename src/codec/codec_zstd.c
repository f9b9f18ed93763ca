/* SPDX-License-Identifier: MIT */
/*
 * zstd: one-shot frames with the content size in the header (the default
 * for ZSTD_compress2), no frame checksum: wire frames carry CRC32C, and the
 * decoder's job here is bounded output, not integrity.
 *
 * Decoder invariant: it writes only inside [dst, dst + dst_len), and
 * succeeds only when the input is exactly one frame whose declared content
 * size is dst_len and which decodes to exactly dst_len bytes.
 */
#include <errno.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "codec/codec.h"
#include "codec/codec_impl.h"

#define ZSTD_LEVEL_DEFAULT	1
#define ZSTD_LEVEL_MIN		1
#define ZSTD_LEVEL_MAX		19

/* Owned by one channel thread at a time (see codec.h). */
struct zstd_ctx {
	ZSTD_CCtx *cctx;	/* level set once at creation */
	ZSTD_DCtx *dctx;
};

static int zstd_probe(void)
{
	return 0;
}

static void zstd_ctx_free(void *p)
{
	struct zstd_ctx *c = p;

	if (!c)
		return;
	ZSTD_freeDCtx(c->dctx);
	ZSTD_freeCCtx(c->cctx);
	free(c);
}

static void *zstd_ctx_new(int level)
{
	struct zstd_ctx *c;

	/* The caller clamps; clamp again so level 0 never means zstd's 3. */
	if (level < ZSTD_LEVEL_MIN)
		level = ZSTD_LEVEL_MIN;
	if (level > ZSTD_LEVEL_MAX)
		level = ZSTD_LEVEL_MAX;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->cctx = ZSTD_createCCtx();
	c->dctx = ZSTD_createDCtx();
	if (!c->cctx || !c->dctx)
		goto err_nomem;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0)))
		goto err_inval;
	return c;

err_inval:
	zstd_ctx_free(c);
	errno = EINVAL;
	return NULL;
err_nomem:
	zstd_ctx_free(c);
	errno = ENOMEM;
	return NULL;
}

static size_t zstd_bound(size_t len_bytes)
{
	return ZSTD_compressBound(len_bytes);
}

static ssize_t zstd_compress(void *p, const void *src, size_t src_len,
			     void *dst, size_t dst_cap)
{
	struct zstd_ctx *c = p;
	size_t r;

	r = ZSTD_compress2(c->cctx, dst, dst_cap, src, src_len);
	if (ZSTD_isError(r)) {
		/* compress2 leaves the session mid-frame on error: reset it. */
		ZSTD_CCtx_reset(c->cctx, ZSTD_reset_session_only);
		if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
			return -ENOSPC;
		return -EINVAL;
	}
	if ((ssize_t)r < 0)
		return -EOVERFLOW;
	return (ssize_t)r;
}

static int zstd_decompress(void *p, const void *src, size_t src_len,
			   void *dst, size_t dst_len)
{
	struct zstd_ctx *c = p;
	unsigned long long content_bytes;
	size_t frame_bytes, r;

	/* Refuse before decoding: unknown or different declared size. */
	content_bytes = ZSTD_getFrameContentSize(src, src_len);
	if (content_bytes == ZSTD_CONTENTSIZE_UNKNOWN ||
	    content_bytes == ZSTD_CONTENTSIZE_ERROR || content_bytes != dst_len)
		return -EBADMSG;
	/* Exactly one frame: no trailing frames or bytes. */
	frame_bytes = ZSTD_findFrameCompressedSize(src, src_len);
	if (ZSTD_isError(frame_bytes) || frame_bytes != src_len)
		return -EBADMSG;

	r = ZSTD_decompressDCtx(c->dctx, dst, dst_len, src, src_len);
	if (ZSTD_isError(r) || r != dst_len)
		return -EBADMSG;
	return 0;
}

const struct gw_codec_ops gw_codec_zstd = {
	.name = "zstd",
	.id = GW_CODEC_ZSTD,
	.default_level = ZSTD_LEVEL_DEFAULT,
	.min_level = ZSTD_LEVEL_MIN,
	.max_level = ZSTD_LEVEL_MAX,
	.probe = zstd_probe,
	.ctx_new = zstd_ctx_new,
	.ctx_free = zstd_ctx_free,
	.bound = zstd_bound,
	.compress = zstd_compress,
	.decompress = zstd_decompress,
};
