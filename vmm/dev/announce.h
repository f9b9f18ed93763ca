/* SPDX-License-Identifier: MIT */
/*
 * Announcing a NIC's MAC after a switchover (QEMU's announce-self): each
 * round sends, per NIC, one RARP reverse request from the MAC (and a
 * gratuitous ARP when the NIC's IPv4 address is known), so that the
 * switches learn the NIC's new port before the guest sends anything.
 * docs/devices.md, "Announce", says the rest.
 *
 * Schedule, as QEMU's net/announce.c runs it (its code, not qapi/net.json's
 * wording, which calls @initial a delay before the first round): round 0
 * goes out at start, round n >= 1 after a delay of
 *   min(initial + step * (n - 1), max) ms
 * after round n - 1. Defaults 50/550/5/100: rounds at 0, 50, 200, 450,
 * 800 ms. Bounds are QEMU's migrate-set-parameters checks.
 *
 * The VM runs it after the resume, outside the downtime:
 *
 *   a = vmm_announce_new(&params)           (params: NULL = QEMU's defaults)
 *   vmm_announce_add_nic(a, send, opaque, mac)  per NIC (virtio-net:
 *                                           virtio_net_announce_add(a, n))
 *   vmm_announce_start(a)                   the rounds run on a's own thread;
 *                                           a second start restarts them
 *   vmm_announce_stop(a) / vmm_announce_destroy(a)  before the NICs go
 *
 * Threads: every call from any thread but the announcer's own (send
 * functions must not call back into it); send functions are called from
 * the announcer's thread only, never after stop or destroy returned.
 */
#ifndef GW_VMM_ANNOUNCE_H
#define GW_VMM_ANNOUNCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* QEMU's defaults (migration/options.c) and bounds (migrate_params_check). */
#define VMM_ANNOUNCE_INITIAL_MS_DEFAULT	50
#define VMM_ANNOUNCE_MAX_MS_DEFAULT	550
#define VMM_ANNOUNCE_ROUNDS_DEFAULT	5
#define VMM_ANNOUNCE_STEP_MS_DEFAULT	100
#define VMM_ANNOUNCE_DELAY_MS_MAX	100000	/* initial and max: 0..100000 */
#define VMM_ANNOUNCE_ROUNDS_MAX		1000	/* rounds: 0..1000 */
#define VMM_ANNOUNCE_STEP_MS_MIN	1	/* step: 1..10000 */
#define VMM_ANNOUNCE_STEP_MS_MAX	10000
#define VMM_ANNOUNCE_NICS_MAX		16
#define VMM_ANNOUNCE_INTERFACES_MAX	16	/* names in announce-self's interfaces */
#define VMM_ANNOUNCE_NAME_MAX		32	/* an interface name or id, NUL included */
/* Both frames: the Ethernet minimum without FCS, zero padded (QEMU's RARP is 60 bytes). */
#define VMM_ANNOUNCE_FRAME_BYTES	60u
#define VMM_ETH_P_RARP			0x8035u
#define VMM_ETH_P_ARP			0x0806u
#define VMM_ARP_OP_REQUEST		1u
#define VMM_ARP_OP_REQUEST_REV		3u	/* RARP "reverse request" (RFC 903) */

struct vmm;

struct vmm_announce_params {
	int64_t initial_ms;		/* QEMU announce-initial: delay before round 1 */
	int64_t max_ms;			/* announce-max: cap of any delay */
	int64_t rounds;			/* announce-rounds: 0 sends nothing */
	int64_t step_ms;		/* announce-step: added per round */
	/*
	 * announce-self only (QEMU keeps them out of the migration
	 * parameters): the NIC names to announce (none: every NIC), and an id
	 * ("" when absent) naming the schedule that a later call restarts.
	 */
	unsigned nr_interfaces;
	char interfaces[VMM_ANNOUNCE_INTERFACES_MAX][VMM_ANNOUNCE_NAME_MAX];
	char id[VMM_ANNOUNCE_NAME_MAX];
};

/* QEMU's defaults, no interfaces, no id. */
void vmm_announce_params_default(struct vmm_announce_params *p);
/*
 * QEMU's bounds: 0, or -EINVAL with @why in QEMU's words ("Parameter
 * 'announce-step' expects a value between 1 and 10000").
 */
int vmm_announce_params_check(const struct vmm_announce_params *p, char *why, size_t why_len);
/* The delay between round @n - 1 and round @n (n >= 1; 0 for round 0), in ms. */
int64_t vmm_announce_delay_ms(const struct vmm_announce_params *p, unsigned n);
/* Does @p ask for the NIC named @name (no interfaces: every NIC)? */
bool vmm_announce_params_wants(const struct vmm_announce_params *p, const char *name);

/* QEMU's RARP into @frame (60 bytes): broadcast, ethertype 0x8035, opcode 3, sender = target = @mac. */
size_t vmm_announce_rarp(uint8_t frame[VMM_ANNOUNCE_FRAME_BYTES], const uint8_t mac[6]);
/*
 * A gratuitous ARP (RFC 5227's announcement) into @frame (60 bytes):
 * broadcast, ethertype 0x0806, request, sender = @mac/@ipv4, target
 * hardware 0, target protocol = @ipv4 (network order).
 */
size_t vmm_announce_garp(uint8_t frame[VMM_ANNOUNCE_FRAME_BYTES], const uint8_t mac[6],
			 const uint8_t ipv4[4]);

