/* SPDX-License-Identifier: MIT */
/*
 * Split virtqueues, the device's side (virtq.h). Every value read from the
 * rings is copied into a local once, then checked, then used: the guest may
 * change its memory at any time, so nothing is read twice.
 */
#include <endian.h>
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include "dev/virtio_regs.h"
#include "dev/virtq.h"

/* ---- guest RAM ---- */

int virtq_mem_add(struct virtq_mem *m, uint64_t gpa, void *host, uint64_t len_bytes)
{
	if (m->nr >= VIRTQ_MEM_MAX_RANGES)
		return -ENOSPC;
	/* Same alignment mod 16 on both sides: aligned ring fields are aligned on the host. */
	if (!len_bytes || !host || gpa + len_bytes < gpa || ((gpa ^ (uintptr_t)host) & 15))
		return -EINVAL;
	for (unsigned i = 0; i < m->nr; i++) {
		const struct virtq_mem_range *r = &m->ranges[i];

		if (gpa < r->gpa + r->len_bytes && r->gpa < gpa + len_bytes)
			return -EINVAL;
	}
	m->ranges[m->nr++] = (struct virtq_mem_range){ gpa, host, len_bytes };
	return 0;
}

void *virtq_mem_map(const struct virtq_mem *m, uint64_t gpa, uint64_t len_bytes)
{
	if (!len_bytes || gpa + len_bytes < gpa)
		return NULL;
	for (unsigned i = 0; i < m->nr; i++) {
		const struct virtq_mem_range *r = &m->ranges[i];

		/* gpa >= r->gpa first, so gpa - r->gpa cannot wrap. */
		if (gpa >= r->gpa && gpa - r->gpa < r->len_bytes &&
		    len_bytes <= r->len_bytes - (gpa - r->gpa))
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}

void virtq_mem_dirty(const struct virtq_mem *m, uint64_t gpa, uint64_t len_bytes)
{
	if (m->mark_dirty && len_bytes)
		m->mark_dirty(m->dirty_opaque, gpa, len_bytes);
}

/* ---- ring fields: 16/32-bit, little-endian, naturally aligned (virtq_enable) ---- */

static uint16_t ld16(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)(const void *)p, __ATOMIC_RELAXED));
}

static uint16_t ld16_acquire(const uint8_t *p)
{
	return le16toh(__atomic_load_n((const uint16_t *)(const void *)p, __ATOMIC_ACQUIRE));
}

static void st16(uint8_t *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)(void *)p, htole16(v), __ATOMIC_RELAXED);
}

static void st16_release(uint8_t *p, uint16_t v)
{
	__atomic_store_n((uint16_t *)(void *)p, htole16(v), __ATOMIC_RELEASE);
}

static void st32(uint8_t *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)(void *)p, htole32(v), __ATOMIC_RELAXED);
}

/* Record the first guest error; every later call on the queue fails until a reset. */
static int fail(struct virtq *vq, const char *what, uint64_t value)
{
	if (!vq->err) {
		vq->err = what;
		vq->err_value = value;
	}
	return -EPROTO;
}

/* ---- configuration ---- */

static uint8_t *map_area(struct virtq *vq, const struct virtq_mem *mem, uint64_t gpa,
			 uint64_t bytes, uint32_t align, const char *unaligned, const char *outside)
{
	uint8_t *p;

	if (gpa % align) {
		fail(vq, unaligned, gpa);
		return NULL;
	}
	p = virtq_mem_map(mem, gpa, bytes);
	if (!p)
		fail(vq, outside, gpa);
	return p;
}

static bool overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
	return a < b + b_len && b < a + a_len;
}

