/* SPDX-License-Identifier: MIT */
/*
 * Little-endian, fixed-width field encoding for state sections: every field
 * written one by one, never a C struct as bytes. A writer and a reader with
 * a sticky error: after the first overrun every call is a no-op and
 * kvm_le_*_err() reports -EOVERFLOW (writer) or -EBADMSG (reader), so a
 * codec checks once at the end. All the KVM VMM's encoders sit on these few
 * functions (one file), ready to move to a public buffer API.
 *
 * Threads: a writer or reader belongs to the thread using it.
 */
#ifndef GW_KVM_LE_H
#define GW_KVM_LE_H

#include <stddef.h>
#include <stdint.h>

struct kvm_le_w {
	uint8_t *buf;			/* NULL: only count (len_bytes grows, nothing stored) */
	size_t cap_bytes;
	size_t len_bytes;		/* bytes written (or that would be) */
	int err;			/* 0 or -EOVERFLOW, sticky */
};

struct kvm_le_r {
	const uint8_t *buf;
	size_t len_bytes;
	size_t pos_bytes;
	int err;			/* 0 or -EBADMSG, sticky */
};

/* @buf NULL with @cap 0: a sizing pass (len_bytes tells the size needed). */
void kvm_le_w_init(struct kvm_le_w *w, uint8_t *buf, size_t cap_bytes);
void kvm_le_put_u8(struct kvm_le_w *w, uint8_t v);
void kvm_le_put_u16(struct kvm_le_w *w, uint16_t v);
void kvm_le_put_u32(struct kvm_le_w *w, uint32_t v);
void kvm_le_put_u64(struct kvm_le_w *w, uint64_t v);
void kvm_le_put_bytes(struct kvm_le_w *w, const void *p, size_t n);
/* Reserve 4 bytes now, write them later (a length known afterwards). */
size_t kvm_le_put_u32_later(struct kvm_le_w *w);
void kvm_le_patch_u32(struct kvm_le_w *w, size_t at, uint32_t v);
int kvm_le_w_err(const struct kvm_le_w *w);

void kvm_le_r_init(struct kvm_le_r *r, const void *buf, size_t len_bytes);
uint8_t kvm_le_get_u8(struct kvm_le_r *r);
uint16_t kvm_le_get_u16(struct kvm_le_r *r);
uint32_t kvm_le_get_u32(struct kvm_le_r *r);
uint64_t kvm_le_get_u64(struct kvm_le_r *r);
void kvm_le_get_bytes(struct kvm_le_r *r, void *p, size_t n);
/* A sub-reader over the next @n bytes (consumed from @r). */
struct kvm_le_r kvm_le_sub(struct kvm_le_r *r, size_t n);
size_t kvm_le_left(const struct kvm_le_r *r);
int kvm_le_r_err(const struct kvm_le_r *r);
/* Reading succeeded and consumed everything: 0, else -EBADMSG. */
int kvm_le_r_done(const struct kvm_le_r *r);

#endif
