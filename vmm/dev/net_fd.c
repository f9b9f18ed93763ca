/* SPDX-License-Identifier: MIT */
/*
 * The fd backend (net_backend.h): frames over a descriptor the caller
 * already has, message-preserving (a SOCK_SEQPACKET or SOCK_DGRAM
 * socketpair end). The unit tests run the device over it without root;
 * the same code path as the tap but for open. The fd is made nonblocking
 * and closed with the backend.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "dev/net_backend.h"

static int fd_open(struct net_backend *b, const char *arg, int fd)
{
	int type;
	socklen_t len = sizeof(type);
	int fl;

	(void)arg;
	if (fd < 0)
		return -EBADF;
	/* A stream would cut frames at arbitrary points: refuse it. */
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
	if (type != SOCK_SEQPACKET && type != SOCK_DGRAM)
		return -EINVAL;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	b->fd = fd;
	b->ifname[0] = '\0';
	return 0;
}

static ssize_t fd_read(struct net_backend *b, const struct iovec *iov, int iovcnt)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	/* MSG_TRUNC: the frame's real length even when it did not fit. */
	ssize_t n = recvmsg(b->fd, &m, MSG_TRUNC | MSG_DONTWAIT);

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	return n;
}

static ssize_t fd_write(struct net_backend *b, const struct iovec *iov, int iovcnt)
{
	struct msghdr m = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t n = sendmsg(b->fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);

	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

static int fd_poll_fd(const struct net_backend *b)
{
	return b->fd;
}

static void fd_close(struct net_backend *b)
{
	if (b->fd >= 0)
		close(b->fd);
	b->fd = -1;
}

const struct net_backend_ops net_backend_fd = {
	.name = "fd",
	.open = fd_open,
	.read_frame = fd_read,
	.write_frame = fd_write,
	.poll_fd = fd_poll_fd,
	.close = fd_close,
};
