/* SPDX-License-Identifier: MIT */
/*
 * The transport's state section (virtio_mmio.h), version 1, little-endian,
 * fixed-width fields in this order:
 *
 *   le32 device_id            must equal the loading device's
 *   le32 status               VIRTIO_STATUS_* (NEEDS_RESET included)
 *   le64 driver_features      a subset of what this device offers
 *   le32 dev_features_sel, le32 drv_features_sel, le32 queue_sel
 *   le32 isr                  pending interrupt bits (VIRTIO_MMIO_INT_*)
 *   le32 config_generation
 *   le16 nr_queues            must equal the device's
 *   le16 reserved (0)
 *   per queue (nr_queues times, 36 bytes):
 *     le32 num, le64 desc_gpa, le64 avail_gpa, le64 used_gpa,
 *     le16 last_avail_idx, le16 used_idx, le16 signalled_used,
 *     le16 flags              bit 0 ready, bit 1 signalled_valid
 *   le32 device_bytes, then that many bytes for ops->load
 *
 * A decoder refuses the section unless every field makes sense here: the
 * status a state machine could reach, features offered (once FEATURES_OK:
 * before, the driver may write anything), a ready queue's
 * size and rings valid in this VM's RAM, no more buffers in flight than
 * the queue holds, no trailing bytes. It applies nothing until all passed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/vm.h>
#include "dev/virtio_mmio.h"

#define Q_READY		0x1u
#define Q_SIGNALLED	0x2u
#define STATE_FIXED_BYTES	40u
#define STATE_QUEUE_BYTES	36u
#define STATE_DEVICE_MAX_BYTES	(64u << 10)

static int bad(char *why, size_t why_len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static void encode_queue(struct gw_wbuf *w, const struct virtq *vq)
{
	gw_put_le32(w, vq->num);
	gw_put_le64(w, vq->desc_gpa);
	gw_put_le64(w, vq->avail_gpa);
	gw_put_le64(w, vq->used_gpa);
	gw_put_le16(w, vq->last_avail_idx);
	gw_put_le16(w, vq->used_idx);
	gw_put_le16(w, vq->signalled_used);
	gw_put_le16(w, (uint16_t)((vq->ready ? Q_READY : 0) | (vq->signalled_valid ? Q_SIGNALLED : 0)));
}

int virtio_mmio_encode(struct virtio_mmio *t, struct gw_wbuf *w)
{
	size_t len_at;
	int ret;

	gw_put_le32(w, t->ops->device_id);
	gw_put_le32(w, t->status);
	gw_put_le64(w, t->driver_features);
	gw_put_le32(w, t->dev_features_sel);
	gw_put_le32(w, t->drv_features_sel);
	gw_put_le32(w, t->queue_sel);
	gw_put_le32(w, t->isr);
	gw_put_le32(w, t->config_generation);
	gw_put_le16(w, t->ops->nr_queues);
	gw_put_le16(w, 0);
	for (unsigned q = 0; q < t->ops->nr_queues; q++)
		encode_queue(w, &t->vq[q]);
	len_at = w->len;
	gw_put_le32(w, 0);		/* device_bytes, filled in below */
	if (t->ops->save) {
		ret = t->ops->save(t, w);
		if (ret)
			return ret;
	}
	if (!w->overflow)
		gw_le32_put(w->p + len_at, (uint32_t)(w->len - len_at - 4));
	return gw_wbuf_done(w);
}

/* Decoded but not applied yet. */
struct saved {
	uint32_t status, isr, config_generation, dev_sel, drv_sel, queue_sel;
	uint64_t driver_features;
	struct virtq vq[VIRTIO_MMIO_MAX_QUEUES];
};

