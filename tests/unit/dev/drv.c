/* SPDX-License-Identifier: MIT */
/* The fake guest of drv.h. Aborts on set-up failures (they are the test's own bugs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <godwit/log.h>
#include "dev/mmio_bus.h"
#include "drv.h"

#define PAGE 4096u

unsigned drv_needs_reset_lines;

static void die(const char *what)
{
	fprintf(stderr, "drv: %s\n", what);
	abort();
}

static void sink(void *opaque, enum gw_log_level level, const char *line)
{
	(void)opaque, (void)level;
	if (strstr(line, "needs_reset"))
		drv_needs_reset_lines++;
	if (getenv("DRV_VERBOSE"))
		fprintf(stderr, "%s\n", line);
}

void drv_count_log(void)
{
	gw_log_set_sink(sink, NULL);
}

static void mark_dirty(void *opaque, uint64_t gpa, uint64_t len)
{
	struct drv *d = opaque;

	if (gpa < DRV_RAM_GPA || gpa - DRV_RAM_GPA > DRV_RAM_BYTES ||
	    len > DRV_RAM_BYTES - (gpa - DRV_RAM_GPA)) {
		d->dirty_outside++;
		return;
	}
	memset(d->dirty + (gpa - DRV_RAM_GPA), 1, len);
}

static void set_level(void *opaque, uint32_t gsi, bool level)
{
	struct drv *d = opaque;

	if (gsi != DRV_GSI)
		die("interrupt on a foreign line");
	d->irq_raises += level && !d->irq_level;
	d->irq_level = level;
}

static const struct virtio_irq_ops irq_ops = { .name = "test", .set_level = set_level };

void drv_init(struct drv *d, const struct virtio_dev_ops *ops)
{
	memset(d, 0, sizeof(*d));
	d->map = mmap(NULL, DRV_RAM_BYTES + 2 * PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (d->map == MAP_FAILED)
		die("mmap");
	d->ram = d->map + PAGE;
	if (mprotect(d->ram, DRV_RAM_BYTES, PROT_READ | PROT_WRITE))
		die("mprotect");
	d->dirty = calloc(1, DRV_RAM_BYTES);
	d->dev.reply_bytes = -1;
	if (!d->dirty || virtq_mem_add(&d->mem, DRV_RAM_GPA, d->ram, DRV_RAM_BYTES))
		die("ram");
	d->mem.mark_dirty = mark_dirty;
	d->mem.dirty_opaque = d;
	if (virtio_mmio_init(&d->t, ops, &d->dev, "virtio-test0", DRV_MMIO_GPA, DRV_GSI, &d->mem,
			     &irq_ops, d))
		die("virtio_mmio_init");
	if (vmm_mmio_register(&d->bus, DRV_MMIO_GPA, VIRTIO_MMIO_REGION_BYTES, virtio_mmio_access,
			      &d->t))
		die("vmm_mmio_register");
}

void drv_reset(struct drv *d, const struct virtio_dev_ops *ops)
{
	virtio_mmio_destroy(&d->t);
	memset(d->ram, 0, DRV_RAM_BYTES);
	memset(d->dirty, 0, DRV_RAM_BYTES);
	memset(&d->dev, 0, sizeof(d->dev));
	d->dev.reply_bytes = -1;
	d->dirty_outside = 0;
	d->irq_level = false;
	d->irq_raises = 0;
	d->num = 0;
	d->desc_gpa = d->avail_gpa = d->used_gpa = 0;
	d->avail_idx = d->used_seen = 0;
	if (virtio_mmio_init(&d->t, ops, &d->dev, "virtio-test0", DRV_MMIO_GPA, DRV_GSI, &d->mem,
			     &irq_ops, d))
		die("virtio_mmio_init");
}

void drv_fini(struct drv *d)
{
	virtio_mmio_destroy(&d->t);
	munmap(d->map, DRV_RAM_BYTES + 2 * PAGE);
	free(d->dirty);
}

uint32_t drv_rd(struct drv *d, uint64_t off)
{
	uint8_t b[4];

	if (!vmm_mmio_access(&d->bus, DRV_MMIO_GPA + off, b, 4, false))
		die("read not claimed");
	return gw_le32_get(b);
}

void drv_wr(struct drv *d, uint64_t off, uint32_t v)
{
	uint8_t b[4];

	gw_le32_put(b, v);
	if (!vmm_mmio_access(&d->bus, DRV_MMIO_GPA + off, b, 4, true))
		die("write not claimed");
}

uint32_t drv_negotiate(struct drv *d, uint64_t features)
{
	drv_wr(d, VIRTIO_MMIO_STATUS, 0);
	drv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	drv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	drv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	drv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	drv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	drv_wr(d, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	drv_wr(d, VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
	       VIRTIO_STATUS_FEATURES_OK);
	return drv_rd(d, VIRTIO_MMIO_STATUS);
}

void drv_queue(struct drv *d, unsigned q, uint32_t num, uint64_t desc, uint64_t avail,
	       uint64_t used)
{
	drv_wr(d, VIRTIO_MMIO_QUEUE_SEL, q);
	drv_wr(d, VIRTIO_MMIO_QUEUE_NUM, num);
	drv_wr(d, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	drv_wr(d, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	drv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_LOW, (uint32_t)avail);
	drv_wr(d, VIRTIO_MMIO_QUEUE_DRIVER_HIGH, (uint32_t)(avail >> 32));
	drv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_LOW, (uint32_t)used);
	drv_wr(d, VIRTIO_MMIO_QUEUE_DEVICE_HIGH, (uint32_t)(used >> 32));
	drv_wr(d, VIRTIO_MMIO_QUEUE_READY, 1);
	if (q == 0) {
		d->num = num;
		d->desc_gpa = desc;
		d->avail_gpa = avail;
		d->used_gpa = used;
		d->avail_idx = d->used_seen = 0;
	}
}

void drv_start(struct drv *d, uint64_t features, uint32_t num)
{
	drv_negotiate(d, features);
	drv_queue(d, 0, num, DRV_RAM_GPA, DRV_RAM_GPA + 0x1000, DRV_RAM_GPA + 0x2000);
	drv_wr(d, VIRTIO_MMIO_STATUS, drv_rd(d, VIRTIO_MMIO_STATUS) | VIRTIO_STATUS_DRIVER_OK);
}

void *drv_host(struct drv *d, uint64_t gpa)
{
	if (gpa < DRV_RAM_GPA || gpa - DRV_RAM_GPA >= DRV_RAM_BYTES)
		die("driver address outside RAM");
	return d->ram + (gpa - DRV_RAM_GPA);
}

void drv_desc(struct drv *d, uint64_t table_gpa, uint16_t i, uint64_t addr, uint32_t len,
	      uint16_t flags, uint16_t next)
{
	uint8_t *p = drv_host(d, table_gpa + 16ull * i);

	gw_le64_put(p, addr);
	gw_le32_put(p + 8, len);
	gw_le16_put(p + 12, flags);
	gw_le16_put(p + 14, next);
}

void drv_set_avail_idx(struct drv *d, uint16_t idx)
{
	uint16_t le;

	gw_le16_put((uint8_t *)&le, idx);
	__atomic_store_n((uint16_t *)drv_host(d, d->avail_gpa + 2), le, __ATOMIC_RELEASE);
	d->avail_idx = idx;
}

void drv_offer(struct drv *d, uint16_t head)
{
	gw_le16_put(drv_host(d, d->avail_gpa + 4 + 2ull * (d->avail_idx % d->num)), head);
	drv_set_avail_idx(d, (uint16_t)(d->avail_idx + 1));
}

void drv_kick(struct drv *d, unsigned q)
{
	drv_wr(d, VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

uint16_t drv_used_idx(struct drv *d)
{
	return gw_le16_get(drv_host(d, d->used_gpa + 2));
}

void drv_used_elem(struct drv *d, uint16_t slot, uint32_t *id, uint32_t *len)
{
	const uint8_t *p = drv_host(d, d->used_gpa + 4 + 8ull * (slot % d->num));

	*id = gw_le32_get(p);
	*len = gw_le32_get(p + 4);
}

bool drv_needs_reset(struct drv *d)
{
	return drv_rd(d, VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_NEEDS_RESET;
}

bool drv_dirty(struct drv *d, uint64_t gpa, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (!d->dirty[gpa - DRV_RAM_GPA + i])
			return false;
	return true;
}

void drv_dirty_clear(struct drv *d)
{
	memset(d->dirty, 0, DRV_RAM_BYTES);
}
