/* SPDX-License-Identifier: MIT */
/*
 * Page payload compressors, one file each (codec_*.c), one exported const
 * ops each, listed in gw_codecs[] (codec.c). Contexts are per channel and
 * used by one thread at a time.
 */
#ifndef GW_CODEC_H
#define GW_CODEC_H

#include <stddef.h>
#include <sys/types.h>
#include <godwit/params.h>

struct gw_codec_ops {
	const char *name;		/* "none", "zstd", "lz4", "zlib", "isal" */
	enum gw_codec_id id;		/* also its wire value (fixed numbers, see protocol.md) */
	int default_level, min_level, max_level;
	/* 0 when usable in this build, -EOPNOTSUPP otherwise */
	int (*probe)(void);
	/* NULL with errno on failure. @level is clamped by the caller. */
	void *(*ctx_new)(int level);
	void (*ctx_free)(void *ctx);	/* accepts NULL */
	/* Worst-case compressed size of @len_bytes. */
	size_t (*bound)(size_t len_bytes);
	/* Compressed length, or -ENOSPC when dst_cap is too small, -errno. */
	ssize_t (*compress)(void *ctx, const void *src, size_t src_len,
			    void *dst, size_t dst_cap);
	/*
	 * Decompress hostile input: must produce exactly @dst_len bytes and
	 * never write past them. 0, or -EBADMSG for corrupt or wrong-sized data.
	 */
	int (*decompress)(void *ctx, const void *src, size_t src_len,
			  void *dst, size_t dst_len);
};

/* Indexed by enum gw_codec_id (AUTO has no entry: NULL). */
extern const struct gw_codec_ops *const gw_codecs[GW_CODEC__COUNT];
/* Ops for @id, or NULL when unknown or not built. */
const struct gw_codec_ops *gw_codec_get(enum gw_codec_id id);

#endif
