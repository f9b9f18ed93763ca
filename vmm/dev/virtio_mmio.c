/* SPDX-License-Identifier: MIT */
/*
 * The virtio-mmio v2 register block and the device status state machine
 * (virtio_mmio.h). Registers below 0x100 are 32 bits wide and aligned
 * (4.2.2.2: other accesses are logged and dropped, reads return 0); the
 * configuration space above takes 1, 2, 4 and 8-byte accesses.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <godwit/log.h>
#include "dev/virtio_mmio.h"

int virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev,
		     const char *name, uint64_t base_gpa, uint32_t gsi, const struct virtq_mem *mem,
		     const struct virtio_irq_ops *irq, void *irq_opaque)
{
	int ret;

	if (!ops || !mem || !irq || !irq->set_level || !ops->nr_queues ||
	    ops->nr_queues > VIRTIO_MMIO_MAX_QUEUES || !ops->queue_num_max ||
	    ops->queue_num_max > VIRTQ_NUM_MAX || (ops->queue_num_max & (ops->queue_num_max - 1)) ||
	    ops->config_bytes > VIRTIO_MMIO_REGION_BYTES - VIRTIO_MMIO_CONFIG)
		return -EINVAL;
	memset(t, 0, sizeof(*t));
	ret = -pthread_mutex_init(&t->lock, NULL);
	if (ret)
		return ret;
	t->ops = ops;
	t->dev = dev;
	snprintf(t->name, sizeof(t->name), "%s", name ? name : ops->name);
	t->base_gpa = base_gpa;
	t->gsi = gsi;
	t->mem = mem;
	t->irq = irq;
	t->irq_opaque = irq_opaque;
	t->offered = (ops->features & ~VIRTIO_FEATURE(VIRTIO_F_VERSION_1)) |
		     VIRTIO_FEATURE(VIRTIO_F_VERSION_1);
	return 0;
}

void virtio_mmio_destroy(struct virtio_mmio *t)
{
	if (t && t->ops)
		pthread_mutex_destroy(&t->lock);
}

void virtio_mmio_lock(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->lock);
}

void virtio_mmio_unlock(struct virtio_mmio *t)
{
	pthread_mutex_unlock(&t->lock);
}

/* ---- interrupts and errors ---- */

static void update_irq(struct virtio_mmio *t)
{
	bool level = t->isr != 0;

	if (level != t->irq_level) {
		t->irq_level = level;
		t->irq->set_level(t->irq_opaque, t->gsi, level);
	}
}

bool virtio_mmio_running(const struct virtio_mmio *t)
{
	return (t->status & VIRTIO_STATUS_DRIVER_OK) && !(t->status & VIRTIO_STATUS_NEEDS_RESET);
}

struct virtq *virtio_mmio_queue(struct virtio_mmio *t, unsigned q)
{
	if (q >= t->ops->nr_queues || !virtio_mmio_running(t) || !t->vq[q].ready)
		return NULL;
	return &t->vq[q];
}

void virtio_mmio_needs_reset(struct virtio_mmio *t, int q, const char *what, uint64_t value)
{
	if (t->status & VIRTIO_STATUS_NEEDS_RESET)
		return;		/* logged once, until the driver resets */
	t->status |= VIRTIO_STATUS_NEEDS_RESET;
	gw_log(GW_LOG_ERROR, "virtio", "needs_reset", "dev=%s queue=%d why=\"%s\" value=%#" PRIx64,
	       t->name, q, what, value);
	/* 2.1.2: a device that sets NEEDS_RESET after DRIVER_OK sends a configuration change. */
	if (t->status & VIRTIO_STATUS_DRIVER_OK) {
		t->isr |= VIRTIO_MMIO_INT_CONFIG;
		update_irq(t);
	}
}

int virtio_mmio_check(struct virtio_mmio *t, unsigned q, int ret)
{
	if (ret == -EPROTO && q < VIRTIO_MMIO_MAX_QUEUES)
		virtio_mmio_needs_reset(t, (int)q, t->vq[q].err ? t->vq[q].err : "queue error",
					t->vq[q].err_value);
	return ret;
}

void virtio_mmio_used(struct virtio_mmio *t, unsigned q)
{
	if (q < t->ops->nr_queues && virtq_should_interrupt(&t->vq[q])) {
		t->isr |= VIRTIO_MMIO_INT_VRING;
		update_irq(t);
	}
}

void virtio_mmio_config_changed(struct virtio_mmio *t)
{
	t->config_generation++;
	if (t->status & VIRTIO_STATUS_DRIVER_OK) {
		t->isr |= VIRTIO_MMIO_INT_CONFIG;
		update_irq(t);
	}
}

