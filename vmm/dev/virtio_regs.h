/* SPDX-License-Identifier: MIT */
/*
 * Wire constants of virtio 1.x (OASIS virtio 1.2, sections 2, 4.2 and 6):
 * the virtio-mmio version 2 register offsets, the device status bits, the
 * feature bits the transport knows, and the split virtqueue's layout in
 * guest memory. Fixed numbers from the specification, never internal enums.
 * Header-only: the unit tests and the fuzz seed generator use it too.
 */
#ifndef GW_VMM_VIRTIO_REGS_H
#define GW_VMM_VIRTIO_REGS_H

#include <stdint.h>

/* virtio-mmio register block (spec 4.2.2); every register is 32 bits wide. */
#define VIRTIO_MMIO_MAGIC_VALUE		0x000	/* R: 0x74726976 ("virt") */
#define VIRTIO_MMIO_VERSION		0x004	/* R: 2 */
#define VIRTIO_MMIO_DEVICE_ID		0x008	/* R */
#define VIRTIO_MMIO_VENDOR_ID		0x00c	/* R */
#define VIRTIO_MMIO_DEVICE_FEATURES	0x010	/* R: 32 bits of the page DEVICE_FEATURES_SEL selects */
#define VIRTIO_MMIO_DEVICE_FEATURES_SEL	0x014	/* W */
#define VIRTIO_MMIO_DRIVER_FEATURES	0x020	/* W */
#define VIRTIO_MMIO_DRIVER_FEATURES_SEL	0x024	/* W */
#define VIRTIO_MMIO_QUEUE_SEL		0x030	/* W */
#define VIRTIO_MMIO_QUEUE_NUM_MAX	0x034	/* R: 0 = no such queue */
#define VIRTIO_MMIO_QUEUE_NUM		0x038	/* W */
#define VIRTIO_MMIO_QUEUE_READY		0x044	/* RW */
#define VIRTIO_MMIO_QUEUE_NOTIFY	0x050	/* W: queue index */
#define VIRTIO_MMIO_INTERRUPT_STATUS	0x060	/* R */
#define VIRTIO_MMIO_INTERRUPT_ACK	0x064	/* W */
#define VIRTIO_MMIO_STATUS		0x070	/* RW */
#define VIRTIO_MMIO_QUEUE_DESC_LOW	0x080	/* W */
#define VIRTIO_MMIO_QUEUE_DESC_HIGH	0x084
#define VIRTIO_MMIO_QUEUE_DRIVER_LOW	0x090	/* W: the available ring */
#define VIRTIO_MMIO_QUEUE_DRIVER_HIGH	0x094
#define VIRTIO_MMIO_QUEUE_DEVICE_LOW	0x0a0	/* W: the used ring */
#define VIRTIO_MMIO_QUEUE_DEVICE_HIGH	0x0a4
#define VIRTIO_MMIO_SHM_SEL		0x0ac	/* W: shared memory regions (none here) */
#define VIRTIO_MMIO_SHM_LEN_LOW		0x0b0	/* R: ~0 = no such region */
#define VIRTIO_MMIO_SHM_LEN_HIGH	0x0b4
#define VIRTIO_MMIO_CONFIG_GENERATION	0x0fc	/* R */
#define VIRTIO_MMIO_CONFIG		0x100	/* device-specific configuration space */

#define VIRTIO_MMIO_MAGIC		0x74726976u
#define VIRTIO_MMIO_VERSION_2		2u
#define VIRTIO_MMIO_VENDOR_GODWIT	0x57444f47u	/* "GODW", little-endian */
#define VIRTIO_MMIO_REGION_BYTES	0x1000u	/* one page per device */

/* InterruptStatus bits (4.2.2). */
#define VIRTIO_MMIO_INT_VRING		0x1u	/* a used buffer notification */
#define VIRTIO_MMIO_INT_CONFIG		0x2u	/* a configuration change notification */

/* Device status field (2.1). */
#define VIRTIO_STATUS_ACKNOWLEDGE	0x01u
#define VIRTIO_STATUS_DRIVER		0x02u
#define VIRTIO_STATUS_DRIVER_OK		0x04u
#define VIRTIO_STATUS_FEATURES_OK	0x08u
#define VIRTIO_STATUS_NEEDS_RESET	0x40u	/* set by the device only */
#define VIRTIO_STATUS_FAILED		0x80u
#define VIRTIO_STATUS_DRIVER_BITS	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER | \
					 VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_FEATURES_OK | \
					 VIRTIO_STATUS_FAILED)

/* Feature bits the transport and the queues implement (6). */
#define VIRTIO_RING_F_INDIRECT_DESC	28
#define VIRTIO_RING_F_EVENT_IDX		29
#define VIRTIO_F_VERSION_1		32
#define VIRTIO_FEATURE(bit)		(1ull << (bit))
/* What the transport itself may offer beside a device's own bits. */
#define VIRTIO_TRANSPORT_FEATURES	(VIRTIO_FEATURE(VIRTIO_RING_F_INDIRECT_DESC) | \
					 VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX) | \
					 VIRTIO_FEATURE(VIRTIO_F_VERSION_1))

/*
 * Split virtqueue in guest memory (2.7), all fields little-endian:
 *   descriptor table  16 * num bytes, 16-byte aligned:
 *                     le64 addr, le32 len, le16 flags, le16 next
 *   available ring    le16 flags, le16 idx, le16 ring[num], le16 used_event
 *                     (used_event only with EVENT_IDX), 2-byte aligned
 *   used ring         le16 flags, le16 idx, {le32 id, le32 len} ring[num],
 *                     le16 avail_event (only with EVENT_IDX), 4-byte aligned
 */
#define VIRTQ_DESC_F_NEXT		0x1u
#define VIRTQ_DESC_F_WRITE		0x2u	/* device-writable */
#define VIRTQ_DESC_F_INDIRECT		0x4u
#define VIRTQ_AVAIL_F_NO_INTERRUPT	0x1u	/* driver: don't interrupt me */
#define VIRTQ_USED_F_NO_NOTIFY		0x1u	/* device: don't notify me */

#define VIRTQ_DESC_BYTES		16u
#define VIRTQ_DESC_ALIGN		16u
#define VIRTQ_AVAIL_ALIGN		2u
#define VIRTQ_USED_ALIGN		4u
#define VIRTQ_USED_ELEM_BYTES		8u

static inline uint64_t virtq_desc_bytes(uint32_t num)
{
	return (uint64_t)VIRTQ_DESC_BYTES * num;
}

static inline uint64_t virtq_avail_bytes(uint32_t num, int event_idx)
{
	return 4 + 2ull * num + (event_idx ? 2 : 0);
}

static inline uint64_t virtq_used_bytes(uint32_t num, int event_idx)
{
	return 4 + (uint64_t)VIRTQ_USED_ELEM_BYTES * num + (event_idx ? 2 : 0);
}

/* Spec 2.7.10: notify when the new index passes @event since @old. */
static inline int virtq_need_event(uint16_t event, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event - 1) < (uint16_t)(new_idx - old);
}

#endif
