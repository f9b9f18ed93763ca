/* SPDX-License-Identifier: MIT */
/*
 * The virtio-mmio transport, version 2 (virtio 1.2, 4.2), shared by every
 * device and both VMMs: the register block, the device status state
 * machine and feature negotiation (VIRTIO_F_VERSION_1 required), the
 * split virtqueues behind it (virtq.h), the interrupt status and line.
 *
 * A device type is a const struct virtio_dev_ops; the VMM supplies guest
 * RAM (struct virtq_mem, with the dirty hook), an MMIO region (mmio_bus.h)
 * and how to drive an interrupt line (struct virtio_irq_ops: KVM_IRQ_LINE
 * on the in-kernel irqchip, a plain callback on the soft VM).
 *
 * Anything wrong the guest does with the rings or the queue configuration
 * puts the device in NEEDS_RESET (status bit 0x40, one log line, and a
 * configuration change interrupt once DRIVER_OK is set); the device then
 * touches no queue until the driver writes 0 to Status.
 *
 * Threads: register accesses come from any vCPU thread, queue work from
 * the vCPU that notifies or from a device's own I/O thread. `lock` guards
 * every field below it and every queue; the register entry point takes it,
 * and every device hook (config, notify, reset, save, load) is called with
 * it held. A device's I/O thread takes it with virtio_mmio_lock around its
 * batches of pops and pushes.
 */
#ifndef GW_VMM_VIRTIO_MMIO_H
#define GW_VMM_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <godwit/buf.h>
#include "dev/virtio_regs.h"
#include "dev/virtq.h"

#define VIRTIO_MMIO_MAX_QUEUES 8
#define VIRTIO_MMIO_NAME_MAX 32
#define VIRTIO_MMIO_WARN_MAX 8		/* odd register accesses logged per device */

struct virtio_mmio;
struct gw_state;

/* How a VMM raises the device's interrupt line. */
struct virtio_irq_ops {
	const char *name;		/* "kvm-irq-line", "soft-callback", ... */
	/* Drive line @gsi to @level (level-triggered). Called under the transport lock. */
	void (*set_level)(void *opaque, uint32_t gsi, bool level);
};

/* One device type. Every hook is called under the transport's lock. */
struct virtio_dev_ops {
	const char *name;		/* "net", "balloon", "test" */
	uint32_t device_id;		/* virtio device ID (5.x): 1 net, 5 balloon */
	/*
	 * Features offered, device bits and the transport bits it wants
	 * (VIRTIO_RING_F_INDIRECT_DESC, VIRTIO_RING_F_EVENT_IDX);
	 * VIRTIO_F_VERSION_1 is always added.
	 */
	uint64_t features;
	uint16_t nr_queues;		/* 1..VIRTIO_MMIO_MAX_QUEUES */
	uint16_t queue_num_max;		/* a power of 2, <= VIRTQ_NUM_MAX */
	uint32_t config_bytes;		/* device configuration space */
	/* @off + @len <= config_bytes, checked by the transport; NULL: reads 0, writes ignored. */
	void (*config_read)(struct virtio_mmio *t, uint32_t off, void *data, uint32_t len);
	void (*config_write)(struct virtio_mmio *t, uint32_t off, const void *data, uint32_t len);
	/* The driver notified queue @q (ready, device running). */
	void (*queue_notify)(struct virtio_mmio *t, unsigned q);
	/* Status 0 written: forget in-flight work; the transport resets the queues after. */
	void (*reset)(struct virtio_mmio *t);
	/* The device's own part of the state section; NULL: none. 0 or -errno. */
	int (*save)(struct virtio_mmio *t, struct gw_wbuf *w);
	/* Check everything, then apply; on refusal write why and return -EINVAL. */
	int (*load)(struct virtio_mmio *t, struct gw_rbuf *r, char *why, size_t why_len);
};

