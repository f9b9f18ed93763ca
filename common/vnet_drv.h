/* SPDX-License-Identifier: MIT */
/*
 * The guest's virtio-net driver: virtio-mmio version 2, split virtqueues,
 * one receive and one transmit queue, VIRTIO_F_VERSION_1 and
 * VIRTIO_NET_F_MAC negotiated, nothing else (no event index, no indirect
 * descriptors, no offloads). One source for the tiny KVM guests (guests/,
 * identity-mapped, volatile MMIO) and the soft VM's vCPU threads (vmm/soft/,
 * calls into the VM's MMIO bus); freestanding like content.h: stdint only,
 * no libc, no string instructions, no floating point.
 *
 * What a caller gives (struct vnet_io, the thin layer between the two):
 *   rd32/wr32  a 32-bit access at byte `off` of the device's register page;
 *   area       VNET_DRV_AREA_BYTES of guest RAM for this NIC, 4 KiB aligned,
 *              by guest-physical address (what the device is told) and by
 *              pointer (what the driver writes through; KVM: the same
 *              number, soft VM: RAM base + offset).
 * Barriers are the driver's own: acquire loads of the used index, release
 * stores of the available index, and one full barrier (a locked RMW, which
 * ThreadSanitizer also understands) between publishing a buffer and reading
 * the device's "don't notify me" flag. Waiting for an interrupt stays with
 * the caller (KVM: sti; hlt with a handler; soft: the irq_lines wait).
 *
 * Everything the driver knows lives in the area, in guest RAM: the driver's
 * own state (struct vnet_drv_state, first page), the rings and the buffers.
 * So it migrates with the RAM, and a migrated guest carries on where it was
 * with vnet_drv_attach: no reset, no renegotiation (the device's queue state
 * travels in its own state section). struct vnet_drv is only the binding of
 * that area to this host (pointers, register access) and is rebuilt freely.
 *
 * Area layout (offsets from the area's start):
 *   0x00000  struct vnet_drv_state
 *   0x01000  receive queue: descriptors, available ring at +0x400, used at +0x800
 *   0x02000  transmit queue, same layout
 *   0x03000  receive buffers, VNET_DRV_QUEUE_NUM x VNET_DRV_BUF_BYTES
 *   0x43000  transmit buffers, same
 *   0x83000  end (VNET_DRV_AREA_BYTES)
 * Buffer i of a queue is descriptor i, always (one descriptor per frame:
 * the 12-byte virtio_net_hdr_v1, then the Ethernet frame).
 *
 * The device is hostile: every used entry is checked (id below the queue
 * size, length between the header and the buffer, the used index never
 * ahead of what was offered). A device that breaks the contract stops the
 * driver for good: the error is sticky in the state (err) and every call
 * returns it. Nothing is written outside the area.
 *
 * Forwarding (vnet_fwd_pass): frames read on NIC i leave by NIC i ^ 1 (0<->1,
 * 2<->3) when there is one, else by NIC i itself. Only the 12 MAC bytes are
 * changed: with one NIC the source and destination are swapped; through a
 * pair the source becomes the egress NIC's MAC and the destination the
 * configured one for that NIC, or the frame's own source when none is set
 * (back to the sender). The payload is never touched, so a checksum in it
 * (bench/gwpktgen.c's frames) stays valid. A frame waits in its receive
 * buffer while the egress ring is full: the guest drops nothing itself.
 *
 * Threads: one caller per NIC at a time (the guest's vCPU); the device runs
 * on its own thread on the other side of the rings.
 */
#ifndef GW_COMMON_VNET_DRV_H
#define GW_COMMON_VNET_DRV_H

#include <stdint.h>

#define VNET_DRV_QUEUE_NUM	64u		/* entries per queue (the device allows 256) */
#define VNET_DRV_BUF_BYTES	4096u		/* one buffer: header + frame of at most 2048 */
#define VNET_DRV_HDR_BYTES	12u		/* virtio_net_hdr_v1 with num_buffers */
#define VNET_DRV_FRAME_MIN_BYTES 14u		/* an Ethernet header; shorter ones are dropped */
#define VNET_DRV_FRAME_MAX_BYTES 2048u		/* == VIRTIO_NET_FRAME_MAX_BYTES */
#define VNET_DRV_STATE_OFF	0x00000u
#define VNET_DRV_RXQ_OFF	0x01000u
#define VNET_DRV_TXQ_OFF	0x02000u
#define VNET_DRV_AVAIL_OFF	0x400u		/* in a queue's page */
#define VNET_DRV_USED_OFF	0x800u
#define VNET_DRV_RXBUF_OFF	0x03000u
#define VNET_DRV_TXBUF_OFF	(VNET_DRV_RXBUF_OFF + VNET_DRV_QUEUE_NUM * VNET_DRV_BUF_BYTES)
#define VNET_DRV_AREA_BYTES	(VNET_DRV_TXBUF_OFF + VNET_DRV_QUEUE_NUM * VNET_DRV_BUF_BYTES)
#define VNET_DRV_MAGIC		0x54454e56u	/* "VNET": the state was set up */
#define VNET_DRV_MAX_NICS	4u

/* Returns: 0 or one of these (negative; the first device error is sticky). */
enum vnet_drv_err {
	VNET_ENODEV = -1,	/* no virtio-mmio v2 network device on that page */
	VNET_EFEAT = -2,	/* the device refused VERSION_1 (FEATURES_OK did not stick) */
	VNET_EQUEUE = -3,	/* a queue is missing or smaller than VNET_DRV_QUEUE_NUM */
	VNET_EPROTO = -4,	/* the device broke the ring contract (sticky) */
	VNET_EAGAIN = -5,	/* transmit ring full: reclaim later */
	VNET_ERESET = -6,	/* the device set NEEDS_RESET (sticky) */
	VNET_EINVAL = -7,	/* a caller's argument (area not aligned, frame too long) */
};