static int check_status(const struct virtio_mmio *t, const struct saved *s, char *why,
			size_t why_len)
{
	uint32_t st = s->status;

	if (st & ~(VIRTIO_STATUS_DRIVER_BITS | VIRTIO_STATUS_NEEDS_RESET))
		return bad(why, why_len, "%s: status %#x has unknown bits", t->name, st);
	if ((st & VIRTIO_STATUS_DRIVER_OK) && !(st & VIRTIO_STATUS_FEATURES_OK))
		return bad(why, why_len, "%s: status %#x: DRIVER_OK without FEATURES_OK", t->name, st);
	/* Before FEATURES_OK the driver may have written anything: checked when it sets it. */
	if ((st & VIRTIO_STATUS_FEATURES_OK) && (s->driver_features & ~t->offered))
		return bad(why, why_len, "%s: driver features %#" PRIx64 " not offered here (%#" PRIx64 ")",
			   t->name, s->driver_features, t->offered);
	if ((st & VIRTIO_STATUS_FEATURES_OK) &&
	    !(s->driver_features & VIRTIO_FEATURE(VIRTIO_F_VERSION_1)))
		return bad(why, why_len, "%s: FEATURES_OK without VIRTIO_F_VERSION_1", t->name);
	if (s->isr & ~(VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG))
		return bad(why, why_len, "%s: interrupt status %#x has unknown bits", t->name, s->isr);
	return 0;
}

/* One queue's record into @vq, checked against this device and this VM's RAM. */
static int decode_queue(const struct virtio_mmio *t, const struct saved *s, unsigned q,
			struct gw_rbuf *r, struct virtq *vq, char *why, size_t why_len)
{
	uint16_t flags, last_avail, used, signalled;
	bool event_idx = s->driver_features & VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX);
	bool indirect = s->driver_features & VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC);

	virtq_reset(vq);
	vq->num = gw_get_le32(r);
	vq->desc_gpa = gw_get_le64(r);
	vq->avail_gpa = gw_get_le64(r);
	vq->used_gpa = gw_get_le64(r);
	last_avail = gw_get_le16(r);
	used = gw_get_le16(r);
	signalled = gw_get_le16(r);
	flags = gw_get_le16(r);
	if (r->underrun)
		return -EPROTO;
	if (flags & ~(Q_READY | Q_SIGNALLED))
		return bad(why, why_len, "%s: queue %u flags %#x unknown", t->name, q, flags);
	if (!(flags & Q_READY)) {
		/* Register values only: checked when the driver makes it ready. */
		vq->last_avail_idx = last_avail;
		vq->used_idx = used;
		vq->signalled_used = signalled;
		vq->signalled_valid = flags & Q_SIGNALLED;
		return 0;
	}
	if (!(s->status & VIRTIO_STATUS_FEATURES_OK))
		return bad(why, why_len, "%s: queue %u ready before FEATURES_OK", t->name, q);
	if (virtq_enable(vq, t->mem, t->ops->queue_num_max, event_idx, indirect))
		return bad(why, why_len, "%s: queue %u: %s (%#" PRIx64 ")", t->name, q, vq->err,
			   vq->err_value);
	if ((uint16_t)(last_avail - used) > vq->num)
		return bad(why, why_len, "%s: queue %u: %u buffers in flight, size %u", t->name, q,
			   (uint16_t)(last_avail - used), vq->num);
	vq->last_avail_idx = last_avail;
	vq->used_idx = used;
	vq->signalled_used = signalled;
	vq->signalled_valid = flags & Q_SIGNALLED;
	return 0;
}

static int decode_fixed(const struct virtio_mmio *t, struct gw_rbuf *r, struct saved *s,
			char *why, size_t why_len)
{
	uint32_t dev_id = gw_get_le32(r);
	uint16_t nr_queues, reserved;

	s->status = gw_get_le32(r);
	s->driver_features = gw_get_le64(r);
	s->dev_sel = gw_get_le32(r);
	s->drv_sel = gw_get_le32(r);
	s->queue_sel = gw_get_le32(r);
	s->isr = gw_get_le32(r);
	s->config_generation = gw_get_le32(r);
	nr_queues = gw_get_le16(r);
	reserved = gw_get_le16(r);
	if (r->underrun)
		return bad(why, why_len, "%s: section shorter than %u bytes", t->name, STATE_FIXED_BYTES);
	if (dev_id != t->ops->device_id)
		return bad(why, why_len, "%s: section of device id %u, this is %u", t->name, dev_id,
			   t->ops->device_id);
	if (nr_queues != t->ops->nr_queues || reserved)
		return bad(why, why_len, "%s: %u queues (reserved %u), this device has %u", t->name,
			   nr_queues, reserved, t->ops->nr_queues);
	return check_status(t, s, why, why_len);
}