int virtq_enable(struct virtq *vq, const struct virtq_mem *mem, uint32_t num_max,
		 bool event_idx, bool indirect)
{
	uint32_t num = vq->num;
	uint64_t desc_bytes = virtq_desc_bytes(num), avail_bytes = virtq_avail_bytes(num, event_idx);
	uint64_t used_bytes = virtq_used_bytes(num, event_idx);

	vq->ready = false;
	if (num == 0 || num > num_max || num > VIRTQ_NUM_MAX) {
		fail(vq, "queue size 0 or above the maximum", num);
		return -EINVAL;
	}
	if (num & (num - 1)) {
		fail(vq, "queue size not a power of 2", num);
		return -EINVAL;
	}
	vq->desc = map_area(vq, mem, vq->desc_gpa, desc_bytes, VIRTQ_DESC_ALIGN,
			    "descriptor table unaligned", "descriptor table outside guest RAM");
	vq->avail = map_area(vq, mem, vq->avail_gpa, avail_bytes, VIRTQ_AVAIL_ALIGN,
			     "available ring unaligned", "available ring outside guest RAM");
	vq->used = map_area(vq, mem, vq->used_gpa, used_bytes, VIRTQ_USED_ALIGN,
			    "used ring unaligned", "used ring outside guest RAM");
	if (!vq->desc || !vq->avail || !vq->used)
		return -EINVAL;
	/*
	 * The device writes the used ring: over the driver's areas its own
	 * writes would look like new work (a livelock the fuzzer found). All
	 * three lie inside RAM, so no sum below wraps.
	 */
	if (overlap(vq->desc_gpa, desc_bytes, vq->used_gpa, used_bytes) ||
	    overlap(vq->avail_gpa, avail_bytes, vq->used_gpa, used_bytes) ||
	    overlap(vq->desc_gpa, desc_bytes, vq->avail_gpa, avail_bytes)) {
		fail(vq, "queue areas overlap", vq->used_gpa);
		return -EINVAL;
	}
	vq->mem = mem;
	vq->event_idx = event_idx;
	vq->indirect = indirect;
	vq->signalled_used = vq->used_idx;	/* nothing used yet as far as decisions go */
	vq->signalled_valid = false;
	vq->ready = true;
	return 0;
}

void virtq_reset(struct virtq *vq)
{
	memset(vq, 0, sizeof(*vq));
}

/* ---- the available ring ---- */

int virtq_pending(struct virtq *vq)
{
	uint16_t avail_idx, n;

	if (vq->err)
		return -EPROTO;
	if (!vq->ready)
		return 0;
	/* Acquire: the ring entries and descriptors it covers are read after it. */
	avail_idx = ld16_acquire(vq->avail + 2);
	n = (uint16_t)(avail_idx - vq->last_avail_idx);
	if (n > vq->num)
		return fail(vq, "available index ahead by more than the queue size", avail_idx);
	return n;
}

struct desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags, next;
};

static struct desc read_desc(const uint8_t *table, uint32_t i)
{
	uint8_t raw[VIRTQ_DESC_BYTES];
	struct desc d;

	memcpy(raw, table + (size_t)i * VIRTQ_DESC_BYTES, sizeof(raw));	/* one copy */
	memcpy(&d.addr, raw, 8);
	memcpy(&d.len, raw + 8, 4);
	memcpy(&d.flags, raw + 12, 2);
	memcpy(&d.next, raw + 14, 2);
	d.addr = le64toh(d.addr);
	d.len = le32toh(d.len);
	d.flags = le16toh(d.flags);
	d.next = le16toh(d.next);
	return d;
}

/* One buffer descriptor into the element, checked against guest RAM. */
static int add_buf(struct virtq *vq, struct virtq_elem *e, const struct desc *d)
{
	unsigned n = e->nr_out + e->nr_in;
	void *host;

	/* Refused as QEMU does: and so every step of a walk maps a buffer (at most 64). */
	if (d->len == 0)
		return fail(vq, "zero-length descriptor", d->addr);
	if (d->addr + d->len < d->addr)
		return fail(vq, "descriptor address + length overflows", d->addr);
	host = virtq_mem_map(vq->mem, d->addr, d->len);
	if (!host)
		return fail(vq, "descriptor outside guest RAM", d->addr);
	if (!(d->flags & VIRTQ_DESC_F_WRITE) && e->nr_in)
		return fail(vq, "readable descriptor after a writable one", d->addr);
	if (n >= VIRTQ_ELEM_MAX_IOV)
		return fail(vq, "chain maps more descriptors than the device takes", n);
	if ((uint64_t)e->out_bytes + e->in_bytes + d->len > VIRTQ_ELEM_MAX_BYTES)
		return fail(vq, "chain longer than the device takes (bytes)", d->len);
	e->iov[n] = (struct iovec){ host, d->len };
	e->gpa[n] = d->addr;
	if (d->flags & VIRTQ_DESC_F_WRITE) {
		e->nr_in++;
		e->in_bytes += d->len;
	} else {
		e->nr_out++;
		e->out_bytes += d->len;
	}
	return 0;
}

