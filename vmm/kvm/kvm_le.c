/* SPDX-License-Identifier: MIT */
/* Little-endian field encoding (kvm_le.h). */
#include <errno.h>
#include <string.h>
#include "kvm/kvm_le.h"

void kvm_le_w_init(struct kvm_le_w *w, uint8_t *buf, size_t cap_bytes)
{
	w->buf = buf;
	w->cap_bytes = buf ? cap_bytes : 0;
	w->len_bytes = 0;
	w->err = 0;
}

static uint8_t *w_room(struct kvm_le_w *w, size_t n)
{
	uint8_t *p;

	if (w->err)
		return NULL;
	if (!w->buf) {			/* sizing pass */
		w->len_bytes += n;
		return NULL;
	}
	if (n > w->cap_bytes - w->len_bytes) {
		w->err = -EOVERFLOW;
		return NULL;
	}
	p = w->buf + w->len_bytes;
	w->len_bytes += n;
	return p;
}

static void put_le(struct kvm_le_w *w, uint64_t v, unsigned n)
{
	uint8_t *p = w_room(w, n);

	for (unsigned i = 0; p && i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

void kvm_le_put_u8(struct kvm_le_w *w, uint8_t v) { put_le(w, v, 1); }
void kvm_le_put_u16(struct kvm_le_w *w, uint16_t v) { put_le(w, v, 2); }
void kvm_le_put_u32(struct kvm_le_w *w, uint32_t v) { put_le(w, v, 4); }
void kvm_le_put_u64(struct kvm_le_w *w, uint64_t v) { put_le(w, v, 8); }

void kvm_le_put_bytes(struct kvm_le_w *w, const void *src, size_t n)
{
	uint8_t *p = w_room(w, n);

	if (p && n)
		memcpy(p, src, n);
}

size_t kvm_le_put_u32_later(struct kvm_le_w *w)
{
	size_t at = w->len_bytes;

	put_le(w, 0, 4);
	return at;
}

void kvm_le_patch_u32(struct kvm_le_w *w, size_t at, uint32_t v)
{
	if (w->err || !w->buf || at > w->len_bytes || w->len_bytes - at < 4)
		return;
	for (unsigned i = 0; i < 4; i++)
		w->buf[at + i] = (uint8_t)(v >> (8 * i));
}

int kvm_le_w_err(const struct kvm_le_w *w)
{
	return w->err;
}

void kvm_le_r_init(struct kvm_le_r *r, const void *buf, size_t len_bytes)
{
	r->buf = buf;
	r->len_bytes = buf ? len_bytes : 0;
	r->pos_bytes = 0;
	r->err = 0;
}

static const uint8_t *r_take(struct kvm_le_r *r, size_t n)
{
	const uint8_t *p;

	if (r->err)
		return NULL;
	if (n > r->len_bytes - r->pos_bytes) {
		r->err = -EBADMSG;
		return NULL;
	}
	p = r->buf + r->pos_bytes;
	r->pos_bytes += n;
	return p;
}

static uint64_t get_le(struct kvm_le_r *r, unsigned n)
{
	const uint8_t *p = r_take(r, n);
	uint64_t v = 0;

	for (unsigned i = 0; p && i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint8_t kvm_le_get_u8(struct kvm_le_r *r) { return (uint8_t)get_le(r, 1); }
uint16_t kvm_le_get_u16(struct kvm_le_r *r) { return (uint16_t)get_le(r, 2); }
uint32_t kvm_le_get_u32(struct kvm_le_r *r) { return (uint32_t)get_le(r, 4); }
uint64_t kvm_le_get_u64(struct kvm_le_r *r) { return get_le(r, 8); }

void kvm_le_get_bytes(struct kvm_le_r *r, void *dst, size_t n)
{
	const uint8_t *p = r_take(r, n);

	if (p && n)
		memcpy(dst, p, n);
	else if (n)
		memset(dst, 0, n);
}

struct kvm_le_r kvm_le_sub(struct kvm_le_r *r, size_t n)
{
	static const uint8_t empty[1];
	struct kvm_le_r sub;
	const uint8_t *p;

	if (!r->err && n == 0) {
		kvm_le_r_init(&sub, empty, 0);
		return sub;
	}
	p = r_take(r, n);

	kvm_le_r_init(&sub, p, p ? n : 0);
	if (!p)
		sub.err = -EBADMSG;
	return sub;
}

size_t kvm_le_left(const struct kvm_le_r *r)
{
	return r->err ? 0 : r->len_bytes - r->pos_bytes;
}

int kvm_le_r_err(const struct kvm_le_r *r)
{
	return r->err;
}

int kvm_le_r_done(const struct kvm_le_r *r)
{
	if (r->err)
		return r->err;
	return r->pos_bytes == r->len_bytes ? 0 : -EBADMSG;
}
