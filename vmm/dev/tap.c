/* SPDX-License-Identifier: MIT */
/*
 * The tap backend (net_backend.h): /dev/net/tun with IFF_TAP | IFF_NO_PI,
 * nonblocking. No IFF_VNET_HDR: the device offers no checksum or
 * segmentation offload, so every frame is a plain Ethernet frame both
 * ways. TUNSETIFF attaches to an existing (persistent) tap the caller may
 * use, or creates one (CAP_NET_ADMIN); bringing it up and bridging it is
 * the topology's business, not the VMM's.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include "dev/net_backend.h"

static int tap_open(struct net_backend *b, const char *arg, int fd)
{
	struct ifreq ifr;
	int ret;

	(void)fd;
	if (!arg || !*arg || strlen(arg) >= IFNAMSIZ)
		return -EINVAL;
	b->fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (b->fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", arg);
	if (ioctl(b->fd, TUNSETIFF, &ifr) < 0) {
		ret = -errno;
		close(b->fd);
		b->fd = -1;
		return ret;
	}
	snprintf(b->ifname, sizeof(b->ifname), "%s", ifr.ifr_name);
	return 0;
}

static ssize_t tap_read(struct net_backend *b, const struct iovec *iov, int iovcnt)
{
	ssize_t n = readv(b->fd, iov, iovcnt);

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	return n;
}

static ssize_t tap_write(struct net_backend *b, const struct iovec *iov, int iovcnt)
{
	ssize_t n = writev(b->fd, iov, iovcnt);

	if (n < 0)
		return errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

static int tap_poll_fd(const struct net_backend *b)
{
	return b->fd;
}

static void tap_close(struct net_backend *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

const struct net_backend_ops net_backend_tap = {
	.name = "tap",
	.open = tap_open,
	.read_frame = tap_read,
	.write_frame = tap_write,
	.poll_fd = tap_poll_fd,
	.close = tap_close,
};
