/* SPDX-License-Identifier: MIT */
/*
 * XBZRLE: delta encoding of a re-sent page against the copy sent before.
 * Encoding (as QEMU's): repeated { uleb128 run of unchanged bytes,
 * uleb128 n of changed bytes, n bytes }; the first run may be 0.
 * The cache (source only) maps page -> last sent copy, bounded in bytes,
 * owned by one channel thread (pages are stable per channel).
 */
#ifndef GW_XBZRLE_H
#define GW_XBZRLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Encode @new against @old (both @len bytes) into @dst. Returns the encoded
 * length, 0 when the pages are equal, or -ENOSPC when the encoding would
 * exceed @dst_cap (send the page as a normal page then).
 */
ssize_t gw_xbzrle_encode(const uint8_t *old, const uint8_t *new, size_t len,
			 uint8_t *dst, size_t dst_cap);
/*
 * Apply hostile @src (@src_len bytes) to @page (@len bytes) in place.
 * 0, or -EBADMSG when it is malformed or would write past @len.
 */
int gw_xbzrle_decode(const uint8_t *src, size_t src_len, uint8_t *page, size_t len);

struct gw_xbzrle_cache;
/* NULL with errno. @cache_bytes: the bound; @page_size: bytes per page. */
struct gw_xbzrle_cache *gw_xbzrle_cache_new(size_t cache_bytes, size_t page_size);
void gw_xbzrle_cache_free(struct gw_xbzrle_cache *c);
/* The cached copy of @key (page identity), or NULL. */
uint8_t *gw_xbzrle_cache_get(struct gw_xbzrle_cache *c, uint64_t key);
/* Store a copy of @page for @key (may evict). 0 or -ENOMEM. */
int gw_xbzrle_cache_put(struct gw_xbzrle_cache *c, uint64_t key, const uint8_t *page);

#endif