struct virtio_mmio {
	/* creation, then read-only */
	const struct virtio_dev_ops *ops;
	void *dev;			/* the device's own state */
	char name[VIRTIO_MMIO_NAME_MAX];	/* log and state section name: "virtio-net0" */
	uint64_t base_gpa;		/* its register page */
	uint32_t gsi;			/* its interrupt line */
	const struct virtq_mem *mem;
	const struct virtio_irq_ops *irq;
	void *irq_opaque;
	uint64_t offered;		/* features offered (ops->features | VERSION_1) */

	pthread_mutex_t lock;
	/* lock: */
	uint64_t driver_features;	/* what the driver wrote (checked at FEATURES_OK) */
	uint32_t dev_features_sel, drv_features_sel, queue_sel;
	uint32_t status;		/* VIRTIO_STATUS_* */
	uint32_t isr;			/* VIRTIO_MMIO_INT_* pending */
	uint32_t config_generation;
	bool irq_level;			/* the level last driven */
	struct virtq vq[VIRTIO_MMIO_MAX_QUEUES];
	unsigned warned;		/* odd accesses logged so far */
};

/*
 * Set up @t (caller-owned memory). @name is copied. 0, or -EINVAL (a
 * device table out of bounds) / -errno from pthread_mutex_init.
 */
int virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev,
		     const char *name, uint64_t base_gpa, uint32_t gsi, const struct virtq_mem *mem,
		     const struct virtio_irq_ops *irq, void *irq_opaque);
void virtio_mmio_destroy(struct virtio_mmio *t);

/*
 * The register entry point: an access of @len bytes at offset @off of the
 * device's page, from any vCPU thread. Takes the lock. Shaped as a
 * vmm_mmio_fn (mmio_bus.h), @opaque being the transport.
 */
void virtio_mmio_access(void *opaque, uint64_t off, void *data, uint32_t len, bool is_write);

/* ---- for devices (lock held: in a hook, or between lock and unlock) ---- */
void virtio_mmio_lock(struct virtio_mmio *t);
void virtio_mmio_unlock(struct virtio_mmio *t);
/* DRIVER_OK and not NEEDS_RESET: the device may use its queues. */
bool virtio_mmio_running(const struct virtio_mmio *t);
/* Queue @q if it exists and is ready on a running device, else NULL. */
struct virtq *virtio_mmio_queue(struct virtio_mmio *t, unsigned q);
/*
 * After a virtq call on queue @q: -EPROTO (the guest broke the ring) puts
 * the device in NEEDS_RESET with the queue's reason; returns @ret.
 */
int virtio_mmio_check(struct virtio_mmio *t, unsigned q, int ret);
/* The device found something wrong: NEEDS_RESET, logged once. */
void virtio_mmio_needs_reset(struct virtio_mmio *t, int q, const char *what, uint64_t value);
/* After pushes on queue @q: interrupt the driver if it asked for it. */
void virtio_mmio_used(struct virtio_mmio *t, unsigned q);
/* The device changed its configuration space. */
void virtio_mmio_config_changed(struct virtio_mmio *t);

/* ---- state (virtio_state.c) ---- */
#define VIRTIO_MMIO_STATE_VERSION 1u
/*
 * Encode the transport, its queues and the device's part (ops->save).
 * Caller holds the lock, vCPUs paused, the device quiet. 0 or -errno.
 */
int virtio_mmio_encode(struct virtio_mmio *t, struct gw_wbuf *w);
/*
 * Check every field of a section of @version against this device and this
 * VM's RAM, then apply it; nothing is applied on refusal. Caller holds the
 * lock. 0, or -EINVAL (-EPROTO: malformed) with @why.
 */
int virtio_mmio_decode(struct virtio_mmio *t, const void *buf, size_t len, uint32_t version,
		       char *why, size_t why_len);
/* The section named t->name, through gw_state (take the lock themselves). 0 or -errno. */
int virtio_mmio_save_state(struct virtio_mmio *t, struct gw_state *st);
int virtio_mmio_load_state(struct virtio_mmio *t, struct gw_state *st);

#endif