/* Switch the walk into the indirect table @d names. */
static int enter_indirect(struct virtq *vq, const struct desc *d, const uint8_t **table,
			  uint32_t *table_num)
{
	if (!vq->indirect)
		return fail(vq, "indirect descriptor not negotiated", d->addr);
	if (d->flags & VIRTQ_DESC_F_NEXT)
		return fail(vq, "indirect descriptor with NEXT set", d->flags);
	if (d->len == 0 || d->len % VIRTQ_DESC_BYTES)
		return fail(vq, "indirect table length not a multiple of 16", d->len);
	/* 2.7.5.3.1: no chain longer than the queue size, indirect ones included. */
	if (d->len / VIRTQ_DESC_BYTES > vq->num)
		return fail(vq, "indirect table longer than the queue size", d->len);
	if (d->addr + d->len < d->addr)
		return fail(vq, "indirect table address + length overflows", d->addr);
	*table = virtq_mem_map(vq->mem, d->addr, d->len);
	if (!*table)
		return fail(vq, "indirect table outside guest RAM", d->addr);
	*table_num = d->len / VIRTQ_DESC_BYTES;
	return 0;
}

/*
 * The chain from @head. Bounded: at most num descriptors of the ring's
 * table, then (once) at most the indirect table's count.
 */
static int walk(struct virtq *vq, uint16_t head, struct virtq_elem *e)
{
	const uint8_t *table = vq->desc;
	uint32_t table_num = vq->num, steps = 0, i = head;
	bool indirect = false;
	int ret;

	e->head = head;
	e->nr_out = e->nr_in = 0;
	e->out_bytes = e->in_bytes = 0;
	for (;;) {
		struct desc d = read_desc(table, i);

		if (++steps > table_num)
			return fail(vq, "descriptor chain loops (longer than its table)", i);
		if (d.flags & VIRTQ_DESC_F_INDIRECT) {
			if (indirect)
				return fail(vq, "indirect descriptor inside an indirect table", d.addr);
			ret = enter_indirect(vq, &d, &table, &table_num);
			if (ret)
				return ret;
			indirect = true;
			steps = 0;
			i = 0;
			continue;
		}
		ret = add_buf(vq, e, &d);
		if (ret)
			return ret;
		if (!(d.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		if (d.next >= table_num)
			return fail(vq, "next descriptor index beyond its table", d.next);
		i = d.next;
	}
}

int virtq_pop(struct virtq *vq, struct virtq_elem *e)
{
	int n = virtq_pending(vq);
	uint16_t head;
	int ret;

	if (n <= 0)
		return n;
	head = ld16(vq->avail + 4 + 2 * (vq->last_avail_idx & (vq->num - 1)));
	if (head >= vq->num)
		return fail(vq, "available ring names a descriptor beyond the queue size", head);
	ret = walk(vq, head, e);
	if (ret)
		return ret;
	vq->last_avail_idx++;
	return 1;
}

/* ---- buffers ---- */

/* Copy between the chain's [first, first+count) iovs and @buf at byte @off. */
static void copy_iov(const struct virtq_elem *e, unsigned first, unsigned count, uint32_t off,
		     void *buf, uint32_t len, bool to_guest, const struct virtq_mem *mem)
{
	uint8_t *b = buf;

	for (unsigned i = first; i < first + count && len; i++) {
		uint32_t n;

		if (off >= e->iov[i].iov_len) {
			off -= (uint32_t)e->iov[i].iov_len;
			continue;
		}
		n = (uint32_t)e->iov[i].iov_len - off;
		n = n < len ? n : len;
		if (to_guest) {
			memcpy((uint8_t *)e->iov[i].iov_base + off, b, n);
			virtq_mem_dirty(mem, e->gpa[i] + off, n);	/* after the write: see virtq.h */
		} else {
			memcpy(b, (uint8_t *)e->iov[i].iov_base + off, n);
		}
		b += n;
		len -= n;
		off = 0;
	}
}

int virtq_elem_write(struct virtq *vq, const struct virtq_elem *e, uint32_t off,
		     const void *src, uint32_t len)
{
	if (!vq->ready)
		return -EPROTO;
	if (len > e->in_bytes || off > e->in_bytes - len)
		return fail(vq, "device must write more than the chain's writable buffers hold",
			    (uint64_t)off + len);
	copy_iov(e, e->nr_out, e->nr_in, off, (void *)src, len, true, vq->mem);
	return 0;
}

int virtq_elem_read(struct virtq *vq, const struct virtq_elem *e, uint32_t off, void *dst,
		    uint32_t len)
{
	if (!vq->ready)
		return -EPROTO;
	if (len > e->out_bytes || off > e->out_bytes - len)
		return fail(vq, "device must read more than the chain's readable buffers hold",
			    (uint64_t)off + len);
	copy_iov(e, 0, e->nr_out, off, dst, len, false, vq->mem);
	return 0;
}

/* ---- the used ring ---- */

int virtq_push(struct virtq *vq, const struct virtq_elem *e, uint32_t written)
{
	uint32_t slot;
	uint8_t *ent;

	if (!vq->ready || vq->err)
		return -EPROTO;
	if (written > e->in_bytes)
		return fail(vq, "used length beyond the chain's writable buffers", written);
	slot = vq->used_idx & (vq->num - 1);
	ent = vq->used + 4 + (size_t)VIRTQ_USED_ELEM_BYTES * slot;
	st32(ent, e->head);
	st32(ent + 4, written);
	virtq_mem_dirty(vq->mem, vq->used_gpa + 4 + (uint64_t)VIRTQ_USED_ELEM_BYTES * slot,
			VIRTQ_USED_ELEM_BYTES);
	vq->used_idx++;
	/* Release: the entry (and the buffers written before the push) before the index. */
	st16_release(vq->used + 2, vq->used_idx);
	virtq_mem_dirty(vq->mem, vq->used_gpa + 2, 2);
	return 0;
}

bool virtq_should_interrupt(struct virtq *vq)
{
	uint16_t old, now, event;
	bool valid;

	if (!vq->ready)
		return false;
	/* The used index store before the read of the driver's suppression fields. */
	virtq_mb();
	old = vq->signalled_used;
	valid = vq->signalled_valid;
	now = vq->used_idx;
	vq->signalled_used = now;
	vq->signalled_valid = true;
	if (now == old)
		return false;		/* nothing used since the last decision */
	if (!vq->event_idx)
		return !(ld16(vq->avail) & VIRTQ_AVAIL_F_NO_INTERRUPT);
	event = ld16(vq->avail + 4 + 2 * vq->num);	/* used_event */
	return !valid || virtq_need_event(event, now, old);
}

bool virtq_set_notify(struct virtq *vq, bool on)
{
	if (!vq->ready || vq->err)
		return false;
	if (vq->event_idx) {
		/* avail_event: notify me when you pass what I have taken. Off: leave it behind. */
		if (on) {
			st16(vq->used + 4 + (size_t)VIRTQ_USED_ELEM_BYTES * vq->num, vq->last_avail_idx);
			virtq_mem_dirty(vq->mem, vq->used_gpa + 4 +
					(uint64_t)VIRTQ_USED_ELEM_BYTES * vq->num, 2);
		}
	} else {
		uint16_t want = on ? 0 : VIRTQ_USED_F_NO_NOTIFY;

		if (ld16(vq->used) != want) {
			st16(vq->used, want);
			virtq_mem_dirty(vq->mem, vq->used_gpa, 2);
		}
	}
	if (!on)
		return false;
	/* The store above before the re-read of the avail index (a notify may have been skipped). */
	virtq_mb();
	return ld16_acquire(vq->avail + 2) != vq->last_avail_idx;
}
