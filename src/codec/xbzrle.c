/* SPDX-License-Identifier: MIT */
/*
 * XBZRLE delta encoding (QEMU's format, see xbzrle.h) and the source-side
 * cache of last-sent page copies.
 *
 * Encoding: repeated { uleb128 zrun, uleb128 nzrun, nzrun bytes }, where
 * zrun counts unchanged bytes and nzrun changed ones. Like QEMU's decoder,
 * ours accepts a zero zrun only in the first pair and never a zero nzrun;
 * unchanged bytes after the last pair are implied. Our encoder only emits
 * that canonical form.
 *
 * The cached copy must be exactly what the destination holds: callers
 * encode from a stable copy of the page (a guest vCPU may write the page
 * while it is being encoded) and cache that same copy.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "codec/xbzrle.h"

/* uleb128 fields never exceed 32 bits (5 bytes); pages are far smaller. */
#define ULEB_MAX_BYTES	5

/* Equal bytes needed to end a changed run (see gw_xbzrle_encode). */
#define XBZRLE_MIN_ZRUN	3

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Whether any byte of @v is zero (the classic bit trick). */
static inline int has_zero_byte(uint64_t v)
{
	return ((v - 0x0101010101010101ull) & ~v & 0x8080808080808080ull) != 0;
}

static size_t uleb_len(size_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t uleb_put(uint8_t *dst, size_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		dst[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	dst[n++] = (uint8_t)v;
	return n;
}

/* Bytes consumed (1..ULEB_MAX_BYTES), or 0 when truncated or too long. */
static size_t uleb_get(const uint8_t *src, size_t avail, uint32_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < avail && i < ULEB_MAX_BYTES; i++) {
		v |= (uint64_t)(src[i] & 0x7f) << (7 * i);
		if (!(src[i] & 0x80)) {
			if (v > UINT32_MAX)
				return 0;
			*out = (uint32_t)v;
			return i + 1;
		}
	}
	return 0;
}

ssize_t gw_xbzrle_encode(const uint8_t *old, const uint8_t *new, size_t len,
			 uint8_t *dst, size_t dst_cap)
{
	size_t i = 0, d = 0;

	if (len > UINT32_MAX)
		return -EINVAL;

	while (i < len) {
		size_t z_start = i, nz_start, need;

		/* Unchanged run: 8 bytes at a time, then to the first change. */
		while (i + 8 <= len && load64(old + i) == load64(new + i))
			i += 8;
		while (i < len && old[i] == new[i])
			i++;
		if (i == len)
			break;	/* trailing unchanged bytes are implied */

		/*
		 * Changed run. A pair header costs at least 2 bytes, so fewer
		 * than XBZRLE_MIN_ZRUN equal bytes inside a change are cheaper
		 * to send as literals than to split the run. Words whose 8
		 * bytes all differ are skipped whole. old[nz_start] !=
		 * new[nz_start], so the run keeps at least one byte.
		 */
		nz_start = i;
		for (;;) {
			size_t e;

			if (i + 8 <= len && !has_zero_byte(load64(old + i) ^ load64(new + i))) {
				i += 8;
				continue;
			}
			if (i >= len)
				break;
			if (old[i] != new[i]) {
				i++;
				continue;
			}
			for (e = 1; e < XBZRLE_MIN_ZRUN && i + e < len; e++)
				if (old[i + e] != new[i + e])
					break;
			if (e == XBZRLE_MIN_ZRUN || i + e == len)
				break;	/* worth a new pair, or implied at the end */
			i += e;
		}

		need = uleb_len(nz_start - z_start) + uleb_len(i - nz_start) + (i - nz_start);
		if (need > dst_cap - d)
			return -ENOSPC;
		d += uleb_put(dst + d, nz_start - z_start);
		d += uleb_put(dst + d, i - nz_start);
		memcpy(dst + d, new + nz_start, i - nz_start);
		d += i - nz_start;
	}
	return (ssize_t)d;
}

int gw_xbzrle_decode(const uint8_t *src, size_t src_len, uint8_t *page, size_t len)
{
	size_t i = 0, d = 0, n;
	uint32_t count;

	/* Invariant: d <= len and i <= src_len at the top of each pair. */
	while (i < src_len) {
		n = uleb_get(src + i, src_len - i, &count);
		if (!n || (i && !count))
			return -EBADMSG;
		i += n;
		if (count > len - d)
			return -EBADMSG;
		d += count;

		n = uleb_get(src + i, src_len - i, &count);
		if (!n || !count)
			return -EBADMSG;
		i += n;
		if (count > len - d || count > src_len - i)
			return -EBADMSG;
		memcpy(page + d, src + i, count);
		d += count;
		i += count;
	}
	return 0;
}

/*
 * The cache: 2-way set associative (1 way when only one slot fits), set
 * chosen by a multiplicative hash of the key, LRU within a set. Pages live
 * in one anonymous mapping committed lazily, so a large bound costs only
 * what is used. Owned by one channel thread: no locking.
 */
struct xbzrle_slot {
	uint64_t key;
	bool valid;
	uint8_t age;	/* 0 = most recently used in its set */
};

struct gw_xbzrle_cache {
	size_t page_size;	/* bytes per page */
	size_t nsets, nways;	/* nsets * nways slots, nsets >= 1 */
	size_t map_bytes;	/* length of the pages mapping */
	struct xbzrle_slot *slots;	/* [set * nways + way] */
	uint8_t *pages;			/* same index, page_size bytes each */
};

struct gw_xbzrle_cache *gw_xbzrle_cache_new(size_t cache_bytes, size_t page_size)
{
	struct gw_xbzrle_cache *c;
	size_t nslots;
	void *map;

	if (!page_size) {
		errno = EINVAL;
		return NULL;
	}
	nslots = cache_bytes / page_size;
	if (!nslots)
		nslots = 1;

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->page_size = page_size;
	c->nways = nslots >= 2 ? 2 : 1;
	c->nsets = nslots / c->nways;
	nslots = c->nsets * c->nways;
	if (nslots > SIZE_MAX / page_size) {
		errno = ENOMEM;
		goto err_free;
	}
	c->map_bytes = nslots * page_size;
	c->slots = calloc(nslots, sizeof(*c->slots));
	if (!c->slots)
		goto err_free;
	map = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		goto err_slots;
	c->pages = map;
	return c;

err_slots:
	free(c->slots);
err_free:
	free(c);
	return NULL;
}

void gw_xbzrle_cache_free(struct gw_xbzrle_cache *c)
{
	if (!c)
		return;
	munmap(c->pages, c->map_bytes);
	free(c->slots);
	free(c);
}

static size_t cache_set(const struct gw_xbzrle_cache *c, uint64_t key)
{
	/* Fibonacci hashing, then Lemire's multiply-shift range reduction. */
	uint64_t h = key * 0x9E3779B97F4A7C15ull;

	h ^= h >> 29;
	return (size_t)(((unsigned __int128)h * c->nsets) >> 64);
}

static void cache_touch(struct gw_xbzrle_cache *c, size_t first, size_t idx)
{
	size_t w;

	for (w = 0; w < c->nways; w++)
		c->slots[first + w].age = 1;
	c->slots[idx].age = 0;
}

uint8_t *gw_xbzrle_cache_get(struct gw_xbzrle_cache *c, uint64_t key)
{
	size_t first = cache_set(c, key) * c->nways, w;

	for (w = 0; w < c->nways; w++) {
		struct xbzrle_slot *s = &c->slots[first + w];

		if (s->valid && s->key == key) {
			cache_touch(c, first, first + w);
			return c->pages + (first + w) * c->page_size;
		}
	}
	return NULL;
}

int gw_xbzrle_cache_put(struct gw_xbzrle_cache *c, uint64_t key, const uint8_t *page)
{
	size_t first = cache_set(c, key) * c->nways, w, victim;
	uint8_t *dst;

	/* Same key: overwrite in place. Else a free way, else the LRU way. */
	for (w = 0; w < c->nways; w++)
		if (c->slots[first + w].valid && c->slots[first + w].key == key)
			goto store_at_w;
	for (w = 0; w < c->nways; w++)
		if (!c->slots[first + w].valid)
			goto store_at_w;
	for (w = 0; w < c->nways; w++)
		if (c->slots[first + w].age)
			goto store_at_w;
	w = 0;
store_at_w:
	victim = first + w;
	dst = c->pages + victim * c->page_size;
	/* The caller may hand back the pointer get() returned. */
	if (dst != page)
		memcpy(dst, page, c->page_size);
	c->slots[victim].key = key;
	c->slots[victim].valid = true;
	cache_touch(c, first, victim);
	return 0;
}