static void warn(struct virtio_mmio *t, const char *event, uint64_t off, uint64_t value)
{
	if (t->warned++ < VIRTIO_MMIO_WARN_MAX)
		gw_log(GW_LOG_WARN, "virtio", event, "dev=%s off=%#" PRIx64 " value=%#" PRIx64,
		       t->name, off, value);
}

/* ---- status ---- */

static void device_reset(struct virtio_mmio *t)
{
	if (t->ops->reset)
		t->ops->reset(t);
	for (unsigned q = 0; q < VIRTIO_MMIO_MAX_QUEUES; q++)
		virtq_reset(&t->vq[q]);
	t->driver_features = 0;
	t->dev_features_sel = t->drv_features_sel = t->queue_sel = 0;
	t->status = 0;
	t->isr = 0;
	update_irq(t);
}

/* 2.2.2: only offered bits, and VERSION_1 (this transport has no legacy interface). */
static bool features_ok(const struct virtio_mmio *t)
{
	return !(t->driver_features & ~t->offered) &&
	       (t->driver_features & VIRTIO_FEATURE(VIRTIO_F_VERSION_1));
}

static void write_status(struct virtio_mmio *t, uint32_t v)
{
	uint32_t old = t->status & VIRTIO_STATUS_DRIVER_BITS, now = v & VIRTIO_STATUS_DRIVER_BITS;
	uint32_t added = now & ~old;

	if (v == 0) {
		device_reset(t);
		return;
	}
	if ((old & ~now) || (v & ~VIRTIO_STATUS_DRIVER_BITS & ~VIRTIO_STATUS_NEEDS_RESET)) {
		warn(t, "status_refused", VIRTIO_MMIO_STATUS, v);	/* clears a bit, or unknown bits */
		return;
	}
	if ((added & VIRTIO_STATUS_FEATURES_OK) &&
	    (!(now & VIRTIO_STATUS_DRIVER) || !features_ok(t))) {
		/* Left clear: the driver reads Status back and gives up (3.1.1 step 6). */
		gw_log(GW_LOG_WARN, "virtio", "features_refused", "dev=%s offered=%#" PRIx64
		       " driver=%#" PRIx64, t->name, t->offered, t->driver_features);
		now &= ~VIRTIO_STATUS_FEATURES_OK;
	}
	if ((added & VIRTIO_STATUS_DRIVER_OK) && !(now & VIRTIO_STATUS_FEATURES_OK)) {
		warn(t, "driver_ok_refused", VIRTIO_MMIO_STATUS, v);
		now &= ~VIRTIO_STATUS_DRIVER_OK;
	}
	t->status = now | (t->status & VIRTIO_STATUS_NEEDS_RESET);
	if ((added & now & VIRTIO_STATUS_DRIVER_OK) && (t->status & VIRTIO_STATUS_NEEDS_RESET)) {
		t->isr |= VIRTIO_MMIO_INT_CONFIG;	/* broken before DRIVER_OK: say so now */
		update_irq(t);
	}
}

/* ---- queues ---- */

static void queue_ready(struct virtio_mmio *t, struct virtq *vq, uint32_t v)
{
	bool event_idx = t->driver_features & VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX);
	bool indirect = t->driver_features & VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC);

	if (!v) {
		vq->ready = false;	/* configuration kept; the driver may enable it again */
		return;
	}
	if (vq->ready)
		return;
	if (!(t->status & VIRTIO_STATUS_FEATURES_OK)) {
		warn(t, "queue_ready_before_features", VIRTIO_MMIO_QUEUE_READY, t->queue_sel);
		return;
	}
	vq->last_avail_idx = vq->used_idx = 0;
	vq->err = NULL;
	if (virtq_enable(vq, t->mem, t->ops->queue_num_max, event_idx, indirect))
		virtio_mmio_needs_reset(t, (int)t->queue_sel, vq->err, vq->err_value);
}

/* QueueNum and the ring addresses: stored while the queue is not ready, checked at ready. */
static void queue_write(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	struct virtq *vq = t->queue_sel < t->ops->nr_queues ? &t->vq[t->queue_sel] : NULL;
	uint64_t *addr = NULL;

	if (!vq || vq->ready) {
		warn(t, "queue_write_ignored", off, v);
		return;
	}
	switch (off) {
	case VIRTIO_MMIO_QUEUE_NUM:
		vq->num = v;
		return;
	case VIRTIO_MMIO_QUEUE_DESC_LOW: case VIRTIO_MMIO_QUEUE_DESC_HIGH:
		addr = &vq->desc_gpa;
		break;
	case VIRTIO_MMIO_QUEUE_DRIVER_LOW: case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
		addr = &vq->avail_gpa;
		break;
	default:
		addr = &vq->used_gpa;
		break;
	}
	if (off & 4)
		*addr = (*addr & 0xffffffffull) | (uint64_t)v << 32;
	else
		*addr = (*addr & ~0xffffffffull) | v;
}