/* setup flags */
#define VNET_DRV_RX_IRQ		(1u << 0)	/* interrupts on received frames (else polled) */

/* The two accesses the driver makes to its register page. */
struct vnet_io {
	uint32_t (*rd32)(void *ctx, uint32_t off);
	void (*wr32)(void *ctx, uint32_t off, uint32_t v);
	void *ctx;
};

/* One queue's driver indices (in guest RAM, inside struct vnet_drv_state). */
struct vnet_drv_ring {
	uint16_t avail_idx;	/* next available ring index to publish */
	uint16_t used_seen;	/* used entries consumed */
	uint16_t kicked_idx;	/* avail_idx at the last notification decision */
	uint16_t pad;
};

/* The driver's state, first page of the area: migrates with the RAM. */
struct vnet_drv_state {
	uint32_t magic;		/* VNET_DRV_MAGIC once set up */
	int32_t err;		/* sticky enum vnet_drv_err, 0 = running */
	uint64_t features;	/* negotiated */
	uint32_t flags;		/* VNET_DRV_* given to setup */
	uint8_t mac[6];		/* the device's (VIRTIO_NET_F_MAC), else 0 */
	uint16_t pad;
	struct vnet_drv_ring q[2];	/* 0 receive, 1 transmit */
	uint64_t rx_frames;	/* frames taken from the receive queue */
	uint64_t rx_dropped;	/* frames shorter than an Ethernet header */
	uint64_t tx_frames;	/* frames handed to the transmit queue */
	uint64_t tx_full;	/* vnet_drv_tx calls that found the ring full */
	uint64_t kicks;		/* queue notifications written */
	uint64_t fence;		/* target of the full barrier's RMW */
};

/* This host's binding of a NIC's area; rebuilt after a migration by attach. */
struct vnet_drv {
	struct vnet_io io;
	uint64_t area_gpa;
	uint8_t *area;		/* VNET_DRV_AREA_BYTES at area_gpa */
	struct vnet_drv_state *st;	/* == area + VNET_DRV_STATE_OFF */
};

/* A received frame, still in its buffer (vnet_drv_rx_peek .. vnet_drv_rx_done). */
struct vnet_frame {
	uint8_t *data;		/* the Ethernet frame, in the receive buffer */
	uint32_t len_bytes;
	uint16_t id;		/* descriptor (buffer) index */
};

/* What vnet_fwd_pass does with the MAC header (see the top). */
struct vnet_fwd_cfg {
	uint8_t dst_mac[VNET_DRV_MAX_NICS][6];	/* for frames leaving NIC i */
	uint8_t dst_set[VNET_DRV_MAX_NICS];	/* 0: back to the frame's own source */
};

/*
 * Reset the device, negotiate, set up both queues in @area, post every
 * receive buffer, DRIVER_OK. @flags: VNET_DRV_RX_IRQ or 0. Writes the
 * whole state page and the rings. 0, VNET_EINVAL, VNET_ENODEV, VNET_EFEAT,
 * VNET_EQUEUE (the device is left FAILED on the last two).
 */
int vnet_drv_setup(struct vnet_drv *d, const struct vnet_io *io, uint64_t area_gpa, void *area,
		   uint32_t flags);
/*
 * Bind to an area set up before (by this guest, before a migration): no
 * device access, nothing written. 0, VNET_EINVAL, VNET_ENODEV (no state).
 */
int vnet_drv_attach(struct vnet_drv *d, const struct vnet_io *io, uint64_t area_gpa, void *area);
/* The sticky error (0 while running). */
int vnet_drv_err(const struct vnet_drv *d);
/*
 * The next received frame, left in its buffer: 1 with @f filled, 0 when
 * none, or an error. Frames shorter than an Ethernet header are reposted
 * and counted (rx_dropped), never returned; after a ring of them in one
 * call it returns 0 (a device cannot keep the guest in here).
 */
int vnet_drv_rx_peek(struct vnet_drv *d, struct vnet_frame *f);
/* Give the peeked frame's buffer back to the device (no notification: vnet_drv_flush). */
void vnet_drv_rx_done(struct vnet_drv *d, const struct vnet_frame *f);
/* Transmit buffers the device finished with are free again; returns how many. */
unsigned vnet_drv_tx_reclaim(struct vnet_drv *d);
/*
 * Copy @frame (VNET_DRV_FRAME_MIN_BYTES..VNET_DRV_FRAME_MAX_BYTES) into a
 * transmit buffer and publish it (notification: vnet_drv_flush). 0,
 * VNET_EAGAIN (ring full after a reclaim), VNET_EINVAL or the sticky error.
 */
int vnet_drv_tx(struct vnet_drv *d, const uint8_t *frame, uint32_t len_bytes);
/*
 * Notify each queue that has new buffers since the last call, unless the
 * device said it does not need it. Checks NEEDS_RESET when it notifies.
 * 0 or the sticky error.
 */
int vnet_drv_flush(struct vnet_drv *d);
/* Whether a received frame waits (used index ahead of what was consumed). */
int vnet_drv_rx_pending(struct vnet_drv *d);
/* Read InterruptStatus and acknowledge what it shows; returns it (VIRTIO_MMIO_INT_*). */
uint32_t vnet_drv_irq_ack(struct vnet_drv *d);
/*
 * Forward what waits on @nics[0..nr) (see the top), at most @budget frames
 * per NIC, then flush every NIC. Returns frames forwarded (>= 0) or the
 * first NIC's sticky error.
 */
int vnet_fwd_pass(struct vnet_drv *nics, unsigned nr, const struct vnet_fwd_cfg *cfg,
		  unsigned budget);

#endif
