/* SPDX-License-Identifier: MIT */
/*
 * A fake guest driver for virtio-net (vmm/dev/virtio_net.h): guest RAM
 * between PROT_NONE guard pages, the receive and transmit queues written
 * as a guest writes them, every byte the device reports dirty, and the
 * other end of the device's backend (a SOCK_SEQPACKET socketpair) as "the
 * network". Single-threaded: the device runs on its own I/O thread.
 *
 * Layout: queue q's rings at RAM + 0x8000 * q (descriptors, +0x1000
 * available, +0x2000 used), buffer i of queue q at RAM + 0x10000 +
 * 0x40000 * q + 0x1000 * i (NETDRV_BUF_BYTES each, one descriptor).
 */
#ifndef GW_TEST_NETDRV_H
#define GW_TEST_NETDRV_H

#include <stdbool.h>
#include <stdint.h>
#include "dev/mmio_bus.h"
#include "dev/virtio_net.h"

#define NETDRV_RAM_GPA		0x100000ull
#define NETDRV_RAM_BYTES	(1u << 20)
#define NETDRV_MMIO_GPA		0xd0000000ull
#define NETDRV_GSI		17u
#define NETDRV_NUM		64u
#define NETDRV_BUF_BYTES	(VIRTIO_NET_HDR_BYTES + VIRTIO_NET_FRAME_MAX_BYTES)
#define NETDRV_WAIT_NS		(10ull * 1000000000u)	/* a wait gives up after this */

struct netdrv_q {
	uint64_t desc, avail, used;
	uint16_t avail_idx, used_seen;
};

struct netdrv {
	uint8_t *map, *ram;		/* guard page, RAM, guard page */
	uint8_t *dirty;			/* one byte per RAM byte reported */
	uint64_t dirty_outside;
	struct virtq_mem mem;
	struct vmm_mmio_bus bus;
	struct virtio_net *net;
	int peer;			/* the network's end of the backend */
	_Atomic unsigned irq_raises;
	_Atomic bool irq_level;
	struct netdrv_q q[2];
	uint64_t features;
	/* netdrv_attach: a VM's bus, register page and RAM instead of bus, NETDRV_*_GPA. */
	const struct vmm_mmio_bus *vm_bus;
	uint64_t mmio_gpa;
	uint64_t ram_gpa;		/* the driver's RAM: NETDRV_RAM_GPA unless attached */
	/*
	 * Optional: told every span the driver writes (descriptors, available
	 * ring, transmit buffers), what a dirty log sees of a vCPU's writes
	 * that a test thread's writes through the host mapping escape.
	 */
	void (*wrote)(void *opaque, uint64_t gpa, uint64_t len);
	void *wrote_opaque;
};

/* RAM, a socketpair, the device (fd backend, not started). Aborts on set-up failures. */
void netdrv_init(struct netdrv *d, const char *name);
/* Same, the device's end sending at most about @sndbuf_bytes ahead of the network (0: default). */
void netdrv_init_sndbuf(struct netdrv *d, const char *name, int sndbuf_bytes);
/* Same, over a tap named @ifname (NULL when the tap cannot be opened: errno). */
bool netdrv_init_tap(struct netdrv *d, const char *name, const char *ifname);
/*
 * A driver for a VM's NIC: @ram is the host address of the VM's guest
 * physical @ram_gpa (NETDRV_RAM_BYTES of its RAM, laid out as above from
 * there), its register page at @mmio_gpa on @bus. No device, no peer, no dirty record (the VM
 * reports device writes to its session): netdrv_rx skips that check.
 * Called again with another VM's RAM and bus, the driver carries on there
 * (a migrated guest). netdrv_fini frees nothing of the VM.
 */
void netdrv_attach(struct netdrv *d, void *ram, uint64_t ram_gpa, const struct vmm_mmio_bus *bus,
		   uint64_t mmio_gpa);
/* The device, the peer and the RAM go. */
void netdrv_fini(struct netdrv *d);
uint32_t netdrv_rd(struct netdrv *d, uint64_t off);
void netdrv_wr(struct netdrv *d, uint64_t off, uint32_t v);
/* Negotiate @features, set up both queues (NETDRV_NUM), DRIVER_OK. The status read back. */
uint32_t netdrv_setup(struct netdrv *d, uint64_t features);
/* Descriptor @i of queue @q: one buffer of @len at buffer i (or at @gpa when non-zero). */
void netdrv_desc(struct netdrv *d, unsigned q, uint16_t i, uint64_t gpa, uint32_t len,
		 uint16_t flags, uint16_t next);
uint64_t netdrv_buf(unsigned q, unsigned i);
void *netdrv_host(struct netdrv *d, uint64_t gpa);
/* Offer head @head on queue @q (release), and kick. */
void netdrv_offer(struct netdrv *d, unsigned q, uint16_t head, bool kick);
uint16_t netdrv_used_idx(struct netdrv *d, unsigned q);
void netdrv_used_elem(struct netdrv *d, unsigned q, uint16_t slot, uint32_t *id, uint32_t *len);
/* Post every receive buffer (NETDRV_BUF_BYTES, writable). */
void netdrv_post_rx_all(struct netdrv *d);
/*
 * Take the next received frame if any: copies it into @frame (at most
 * @cap), reposts its buffer, returns its length; 0 when none; -1 when the
 * used entry is wrong (id, length, header, not reported dirty).
 */
int netdrv_rx(struct netdrv *d, void *frame, uint32_t cap);
/* Send a frame (one readable descriptor, header + frame). 0, or -1 when the ring is full. */
int netdrv_tx(struct netdrv *d, const void *frame, uint32_t len);
/* Reclaim sent chains; returns how many. */
unsigned netdrv_tx_reclaim(struct netdrv *d);
unsigned netdrv_tx_in_flight(const struct netdrv *d);
bool netdrv_needs_reset(struct netdrv *d);
/* A copy of @src's guest RAM, its dirty record and driver view into @dst (migration of RAM). */
void netdrv_copy_guest(struct netdrv *dst, const struct netdrv *src);
uint64_t netdrv_ram_hash(const struct netdrv *d);

/* Numbered test frames: dst/src MAC, ethertype 0x88b5, le32 seq, le32 len, pattern. */
#define NETDRV_ETHERTYPE 0x88b5u
uint32_t netdrv_frame_make(uint8_t *f, uint32_t seq, uint32_t len);
/* -1 when corrupt, else the sequence number. */
int64_t netdrv_frame_check(const uint8_t *f, uint32_t len);
uint64_t netdrv_now_ns(void);

#endif