static void notify(struct virtio_mmio *t, uint32_t q)
{
	if (q >= t->ops->nr_queues) {
		warn(t, "notify_bad_queue", VIRTIO_MMIO_QUEUE_NOTIFY, q);
		return;
	}
	if (virtio_mmio_running(t) && t->vq[q].ready && t->ops->queue_notify)
		t->ops->queue_notify(t, q);
}

/* ---- registers ---- */

static uint32_t reg_read(struct virtio_mmio *t, uint64_t off)
{
	const struct virtq *vq = t->queue_sel < t->ops->nr_queues ? &t->vq[t->queue_sel] : NULL;

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE:		return VIRTIO_MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION:		return VIRTIO_MMIO_VERSION_2;
	case VIRTIO_MMIO_DEVICE_ID:		return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID:		return VIRTIO_MMIO_VENDOR_GODWIT;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return t->dev_features_sel < 2 ? (uint32_t)(t->offered >> (32 * t->dev_features_sel)) : 0;
	case VIRTIO_MMIO_QUEUE_NUM_MAX:		return vq ? t->ops->queue_num_max : 0;
	case VIRTIO_MMIO_QUEUE_READY:		return vq && vq->ready;
	case VIRTIO_MMIO_INTERRUPT_STATUS:	return t->isr;
	case VIRTIO_MMIO_STATUS:		return t->status;
	case VIRTIO_MMIO_SHM_LEN_LOW:
	case VIRTIO_MMIO_SHM_LEN_HIGH:		return 0xffffffffu;	/* no such region */
	case VIRTIO_MMIO_CONFIG_GENERATION:	return t->config_generation;
	default:
		warn(t, "read_unknown_register", off, 0);
		return 0;
	}
}

static void reg_write(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:	t->dev_features_sel = v; return;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:	t->drv_features_sel = v; return;
	case VIRTIO_MMIO_QUEUE_SEL:		t->queue_sel = v; return;
	case VIRTIO_MMIO_SHM_SEL:		return;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if ((t->status & VIRTIO_STATUS_FEATURES_OK) || t->drv_features_sel > 1) {
			warn(t, "features_write_ignored", off, v);
			return;
		}
		if (t->drv_features_sel)
			t->driver_features = (t->driver_features & 0xffffffffull) | (uint64_t)v << 32;
		else
			t->driver_features = (t->driver_features & ~0xffffffffull) | v;
		return;
	case VIRTIO_MMIO_QUEUE_NUM:
	case VIRTIO_MMIO_QUEUE_DESC_LOW: case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_DRIVER_LOW: case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
	case VIRTIO_MMIO_QUEUE_DEVICE_LOW: case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
		queue_write(t, off, v);
		return;
	case VIRTIO_MMIO_QUEUE_READY:
		if (t->queue_sel < t->ops->nr_queues)
			queue_ready(t, &t->vq[t->queue_sel], v);
		return;
	case VIRTIO_MMIO_QUEUE_NOTIFY:		notify(t, v); return;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		t->isr &= ~v;
		update_irq(t);
		return;
	case VIRTIO_MMIO_STATUS:		write_status(t, v); return;
	default:
		warn(t, "write_unknown_register", off, v);
	}
}

static void config_access(struct virtio_mmio *t, uint64_t off, void *data, uint32_t len,
			  bool is_write)
{
	uint64_t at = off - VIRTIO_MMIO_CONFIG;

	if ((len != 1 && len != 2 && len != 4 && len != 8) || at >= t->ops->config_bytes ||
	    len > t->ops->config_bytes - at) {
		warn(t, is_write ? "config_write_outside" : "config_read_outside", off, len);
		if (!is_write)
			memset(data, 0, len);
		return;
	}
	if (is_write) {
		if (t->ops->config_write)
			t->ops->config_write(t, (uint32_t)at, data, len);
	} else if (t->ops->config_read) {
		t->ops->config_read(t, (uint32_t)at, data, len);
	} else {
		memset(data, 0, len);
	}
}

void virtio_mmio_access(void *opaque, uint64_t off, void *data, uint32_t len, bool is_write)
{
	struct virtio_mmio *t = opaque;

	pthread_mutex_lock(&t->lock);
	if (off >= VIRTIO_MMIO_CONFIG) {
		config_access(t, off, data, len, is_write);
	} else if (len != 4 || (off & 3)) {
		warn(t, "register_access_not_32bit", off, len);
		if (!is_write)
			memset(data, 0, len);
	} else if (is_write) {
		reg_write(t, off, gw_le32_get(data));
	} else {
		gw_le32_put(data, reg_read(t, off));
	}
	pthread_mutex_unlock(&t->lock);
}
