/* SPDX-License-Identifier: MIT */
/*
 * virtio-net (virtio 1.2, 5.1) over the virtio-mmio transport, with a
 * userspace backend (net_backend.h: a tap, or an fd in the tests) and one
 * I/O thread per device. docs/devices.md, "virtio-net", says the rest.
 *
 * Offered: VIRTIO_F_VERSION_1, VIRTIO_NET_F_MAC, VIRTIO_NET_F_STATUS (link
 * always up), VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC. No
 * MRG_RXBUF (one chain per frame, the 12-byte virtio_net_hdr_v1 with
 * num_buffers = 1), no CSUM, no GSO, no MQ, no CTRL_VQ: every frame is a
 * whole Ethernet frame of at most VIRTIO_NET_FRAME_MAX_BYTES.
 * Queues: 0 receive, 1 transmit.
 *
 * Lifecycle, as a VM drives it:
 *
 *   n = virtio_net_new(&cfg)          opens the backend; no thread yet
 *   virtio_net_register(n, bus)       the MMIO window (cfg.base_gpa, 4 KiB)
 *   virtio_net_start(n)               the I/O thread runs (source, or the
 *                                     destination after its load)
 *   -- migration, vCPUs paused --
 *   virtio_net_stop(n)                quiesce: no guest RAM touched after it
 *                                     returns; the backend is still read,
 *                                     into the bounded carry FIFO
 *   virtio_net_save_state(n, st)      both sections, as late as possible
 *   success: virtio_net_destroy(n)    (logs what came too late to be carried)
 *   failure: virtio_net_resume(n)     exactly where it was, carried frames first
 *
 *   destination: virtio_net_new, virtio_net_register,
 *   virtio_net_load_state(n, st), then virtio_net_start(n) at the resume.
 *
 * Threads: the public calls come from one VMM thread (the one that creates,
 * pauses, saves and destroys the VM), never with the transport's lock held
 * (stop waits for the I/O thread, which takes it); the register entry
 * point from any vCPU; the I/O thread is the device's own, and calls the
 * VM's mark_dirty and irq ops from there. struct virtio_net is opaque.
 */
#ifndef GW_VMM_VIRTIO_NET_H
#define GW_VMM_VIRTIO_NET_H

#include <stdbool.h>
#include <stdint.h>
#include "dev/mmio_bus.h"
#include "dev/net_backend.h"
#include "dev/virtio_mmio.h"

#define VIRTIO_NET_DEVICE_ID		1u
/* Feature bits (5.1.3). */
#define VIRTIO_NET_F_MAC		5
#define VIRTIO_NET_F_STATUS		16
#define VIRTIO_NET_S_LINK_UP		1u
#define VIRTIO_NET_RXQ			0u
#define VIRTIO_NET_TXQ			1u
#define VIRTIO_NET_QUEUE_NUM_MAX	256u
#define VIRTIO_NET_HDR_BYTES		12u	/* virtio_net_hdr_v1, num_buffers included */
#define VIRTIO_NET_CONFIG_BYTES		8u	/* mac[6], le16 status */
/* Longest frame either way (no FCS): MTU up to 2034. Longer ones are dropped and counted. */
#define VIRTIO_NET_FRAME_MAX_BYTES	2048u
/*
 * The carry FIFO: frames read from the backend, not yet in guest RAM. At
 * most this many; when full the backend is not read (the frames wait in
 * the tap's own queue, whose overflow the kernel counts: tx_dropped).
 */
#define VIRTIO_NET_CARRY_MAX_FRAMES	256u
/* Chains per queue per wakeup of the I/O thread: neither queue starves the other. */
#define VIRTIO_NET_BUDGET		64u
/* virtio_net_stop gives up after this long (the thread never blocks; a bound, not a wait). */
#define VIRTIO_NET_STOP_TIMEOUT_NS	(2ull * 1000000000u)
/* The carried frames' section "<name>-rx" (the transport's is "<name>", version 1). */
#define VIRTIO_NET_CARRY_VERSION	1u
#define VIRTIO_NET_CARRY_SUFFIX		"-rx"

struct virtio_net;
struct gw_state;

struct virtio_net_config {
	const char *name;		/* "virtio-net0": log and section names (< 29 chars) */
	const struct net_backend_ops *backend;	/* &net_backend_tap, &net_backend_fd */
	const char *backend_arg;	/* tap: the interface name */
	int backend_fd;			/* fd backend: taken over (closed on failure too) */
	uint8_t mac[6];
	bool mac_set;			/* false: 52:54:00 + 3 bytes of the name's hash */
	uint64_t base_gpa;		/* its 4 KiB register page (VIRTIO_MMIO_REGION_BYTES) */
	uint32_t gsi;			/* its interrupt line */
	const struct virtq_mem *mem;	/* guest RAM and mark_dirty: outlives the device */
	const struct virtio_irq_ops *irq;
	void *irq_opaque;
};