static void apply(struct virtio_mmio *t, const struct saved *s)
{
	t->status = s->status;
	t->driver_features = s->driver_features;
	t->dev_features_sel = s->dev_sel;
	t->drv_features_sel = s->drv_sel;
	t->queue_sel = s->queue_sel;
	t->isr = s->isr;
	t->config_generation = s->config_generation;
	memcpy(t->vq, s->vq, sizeof(t->vq));
	/* A pending interrupt stays pending: drive the line as the source had it. */
	t->irq_level = s->isr != 0;
	t->irq->set_level(t->irq_opaque, t->gsi, t->irq_level);
}

int virtio_mmio_decode(struct virtio_mmio *t, const void *buf, size_t len, uint32_t version,
		       char *why, size_t why_len)
{
	struct saved *s;
	struct gw_rbuf r, dev;
	uint32_t dev_bytes;
	const void *dev_p;
	int ret;

	if (version != VIRTIO_MMIO_STATE_VERSION)
		return bad(why, why_len, "%s: section version %u, this VMM reads %u", t->name,
			   version, VIRTIO_MMIO_STATE_VERSION);
	s = calloc(1, sizeof(*s));
	if (!s) {
		bad(why, why_len, "%s: out of memory", t->name);
		return -ENOMEM;
	}
	gw_rbuf_init(&r, buf, len);
	ret = decode_fixed(t, &r, s, why, why_len);
	for (unsigned q = 0; !ret && q < t->ops->nr_queues; q++)
		ret = decode_queue(t, s, q, &r, &s->vq[q], why, why_len);
	if (ret == -EPROTO)
		ret = bad(why, why_len, "%s: section truncated in the queues", t->name);
	if (ret)
		goto out;
	dev_bytes = gw_get_le32(&r);
	dev_p = gw_get_bytes(&r, dev_bytes);
	if (!dev_p || dev_bytes > STATE_DEVICE_MAX_BYTES || gw_rbuf_done(&r)) {
		ret = bad(why, why_len, "%s: device part of %u bytes does not match the section (%zu)",
			  t->name, dev_bytes, len);
		goto out;
	}
	gw_rbuf_init(&dev, dev_p, dev_bytes);
	if (t->ops->load)
		ret = t->ops->load(t, &dev, why, why_len);
	else if (dev_bytes)
		ret = bad(why, why_len, "%s: %u device bytes, the device keeps none", t->name, dev_bytes);
	if (!ret)
		apply(t, s);
out:
	free(s);
	return ret;
}

int virtio_mmio_save_state(struct virtio_mmio *t, struct gw_state *st)
{
	size_t cap = STATE_FIXED_BYTES + STATE_QUEUE_BYTES * VIRTIO_MMIO_MAX_QUEUES + 4 +
		     STATE_DEVICE_MAX_BYTES;
	uint8_t *buf = malloc(cap);
	struct gw_wbuf w;
	int ret;

	if (!buf)
		return -ENOMEM;
	gw_wbuf_init(&w, buf, cap);
	pthread_mutex_lock(&t->lock);
	ret = virtio_mmio_encode(t, &w);
	pthread_mutex_unlock(&t->lock);
	if (!ret)
		ret = gw_state_add(st, t->name, VIRTIO_MMIO_STATE_VERSION, buf, w.len);
	free(buf);
	return ret;
}

int virtio_mmio_load_state(struct virtio_mmio *t, struct gw_state *st)
{
	char why[256];
	uint32_t version;
	size_t len;
	const void *p = gw_state_find(st, t->name, &version, &len);
	int ret;

	if (!p)
		return gw_state_reject(st, -EINVAL, "%s: no state section", t->name);
	pthread_mutex_lock(&t->lock);
	ret = virtio_mmio_decode(t, p, len, version, why, sizeof(why));
	pthread_mutex_unlock(&t->lock);
	return ret ? gw_state_reject(st, ret, "%s", why) : 0;
}
