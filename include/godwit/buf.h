/* SPDX-License-Identifier: MIT */
/*
 * Little-endian, bounds-checked buffers: the one set of byte-order helpers
 * of godwit. The engine encodes every wire message with them, and VMMs
 * encode their state sections with them (sections are opaque to the engine
 * but must be portable: fixed widths, little-endian, never a C struct).
 *
 * A writer never writes past its capacity: a put that does not fit sets
 * `overflow` and every later put is dropped. A writer over no buffer (NULL)
 * only counts: `len` grows by every put, nothing is stored, so one encoder
 * run sizes the buffer for the next. A reader never reads past its
 * length: a get that does not fit sets `underrun` and returns 0. Check the
 * sticky flag once at the end (gw_rbuf_done also rejects trailing bytes).
 *
 * Threads: a writer or reader belongs to the thread using it.
 */
#ifndef GODWIT_BUF_H
#define GODWIT_BUF_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

static inline void gw_le16_put(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static inline void gw_le32_put(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void gw_le64_put(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint16_t gw_le16_get(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t gw_le32_get(const uint8_t *p)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static inline uint64_t gw_le64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* ---- writer ---- */
struct gw_wbuf {
	uint8_t *p;			/* NULL: a sizing pass (len counts, nothing stored) */
	size_t len, cap;		/* bytes written (or that would be), capacity */
	bool overflow;			/* sticky: a put did not fit */
};

/* @buf NULL: a sizing pass (@cap is ignored; len tells the size needed). */
static inline void gw_wbuf_init(struct gw_wbuf *w, void *buf, size_t cap)
{
	w->p = (uint8_t *)buf;
	w->len = 0;
	w->cap = buf ? cap : 0;
	w->overflow = false;
}

/* Room for @n more bytes, or NULL (and overflow; a sizing pass only counts). */
static inline uint8_t *gw_wbuf_take(struct gw_wbuf *w, size_t n)
{
	uint8_t *at;

	if (!w->p && !w->overflow) {
		w->len += n;
		return NULL;
	}
	if (w->overflow || n > w->cap - w->len) {
		w->overflow = true;
		return NULL;
	}
	at = w->p + w->len;
	w->len += n;
	return at;
}

static inline void gw_put_bytes(struct gw_wbuf *w, const void *src, size_t n)
{
	uint8_t *at = gw_wbuf_take(w, n);

	if (at && n)
		memcpy(at, src, n);
}

static inline void gw_put_u8(struct gw_wbuf *w, uint8_t v)
{
	uint8_t *at = gw_wbuf_take(w, 1);

	if (at)
		*at = v;
}

static inline void gw_put_le16(struct gw_wbuf *w, uint16_t v)
{
	uint8_t *at = gw_wbuf_take(w, 2);

	if (at)
		gw_le16_put(at, v);
}

static inline void gw_put_le32(struct gw_wbuf *w, uint32_t v)
{
	uint8_t *at = gw_wbuf_take(w, 4);

	if (at)
		gw_le32_put(at, v);
}

static inline void gw_put_le64(struct gw_wbuf *w, uint64_t v)
{
	uint8_t *at = gw_wbuf_take(w, 8);

	if (at)
		gw_le64_put(at, v);
}

/* Reserve 4 bytes now for a value known later (a length): their offset, for gw_patch_le32. */
static inline size_t gw_put_le32_later(struct gw_wbuf *w)
{
	size_t at = w->len;

	gw_put_le32(w, 0);
	return at;
}

/* Write @v into the 4 bytes reserved at @at (nothing after an overflow or in a sizing pass). */
static inline void gw_patch_le32(struct gw_wbuf *w, size_t at, uint32_t v)
{
	if (w->overflow || !w->p || at > w->len || w->len - at < 4)
		return;
	gw_le32_put(w->p + at, v);
}

/* 0, or -ENOSPC when something did not fit. */
static inline int gw_wbuf_done(const struct gw_wbuf *w)
{
	return w->overflow ? -ENOSPC : 0;
}

/* ---- reader ---- */
struct gw_rbuf {
	const uint8_t *p;
	size_t len, off;		/* bytes available, bytes consumed */
	bool underrun;			/* sticky: a get ran past the end */
};

/* @buf NULL reads as empty. */
static inline void gw_rbuf_init(struct gw_rbuf *r, const void *buf, size_t len)
{
	r->p = (const uint8_t *)buf;
	r->len = buf ? len : 0;
	r->off = 0;
	r->underrun = false;
}

/* Pointer to @n bytes inside the buffer, or NULL (and underrun). */
static inline const void *gw_get_bytes(struct gw_rbuf *r, size_t n)
{
	const uint8_t *at;

	if (r->underrun || n > r->len - r->off) {
		r->underrun = true;
		return NULL;
	}
	at = r->p + r->off;
	r->off += n;
	return at;
}

/* Copy @n bytes into @dst (zeros where they are not there, and underrun). */
static inline void gw_get_copy(struct gw_rbuf *r, void *dst, size_t n)
{
	const void *at = gw_get_bytes(r, n);

	if (at && n)
		memcpy(dst, at, n);
	else if (n)
		memset(dst, 0, n);
}

static inline uint8_t gw_get_u8(struct gw_rbuf *r)
{
	const uint8_t *at = (const uint8_t *)gw_get_bytes(r, 1);

	return at ? *at : 0;
}

static inline uint16_t gw_get_le16(struct gw_rbuf *r)
{
	const uint8_t *at = (const uint8_t *)gw_get_bytes(r, 2);

	return at ? gw_le16_get(at) : 0;
}

static inline uint32_t gw_get_le32(struct gw_rbuf *r)
{
	const uint8_t *at = (const uint8_t *)gw_get_bytes(r, 4);

	return at ? gw_le32_get(at) : 0;
}

static inline uint64_t gw_get_le64(struct gw_rbuf *r)
{
	const uint8_t *at = (const uint8_t *)gw_get_bytes(r, 8);

	return at ? gw_le64_get(at) : 0;
}

/* Bytes not consumed yet. */
static inline size_t gw_rbuf_left(const struct gw_rbuf *r)
{
	return r->underrun ? 0 : r->len - r->off;
}

/*
 * A reader over the next @n bytes of @r, consumed from @r: a record read
 * by itself. Underrun already when @r has fewer than @n bytes left.
 */
static inline struct gw_rbuf gw_rbuf_sub(struct gw_rbuf *r, size_t n)
{
	struct gw_rbuf sub;
	const void *at = n ? gw_get_bytes(r, n) : NULL;

	gw_rbuf_init(&sub, at, n);
	sub.underrun = r->underrun;	/* @r ran short, now or before */
	return sub;
}

/* 0, or -EPROTO when a get ran past the end (bytes left over are fine). */
static inline int gw_rbuf_err(const struct gw_rbuf *r)
{
	return r->underrun ? -EPROTO : 0;
}

/* 0, or -EPROTO when a get ran past the end or bytes are left over. */
static inline int gw_rbuf_done(const struct gw_rbuf *r)
{
	return r->underrun || r->off != r->len ? -EPROTO : 0;
}

#ifdef __cplusplus
}
#endif
#endif
