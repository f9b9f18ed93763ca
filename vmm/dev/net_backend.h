/* SPDX-License-Identifier: MIT */
/*
 * Where a virtio-net device's frames come from and go to, in userspace:
 * one const ops table per backend, one file each (tap.c, net_fd.c).
 *
 * Every backend moves whole Ethernet frames (no virtio-net header, no
 * packet-information prefix) over one nonblocking, message-preserving file
 * descriptor the device's I/O thread polls: a read returns one frame, a
 * write sends one frame or nothing (-EAGAIN).
 *
 * A vhost-net backend is not one of these: it takes the rings themselves
 * (the kernel walks them), so it replaces the device's I/O thread, not
 * this table (docs/devices.md, "virtio-net").
 *
 * Threads: open and close run on the VMM's thread that creates or destroys
 * the device; read_frame and write_frame on the device's I/O thread only.
 */
#ifndef GW_VMM_NET_BACKEND_H
#define GW_VMM_NET_BACKEND_H

#include <net/if.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct net_backend {
	const struct net_backend_ops *ops;	/* set by the caller before open */
	int fd;				/* nonblocking, polled by the I/O thread; -1 closed */
	char ifname[IFNAMSIZ];		/* tap: the interface actually attached */
};

struct net_backend_ops {
	const char *name;		/* "tap", "fd" */
	/*
	 * tap: @arg is the interface name (created when missing and allowed),
	 * @fd ignored. fd: @fd is taken over (closed by close), @arg ignored.
	 * 0 or -errno (-EPERM: no CAP_NET_ADMIN for a tap that does not exist).
	 */
	int (*open)(struct net_backend *b, const char *arg, int fd);
	/*
	 * One frame into @iov: its length (more than the iov holds: the frame
	 * was longer and is cut, the caller drops it), 0 when none is waiting,
	 * or -errno.
	 */
	ssize_t (*read_frame)(struct net_backend *b, const struct iovec *iov, int iovcnt);
	/* Send the frame in @iov whole: its length, -EAGAIN (nothing sent), or -errno. */
	ssize_t (*write_frame)(struct net_backend *b, const struct iovec *iov, int iovcnt);
	/* The fd to poll (POLLIN: a frame to read; POLLOUT: room to write). */
	int (*poll_fd)(const struct net_backend *b);
	void (*close)(struct net_backend *b);
};

extern const struct net_backend_ops net_backend_tap;	/* tap.c: /dev/net/tun, IFF_TAP | IFF_NO_PI */
extern const struct net_backend_ops net_backend_fd;	/* net_fd.c: a SOCK_SEQPACKET/DGRAM fd (tests) */

/* Every backend, for tests and for the CLI's lookup by name. NULL-terminated. */
extern const struct net_backend_ops *const net_backends[];

#endif
