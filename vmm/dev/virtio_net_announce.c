/* SPDX-License-Identifier: MIT */
/*
 * virtio-net's host-side frames (announce.h): a frame the VMM itself
 * writes to the device's backend, beside the guest's, from another thread
 * than the device's I/O thread.
 *
 * A backend write is one whole frame (a tap's write, a datagram), so a
 * raw frame cannot interleave with a guest frame inside it; the
 * transport's lock is not taken: the I/O thread holds it while it writes
 * guest RAM, which on a destination that verifies can wait tens of ms on
 * the digest's write protection, and the first announce must not wait
 * with it. n->lock orders the write against the run state: a frame is
 * written before virtio_net_stop's request, or refused, so a paused
 * source never announces. The backend write is nonblocking: the lock is
 * held for one sendmsg/writev. The backend's fd is open from virtio_net_new to
 * virtio_net_destroy: callers stop sending before destroy.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/uio.h>
#include "dev/announce.h"
#include "dev/virtio_net_int.h"

#define RAW_POLLOUT_WAIT_MS	1

int virtio_net_send_raw(struct virtio_net *n, const void *frame, size_t len)
{
	struct iovec iov = { (void *)frame, len };
	ssize_t w = -EAGAIN;
	int st;

	if (!n || !frame || len < 14 || len > VIRTIO_NET_FRAME_MAX_BYTES)
		return -EINVAL;
	for (unsigned tries = 0; tries < VIRTIO_NET_RAW_EAGAIN_TRIES; tries++) {
		struct pollfd pfd;

		/* n->lock orders the write against virtio_net_stop: before it, or refused. */
		pthread_mutex_lock(&n->lock);
		st = n->state;
		if (st == NET_STOP_REQ || st == NET_STOPPED || st == NET_EXIT)
			w = -EBUSY;
		else
			w = n->be.ops->write_frame(&n->be, &iov, 1);
		pthread_mutex_unlock(&n->lock);
		if (w != -EAGAIN)
			break;
		/* Bounded: the backend is full, wait a little for room, then give up. */
		pfd = (struct pollfd){ .fd = n->be.ops->poll_fd(&n->be), .events = POLLOUT };
		if (poll(&pfd, 1, RAW_POLLOUT_WAIT_MS) < 0 && errno != EINTR)
			break;
	}
	return w < 0 ? (int)w : 0;
}

int virtio_net_announce_send(void *opaque, const void *frame, size_t len)
{
	return virtio_net_send_raw(opaque, frame, len);
}

int virtio_net_announce_add(struct vmm_announce *a, struct virtio_net *n)
{
	uint8_t mac[6];

	virtio_net_mac(n, mac);
	return vmm_announce_add_nic(a, virtio_net_announce_send, n, mac);
}
