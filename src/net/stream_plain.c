/* SPDX-License-Identifier: MIT */
/*
 * The plain stream (see stream.h): a frame's bytes with sendmsg/recvmsg
 * through the transport's gw_sock_ops, on a blocking socket. The socket's
 * own timeout bounds each call; a call that comes back short of the frame
 * (the timeout ran out, or a signal) lowers it to what is left of the
 * frame's time, and the framed connection restores it for the next frame.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "net/io.h"
#include "net/io_int.h"
#include "net/stream.h"

/* At most this many parts per sendmsg/recvmsg call (the kernel's IOV_MAX). */
#define IOV_PER_CALL 1024

/*
 * A call came back short of the frame: what is left of the frame's time,
 * as the socket's timeout. 0, or -ETIMEDOUT when the frame's time is over.
 */
static int cut_timeout(struct gw_conn *c, int opt, uint64_t deadline_ns, bool *cut)
{
	int left = gw_conn_ms_left(deadline_ns);

	if (left == 0)
		return -ETIMEDOUT;
	if (left > 0) {
		gw_conn_sock_timeout(c, opt, (uint64_t)left);
		__atomic_store_n(cut, true, __ATOMIC_RELAXED);	/* rcvtimeo_cut is shared */
	}
	return 0;
}

/* Consume @n bytes from the front of @msg's iovec (modified in place). */
static void msg_advance(struct msghdr *msg, size_t n)
{
	while (n > 0 && msg->msg_iovlen > 0) {
		if (n >= msg->msg_iov->iov_len) {
			n -= msg->msg_iov->iov_len;
			msg->msg_iov++;
			msg->msg_iovlen--;
		} else {
			msg->msg_iov->iov_base = (char *)msg->msg_iov->iov_base + n;
			msg->msg_iov->iov_len -= n;
			n = 0;
		}
	}
	while (msg->msg_iovlen > 0 && msg->msg_iov->iov_len == 0) {
		msg->msg_iov++;
		msg->msg_iovlen--;
	}
}

/* sendmsg the whole iovec (modified in place) by @deadline_ns, fds on the first call. send_lock held. */
static int send_all(struct gw_conn *c, struct iovec *iov, int iovcnt, const int *fds, int nr_fds,
		    int flags, uint32_t *calls, uint64_t deadline_ns)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * GW_MAX_RAM_BLOCKS)];
		struct cmsghdr align;
	} cbuf;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };

	if (fds && nr_fds > 0) {
		struct cmsghdr *cm;

		if (nr_fds > GW_MAX_RAM_BLOCKS)
			return -EINVAL;
		memset(&cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nr_fds);
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nr_fds);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)nr_fds);
	}
	while (msg.msg_iovlen > 0) {
		size_t left = msg.msg_iovlen;
		ssize_t n;
		int ret;

		msg.msg_iovlen = left < IOV_PER_CALL ? left : IOV_PER_CALL;
		n = c->sock->sendmsg(c->fd, &msg, MSG_NOSIGNAL | flags);
		msg.msg_iovlen = left;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (n > 0) {
			if (calls)
				(*calls)++;
			msg.msg_control = NULL;
			msg.msg_controllen = 0;
			msg_advance(&msg, (size_t)n);
			if (!msg.msg_iovlen)
				break;
			if (left > IOV_PER_CALL && msg.msg_iovlen <= left - IOV_PER_CALL)
				continue;	/* a whole call's worth went: not short */
		}
		/* Short: the socket's timeout ran out, or a signal. The frame's own time is the limit. */
		if (!deadline_ns)
			continue;
		ret = cut_timeout(c, SO_SNDTIMEO, deadline_ns, &c->sndtimeo_cut);
		if (ret)
			return ret;
	}
	return 0;
}

