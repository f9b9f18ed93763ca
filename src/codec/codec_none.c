/* SPDX-License-Identifier: MIT */
/*
 * "none": the payload is the pages themselves. Kept as a codec so the data
 * path has one shape; the length check is the only validation possible.
 */
#include <errno.h>
#include <string.h>

#include "codec/codec.h"
#include "codec/codec_impl.h"

/* No state; a non-NULL token so callers can treat NULL as failure. */
static char none_ctx_token;

static int none_probe(void)
{
	return 0;
}

static void *none_ctx_new(int level)
{
	(void)level;
	return &none_ctx_token;
}

static void none_ctx_free(void *ctx)
{
	(void)ctx;
}

static size_t none_bound(size_t len_bytes)
{
	return len_bytes;
}

static ssize_t none_compress(void *ctx, const void *src, size_t src_len,
			     void *dst, size_t dst_cap)
{
	(void)ctx;
	if (src_len > dst_cap)
		return -ENOSPC;
	if ((ssize_t)src_len < 0)
		return -EINVAL;
	memcpy(dst, src, src_len);
	return (ssize_t)src_len;
}

static int none_decompress(void *ctx, const void *src, size_t src_len,
			   void *dst, size_t dst_len)
{
	(void)ctx;
	if (src_len != dst_len)
		return -EBADMSG;
	memcpy(dst, src, dst_len);
	return 0;
}

const struct gw_codec_ops gw_codec_none = {
	.name = "none",
	.id = GW_CODEC_NONE,
	.default_level = 0, .min_level = 0, .max_level = 0,
	.probe = none_probe,
	.ctx_new = none_ctx_new,
	.ctx_free = none_ctx_free,
	.bound = none_bound,
	.compress = none_compress,
	.decompress = none_decompress,
};