/* Counters since creation (or load: not migrated). */
struct virtio_net_stats {
	uint64_t rx_frames, rx_bytes;	/* delivered to the guest (frame bytes, no header) */
	uint64_t rx_dropped_too_long;	/* longer than the guest's chain or FRAME_MAX */
	uint64_t rx_dropped_stale;	/* in the backend when a state was loaded (the switch's copies) */
	uint64_t rx_backlog_full;	/* times the FIFO was full and the backend left unread */
	uint64_t tx_frames, tx_bytes;	/* sent to the backend */
	uint64_t tx_dropped;		/* too long, empty, offload asked, backend error */
	uint64_t carried_out;		/* frames in the last saved carry section */
	uint64_t carried_in;		/* frames loaded from a carry section */
	uint32_t backlog_frames;	/* in the FIFO now */
};

/* What one `--nic` option says (virtio_net_parse_nic). */
struct virtio_net_nic {
	char ifname[IFNAMSIZ];		/* tap=IFNAME */
	uint8_t mac[6];
	bool mac_set;			/* mac=MAC given */
};

/*
 * Parse "tap=IFNAME[,mac=XX:XX:XX:XX:XX:XX]" (the CLI's --nic). 0, or
 * -EINVAL with @why: unknown key or backend, a name too long (IFNAMSIZ) or
 * with '/' or spaces, a MAC that is not 6 hex pairs or is multicast.
 */
int virtio_net_parse_nic(const char *spec, struct virtio_net_nic *nic, char *why, size_t why_len);

/*
 * Open the backend and set up the device (transport included); the I/O
 * thread does not run yet. NULL with errno: EINVAL (config), or the
 * backend's open error (EPERM, ENOENT, ...).
 */
struct virtio_net *virtio_net_new(const struct virtio_net_config *cfg);
/* Claim the MMIO window on @bus (before any vCPU runs). 0 or vmm_mmio_register's -errno. */
int virtio_net_register(struct virtio_net *n, struct vmm_mmio_bus *bus);
/* The MMIO window and the line the device needs (for a VM's layout and its FDT/cmdline). */
uint64_t virtio_net_base_gpa(const struct virtio_net *n);
uint32_t virtio_net_gsi(const struct virtio_net *n);
struct virtio_mmio *virtio_net_transport(struct virtio_net *n);
const char *virtio_net_ifname(const struct virtio_net *n);	/* the tap attached, "" for fd */
void virtio_net_mac(const struct virtio_net *n, uint8_t mac[6]);

/* Start the I/O thread (carried frames are delivered first). 0, -EALREADY, or -errno. */
int virtio_net_start(struct virtio_net *n);
/*
 * Quiesce for a pause: returns once the I/O thread has finished the batch
 * in hand (whole chains only, every chain popped is pushed) and touches
 * guest RAM no more. The backend is still read, into the carry FIFO,
 * until resume or destroy. 0 (also when not started), -ETIMEDOUT.
 */
int virtio_net_stop(struct virtio_net *n);
/*
 * After a stop (a failed migration): carry on exactly where it was, the
 * FIFO's frames first. 0 (also when never started), -EINVAL when running.
 */
int virtio_net_resume(struct virtio_net *n);
/* Stop and join the thread, close the backend, free. Accepts NULL. */
void virtio_net_destroy(struct virtio_net *n);
void virtio_net_get_stats(struct virtio_net *n, struct virtio_net_stats *out);

/*
 * Both sections into @st: "<name>" (virtio_mmio_save_state: transport,
 * queues, then MAC and status) and "<name>-rx" (the FIFO's frames, oldest
 * first). Stopped (or never started) device only: else -EBUSY. Saving
 * leaves the FIFO as it is (a failed migration delivers it). 0 or -errno.
 */
int virtio_net_save_state(struct virtio_net *n, struct gw_state *st);
/*
 * Check both sections (a missing "-rx" section is refused too), then apply
 * them; nothing applied on refusal. Applying first drops (and counts:
 * rx_dropped_stale) what the backend holds: copies of frames the source
 * received, which the carry section brings in order. Before start only
 * (the destination): else -EBUSY. 0 or gw_state_reject's value.
 */
int virtio_net_load_state(struct virtio_net *n, struct gw_state *st);
/* The carry section alone, in a buffer (tests, and a VM that sends it later). 0 or -errno. */
int virtio_net_encode_carry(struct virtio_net *n, struct gw_wbuf *w);
/*
 * Check, then make the carried frames the FIFO's content (delivered first
 * at start). -EINVAL with @why (bad version, frame length, count, trailing
 * bytes), -EBUSY once started; nothing applied on refusal.
 */
int virtio_net_decode_carry(struct virtio_net *n, const void *buf, size_t len, uint32_t version,
			    char *why, size_t why_len);
/* Bytes virtio_net_encode_carry may need at most. */
size_t virtio_net_carry_max_bytes(void);

extern const struct virtio_dev_ops virtio_net_ops;

#endif
