/* SPDX-License-Identifier: MIT */
/*
 * A fake guest for the virtio unit tests and the virtqueue fuzz harness:
 * guest RAM between two PROT_NONE guard pages (a device access outside it
 * faults), a driver that writes the split ring itself as a guest would, a
 * record of every byte the device reports dirty, and the interrupt line.
 * The test device (test_dev.c) answers every chain: it reads the readable
 * part and writes reply_bytes (default: as many as it read, at most what
 * the chain can take) of a pattern into the writable part.
 */
#ifndef GW_TEST_VIRTIO_DRV_H
#define GW_TEST_VIRTIO_DRV_H

#include <stdbool.h>
#include <stdint.h>
#include "dev/mmio_bus.h"
#include "dev/virtio_mmio.h"

#define DRV_RAM_GPA	0x100000ull	/* 1 MiB */
#define DRV_RAM_BYTES	(64u << 10)
#define DRV_MMIO_GPA	0xd0000000ull
#define DRV_GSI		16u
#define TEST_DEV_ID	0x2au
#define TEST_DEV_CONFIG_BYTES 16u

struct test_dev {
	uint8_t config[TEST_DEV_CONFIG_BYTES];
	int64_t reply_bytes;		/* < 0: echo what was read */
	bool reply_all;			/* write the whole writable part */
	unsigned chains;		/* chains answered since reset */
	unsigned resets;
	unsigned drains;		/* queue notifications that reached the device */
	uint64_t out_sum;		/* sum of every readable byte seen */
	struct virtq_elem elem;
};

/* Answer every available chain of queue @q (the transport's lock held). */
void test_dev_drain(struct virtio_mmio *t, unsigned q);
extern const struct virtio_dev_ops test_dev_ops;	/* 2 queues, INDIRECT + EVENT_IDX */
extern const struct virtio_dev_ops test_dev_plain_ops;	/* 1 queue, no ring features */

struct drv {
	uint8_t *map;			/* guard page, RAM, guard page */
	uint8_t *ram;			/* DRV_RAM_BYTES at DRV_RAM_GPA */
	uint8_t *dirty;			/* one byte per RAM byte: reported by the device */
	uint64_t dirty_outside;		/* reports outside RAM (must stay 0) */
	struct virtq_mem mem;
	struct test_dev dev;
	struct virtio_mmio t;
	struct vmm_mmio_bus bus;
	bool irq_level;
	unsigned irq_raises;
	/* the driver's view of queue 0 */
	uint32_t num;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint16_t avail_idx, used_seen;
};

void drv_init(struct drv *d, const struct virtio_dev_ops *ops);
/* As new (RAM zeroed, device and transport made again), without a new mapping. */
void drv_reset(struct drv *d, const struct virtio_dev_ops *ops);
void drv_fini(struct drv *d);
uint32_t drv_rd(struct drv *d, uint64_t off);
void drv_wr(struct drv *d, uint64_t off, uint32_t v);
/* ACKNOWLEDGE, DRIVER, features, FEATURES_OK: the status read back. */
uint32_t drv_negotiate(struct drv *d, uint64_t features);
/* Queue @q: size and ring addresses (any values), then QueueReady = 1. */
void drv_queue(struct drv *d, unsigned q, uint32_t num, uint64_t desc, uint64_t avail,
	       uint64_t used);
/* negotiate + queue 0 at the default layout (num 8 at RAM start) + DRIVER_OK. */
void drv_start(struct drv *d, uint64_t features, uint32_t num);
void *drv_host(struct drv *d, uint64_t gpa);
void drv_desc(struct drv *d, uint64_t table_gpa, uint16_t i, uint64_t addr, uint32_t len,
	      uint16_t flags, uint16_t next);
/* Offer head @head in queue 0's available ring (idx advanced by one, released). */
void drv_offer(struct drv *d, uint16_t head);
void drv_set_avail_idx(struct drv *d, uint16_t idx);
void drv_kick(struct drv *d, unsigned q);
uint16_t drv_used_idx(struct drv *d);
void drv_used_elem(struct drv *d, uint16_t slot, uint32_t *id, uint32_t *len);
bool drv_needs_reset(struct drv *d);
/* Bytes in [gpa, gpa + len) all reported dirty. */
bool drv_dirty(struct drv *d, uint64_t gpa, uint64_t len);
void drv_dirty_clear(struct drv *d);
/* needs_reset log lines seen (the tests install a counting sink). */
extern unsigned drv_needs_reset_lines;
void drv_count_log(void);

#endif
