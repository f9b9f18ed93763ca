/* SPDX-License-Identifier: MIT */
/*
 * isal: ISA-L igzip, writing and reading the zlib format (RFC 1950) so that
 * its payloads are interchangeable with the zlib codec (codec_zlib.c):
 * a destination without ISA-L can still take them. Levels 0..3, default 1;
 * levels 1..3 get the level buffer ISA-L recommends (ISAL_DEF_LVLx_DEFAULT).
 *
 * Decoder invariant: isal_inflate writes only inside [dst, dst + dst_len);
 * success requires a finished stream (adler32 checked by ISA-L) of exactly
 * dst_len bytes that consumed exactly src_len bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <isa-l/igzip_lib.h>
#include <zlib.h>

#include "codec/codec.h"
#include "codec/codec_impl.h"

#define ISAL_LEVEL_DEFAULT	1
#define ISAL_LEVEL_MIN		0
#define ISAL_LEVEL_MAX		ISAL_DEF_MAX_LEVEL

/*
 * Slack over compressBound(): stateless igzip falls back to stored blocks
 * (5 bytes per 64 KiB, less than zlib's bound) but wants a little room for
 * its 8-byte bit-buffer flushes near the end of the output.
 */
#define ISAL_BOUND_SLACK_BYTES	64

/* Owned by one channel thread at a time (see codec.h). */
struct isal_ctx {
	int level;
	uint8_t *level_buf;		/* NULL at level 0 */
	uint32_t level_buf_bytes;
	struct isal_zstream def;	/* re-initialised per call */
	struct inflate_state inf;	/* re-initialised per call */
};

static int isal_probe(void)
{
	return 0;
}

static void isal_ctx_free(void *p)
{
	struct isal_ctx *c = p;

	if (!c)
		return;
	free(c->level_buf);
	free(c);
}

static uint32_t isal_level_buf_bytes(int level)
{
	switch (level) {
	case 1: return ISAL_DEF_LVL1_DEFAULT;
	case 2: return ISAL_DEF_LVL2_DEFAULT;
	case 3: return ISAL_DEF_LVL3_DEFAULT;
	default: return 0;
	}
}

static void *isal_ctx_new(int level)
{
	struct isal_ctx *c;

	if (level < ISAL_LEVEL_MIN)
		level = ISAL_LEVEL_MIN;
	if (level > ISAL_LEVEL_MAX)
		level = ISAL_LEVEL_MAX;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->level = level;
	c->level_buf_bytes = isal_level_buf_bytes(level);
	if (c->level_buf_bytes) {
		c->level_buf = malloc(c->level_buf_bytes);
		if (!c->level_buf) {
			free(c);
			errno = ENOMEM;
			return NULL;
		}
	}
	return c;
}

static size_t isal_bound(size_t len_bytes)
{
	return compressBound(len_bytes) + ISAL_BOUND_SLACK_BYTES;
}

static ssize_t isal_compress(void *p, const void *src, size_t src_len,
			     void *dst, size_t dst_cap)
{
	struct isal_ctx *c = p;
	struct isal_zstream *s = &c->def;
	int r;

	if (src_len > UINT32_MAX)
		return -E2BIG;
	isal_deflate_stateless_init(s);
	s->level = (uint32_t)c->level;
	s->level_buf = c->level_buf;
	s->level_buf_size = c->level_buf_bytes;
	s->gzip_flag = IGZIP_ZLIB;
	s->end_of_stream = 1;
	s->flush = NO_FLUSH;
	s->next_in = (uint8_t *)src;
	s->avail_in = (uint32_t)src_len;
	s->next_out = dst;
	s->avail_out = dst_cap > UINT32_MAX ? UINT32_MAX : (uint32_t)dst_cap;
	r = isal_deflate_stateless(s);
	if (r == STATELESS_OVERFLOW)
		return -ENOSPC;
	if (r != COMP_OK || s->avail_in != 0)
		return -EINVAL;
	return (ssize_t)s->total_out;
}

static int isal_decompress(void *p, const void *src, size_t src_len,
			   void *dst, size_t dst_len)
{
	struct isal_ctx *c = p;
	struct inflate_state *s = &c->inf;
	int r;

	if (src_len > UINT32_MAX || dst_len > UINT32_MAX)
		return -EBADMSG;
	isal_inflate_init(s);
	s->crc_flag = ISAL_ZLIB;
	s->next_in = (uint8_t *)src;
	s->avail_in = (uint32_t)src_len;
	s->next_out = dst;
	s->avail_out = (uint32_t)dst_len;
	r = isal_inflate(s);
	/*
	 * ISAL_NEED_DICT and every negative code are refusals. igzip reads
	 * ahead into its bit buffer: whole bytes left there (read_in_length
	 * bits) were not part of the stream either, so trailing bytes show
	 * up in avail_in or read_in_length.
	 */
	if (r != ISAL_DECOMP_OK || s->block_state != ISAL_BLOCK_FINISH ||
	    s->total_out != dst_len || s->avail_in != 0 || s->read_in_length >= 8)
		return -EBADMSG;
	return 0;
}

const struct gw_codec_ops gw_codec_isal = {
	.name = "isal",
	.id = GW_CODEC_ISAL,
	.default_level = ISAL_LEVEL_DEFAULT,
	.min_level = ISAL_LEVEL_MIN,
	.max_level = ISAL_LEVEL_MAX,
	.probe = isal_probe,
	.ctx_new = isal_ctx_new,
	.ctx_free = isal_ctx_free,
	.bound = isal_bound,
	.compress = isal_compress,
	.decompress = isal_decompress,
};
