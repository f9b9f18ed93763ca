/* SPDX-License-Identifier: MIT */
/*
 * virtio-net's insides, shared by virtio_net.c (the hooks, the I/O thread,
 * the lifecycle) and virtio_net_state.c (the sections). Not for VMs: they
 * see virtio_net.h only.
 */
#ifndef GW_VMM_VIRTIO_NET_INT_H
#define GW_VMM_VIRTIO_NET_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <godwit/vm.h>
#include "dev/virtio_net.h"

#define VNET_SPILL_BYTES	(64u << 10)	/* a read's room past FRAME_MAX: the longest tap frame fits */
#define VNET_CLOSE_DRAIN_MAX	4096u		/* frames counted out of the backend at destroy */
#define VNET_STALE_DRAIN_MAX	4096u		/* frames dropped from the backend at a load */
#define VNET_WARN_MAX	8u

/* virtio_net_hdr_v1 (5.1.6) */
#define VNET_HDR_F_NEEDS_CSUM	1u
#define VNET_HDR_GSO_NONE		0u

enum net_run {
	NET_IDLE,			/* created, no thread yet */
	NET_RUNNING,
	NET_STOP_REQ,			/* stop asked; the thread acknowledges at a batch boundary */
	NET_STOPPED,			/* no guest RAM touched; the backend read into the FIFO */
	NET_EXIT,
};

struct vnet_frame {
	uint16_t len;			/* bytes in data, 1..FRAME_MAX */
	uint8_t data[VIRTIO_NET_FRAME_MAX_BYTES];
};

struct virtio_net {
	/* creation, then read-only */
	struct virtio_mmio t;		/* t.dev = this */
	struct net_backend be;
	uint8_t mac[6];			/* what the guest reads (a load may set it, before start) */
	int efd;			/* eventfd: wake the I/O thread */
	char carry_name[GW_SECTION_NAME_MAX];
	struct vnet_frame *fifo;		/* VIRTIO_NET_CARRY_MAX_FRAMES slots */

	/* t.lock: */
	uint16_t net_status;		/* VIRTIO_NET_S_*: config space, migrates */

	/* the owner's thread (new, start, destroy) */
	pthread_t thread;
	bool thread_started;

	pthread_mutex_t lock;
	pthread_cond_t cond;		/* state changes (CLOCK_MONOTONIC waits) */
	/* lock (writes); the I/O thread also loads state between chains: */
	_Atomic int state;		/* enum net_run */
	/*
	 * lock: the FIFO's occupied slots [head, head + count). Free slots
	 * are the I/O thread's only (it fills the tail without the lock, then
	 * publishes count + 1); only the I/O thread consumes, only when
	 * running. A save (stopped) reads the occupied ones under the lock.
	 */
	unsigned head, count;
	unsigned saved_frames;		/* the FIFO's count at the last save (destroy's report) */
	bool saved;
	struct virtio_net_stats stats;

	/* the I/O thread only */
	bool fifo_full_noted;		/* rx_backlog_full counted for this full spell */
	bool rx_first_noted;		/* rx_first logged (once per device) */
	bool tx_blocked;		/* the backend said EAGAIN: wait for POLLOUT */
	bool backend_dead;		/* POLLHUP/POLLERR: poll it no more */
	unsigned warned;
	struct virtq_elem elem;
	struct iovec tx_iov[VIRTQ_ELEM_MAX_IOV];
	uint8_t spill[VNET_SPILL_BYTES];
};

static inline int virtio_net_run_state(struct virtio_net *n)
{
	return atomic_load_explicit(&n->state, memory_order_acquire);
}

/* Read up to @max frames out of the backend, dropping them; how many. */
unsigned virtio_net_backend_drain(struct virtio_net *n, unsigned max);

/* The net part of the transport's section (virtio_dev_ops save/load; t.lock held). */
int virtio_net_dev_save(struct virtio_mmio *t, struct gw_wbuf *w);
int virtio_net_dev_load(struct virtio_mmio *t, struct gw_rbuf *r, char *why, size_t why_len);

#endif