/*
 * Send one frame out of a NIC's host side: 0, -EAGAIN (not sent, the
 * backend is full; counted, not retried by the announcer), or -errno.
 */
typedef int (*vmm_announce_send_fn)(void *opaque, const void *frame, size_t len);

struct vmm_announce;

/* Counters since creation. */
struct vmm_announce_stats {
	uint64_t starts;		/* vmm_announce_start calls that began a schedule */
	uint64_t rounds;		/* rounds completed */
	uint64_t frames_sent;		/* RARP and ARP frames the send functions took */
	uint64_t frames_eagain;		/* frames a send function said -EAGAIN to */
	uint64_t frames_failed;		/* other errors */
	bool running;			/* a schedule is under way */
};

/* Validated copy of @p (NULL: defaults). NULL with errno EINVAL (bad params) or ENOMEM. */
struct vmm_announce *vmm_announce_new(const struct vmm_announce_params *p);
/*
 * One NIC: @send(@opaque, frame, len) each round with @mac's frames.
 * Its index (0..), or -EINVAL (NULL send, multicast MAC), -ENOSPC (NICS_MAX),
 * -EBUSY (a schedule runs: stop first).
 */
int vmm_announce_add_nic(struct vmm_announce *a, vmm_announce_send_fn send, void *opaque,
			 const uint8_t mac[6]);
/* The guest's address on NIC @nic: a gratuitous ARP each round too. 0, -EINVAL, -EBUSY. */
int vmm_announce_set_ipv4(struct vmm_announce *a, int nic, const uint8_t ipv4[4]);
/* New parameters for the next start. 0, -EINVAL (bad params), -EBUSY (a schedule runs). */
int vmm_announce_set_params(struct vmm_announce *a, const struct vmm_announce_params *p);
/* The log's side tag of the announcer's thread ("src", "dst"; default "---"). */
void vmm_announce_set_log_side(struct vmm_announce *a, const char *side);
/*
 * Make the announcer's thread now, idle, so that a later start only wakes
 * it (a start from a resume then costs no thread creation). Optional:
 * start makes it when needed. 0 or -errno.
 */
int vmm_announce_prepare(struct vmm_announce *a);
/*
 * Begin the schedule (round 0 now, on the announcer's thread), or begin
 * it again from round 0 when one runs (as QEMU's announce-self does). 0,
 * or the thread's creation error. rounds 0: logs start and done, sends nothing.
 */
int vmm_announce_start(struct vmm_announce *a);
/* End the schedule; returns once no send function runs. Idempotent. */
void vmm_announce_stop(struct vmm_announce *a);
/*
 * Wait until the schedule in hand is done or stopped: 0, or -ETIMEDOUT
 * after @timeout_ns (a bound for tests and tear-down, not a pace).
 */
int vmm_announce_wait(struct vmm_announce *a, uint64_t timeout_ns);
void vmm_announce_get_stats(struct vmm_announce *a, struct vmm_announce_stats *out);
/* Stop, join the thread, free. Accepts NULL. */
void vmm_announce_destroy(struct vmm_announce *a);

/* ---- virtio-net (virtio_net_announce.c) ---- */

struct virtio_net;

/*
 * Write @frame (14..VIRTIO_NET_FRAME_MAX_BYTES bytes, a whole Ethernet
 * frame) to @n's backend, the host side, not the guest's rings; callable
 * from any thread while the I/O thread runs (the transport's lock is
 * taken, as around the device's own backend writes, then the device's
 * run-state lock; the caller holds no lock of the device). None is
 * written once virtio_net_stop was asked, until virtio_net_resume. A backend that says EAGAIN is retried a bounded
 * few times (VIRTIO_NET_RAW_EAGAIN_TRIES, a 1 ms wait for POLLOUT each).
 * 0, -EINVAL (length), -EBUSY (the device is stopped: a paused source
 * stays silent), -EAGAIN, or the backend's -errno.
 */
int virtio_net_send_raw(struct virtio_net *n, const void *frame, size_t len);
#define VIRTIO_NET_RAW_EAGAIN_TRIES	3u
/* A vmm_announce_send_fn over virtio_net_send_raw (@opaque is the struct virtio_net). */
int virtio_net_announce_send(void *opaque, const void *frame, size_t len);
/* vmm_announce_add_nic(a, virtio_net_announce_send, n, n's MAC): its index or -errno. */
int virtio_net_announce_add(struct vmm_announce *a, struct virtio_net *n);

/* ---- the VM's hook (QMP announce-self) ---- */

/*
 * Announce this VM's NICs now with @p (validated by the caller; the
 * interfaces named, or all). A weak default in announce.c returns
 * -EOPNOTSUPP ("this VM has no NIC"); the VM that has NICs defines it:
 * 0, or -errno.
 */
int vmm_vm_announce(struct vmm *v, const struct vmm_announce_params *p);
/*
 * The parameters the VM's own announce after a switchover uses (QEMU's
 * announce-* migration parameters; interfaces and id unused): get fills
 * @out, set takes @p (validated by the caller) for the next switchover.
 * Weak defaults: -EOPNOTSUPP (no NIC). 0, or -errno.
 */
int vmm_vm_announce_params_get(struct vmm *v, struct vmm_announce_params *out);
int vmm_vm_announce_params_set(struct vmm *v, const struct vmm_announce_params *p);

#endif