/* Zero-copy parts go in a call of their own: the header and prefix before them are copied. */
static int plain_send(struct gw_conn *c, struct iovec *iov, int iovcnt, const struct gw_stream_send *x)
{
	int ret = send_all(c, iov, x->zc_from, x->fds, x->nr_fds, 0, NULL, x->deadline_ns);

	if (!ret && x->zc_from < iovcnt)
		ret = send_all(c, iov + x->zc_from, iovcnt - x->zc_from, NULL, 0, MSG_ZEROCOPY, x->zc_calls,
			       x->deadline_ns);
	return ret;
}

/* Descriptors that came with a segment: kept up to @max_fds, the rest closed. */
static void take_fds(struct msghdr *msg, int *fds, int max_fds, int *nr_fds)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		int cnt;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < cnt; i++) {
			int f;

			memcpy(&f, CMSG_DATA(cm) + sizeof(int) * (size_t)i, sizeof(int));
			if (*nr_fds < max_fds)
				fds[(*nr_fds)++] = f;
			else
				close(f);	/* more than announced: drop */
		}
	}
}

/* recvmsg exactly the iovec by the frame's deadline; fds (if asked) from the first segment. */
static int plain_recv(struct gw_conn *c, struct iovec *iov, int iovcnt, int *fds, int max_fds, int *nr_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * GW_MAX_RAM_BLOCKS)];
		struct cmsghdr align;
	} cbuf;
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = (size_t)iovcnt };

	msg_advance(&msg, 0);	/* skip empty leading segments */
	while (msg.msg_iovlen > 0) {
		size_t left = msg.msg_iovlen;
		ssize_t n;

		if (fds) {
			msg.msg_control = cbuf.buf;
			msg.msg_controllen = sizeof(cbuf.buf);
		}
		msg.msg_iovlen = left < IOV_PER_CALL ? left : IOV_PER_CALL;
		n = c->sock->recvmsg(c->fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
		msg.msg_iovlen = left;
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if (n < 0) {
			/* The socket's timeout ran out: the frame's own time is the limit. */
			int ret = c->frame_deadline_ns ? cut_timeout(c, SO_RCVTIMEO, c->frame_deadline_ns,
								     &c->rcvtimeo_cut) : -ETIMEDOUT;

			if (ret)
				return ret;
			continue;
		}
		if (fds) {
			take_fds(&msg, fds, max_fds, nr_fds);
			fds = NULL;
		}
		msg.msg_control = NULL;
		msg.msg_controllen = 0;
		msg_advance(&msg, (size_t)n);
		if (left > IOV_PER_CALL && msg.msg_iovlen <= left - IOV_PER_CALL)
			continue;	/* a whole call's worth came: not short */
		if (msg.msg_iovlen && c->frame_deadline_ns) {
			int ret = cut_timeout(c, SO_RCVTIMEO, c->frame_deadline_ns, &c->rcvtimeo_cut);

			if (ret)
				return ret;
		}
	}
	return 0;
}

/* The kernel holds what was received: nothing waits above the socket. */
static bool plain_pending(struct gw_conn *c)
{
	(void)c;
	return false;
}

static int plain_set_timeout(struct gw_conn *c, int opt, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000), .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	return c->sock->setsockopt(c->fd, SOL_SOCKET, opt, &tv, sizeof(tv)) ? -errno : 0;
}

static void plain_shutdown(struct gw_conn *c)
{
	c->sock->shutdown(c->fd, SHUT_RDWR);
}

static void plain_close(struct gw_conn *c)
{
	if (c->fd >= 0)
		c->sock->close(c->fd);
}

static const char *plain_error(const struct gw_conn *c)
{
	(void)c;
	return "";
}

const struct gw_stream_ops gw_stream_plain = {
	.name = "plain",
	.zerocopy = true,
	.fds = true,
	.send = plain_send,
	.recv = plain_recv,
	.pending = plain_pending,
	.set_timeout = plain_set_timeout,
	.shutdown = plain_shutdown,
	.close = plain_close,
	.error = plain_error,
};
