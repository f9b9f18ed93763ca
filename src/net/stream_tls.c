/* SPDX-License-Identifier: MIT */
/*
 * The TLS stream (see stream.h): a frame's bytes through the connection's
 * TLS session (net/tls.h), which never waits itself. Between its calls
 * these wait on the socket below, through the transport's poll, until the
 * frame's deadline.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include "net/io.h"
#include "net/io_int.h"
#include "net/stream.h"
#include "net/tls.h"

/* The plaintext of one full record (TLS 1.3 allows 16 KiB at most): see tls_send. */
#define TLS_STAGE_BYTES 16384

/* TLS: write all of @buf by @deadline_ns. send_lock held. */
static int tls_write_all(struct gw_conn *c, const uint8_t *buf, size_t len, uint64_t deadline_ns)
{
	while (len) {
		short ev = 0;
		ssize_t n = gw_tls_write(c->tls, buf, len, &ev);
		int ret;

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n != -EAGAIN)
			return (int)n;
		ret = gw_conn_wait_fd(c->sock, c->fd, ev, deadline_ns);
		if (ret)
			return ret;
	}
	return 0;
}

/* @n bytes of v[i..] done: the parts are moved past them; the index of the first part left. */
static int iov_consume(struct iovec *v, int i, size_t n)
{
	while (n) {
		size_t k = n < v[i].iov_len ? n : v[i].iov_len;

		v[i].iov_base = (uint8_t *)v[i].iov_base + k;
		v[i].iov_len -= k;
		n -= k;
		if (v[i].iov_len)
			break;
		i++;
	}
	return i;
}

/*
 * TLS with our record layer: the iovec @v (consumed in place) by
 * @deadline_ns, sealed straight from its parts as full records
 * (net/tls_rec.c), then flushed. send_lock held.
 */
static int send_own_records(struct gw_conn *c, struct iovec *v, int iovcnt, uint64_t deadline_ns)
{
	int i = 0, ret = 0;

	while (!ret) {
		short ev = 0;
		ssize_t n;

		while (i < iovcnt && !v[i].iov_len)
			i++;
		n = i < iovcnt ? gw_tls_writev(c->tls, v + i, iovcnt - i, &ev) : gw_tls_flush(c->tls, &ev);
		if (n == 0 && i == iovcnt)
			break;		/* all sealed and sent */
		if (n > 0) {
			i = iov_consume(v, i, (size_t)n);
			continue;
		}
		ret = n == -EAGAIN ? gw_conn_wait_fd(c->sock, c->fd, ev, deadline_ns) : (int)n;
	}
	return ret;
}

/*
 * TLS: the iovec by @deadline_ns, as full records. OpenSSL makes one record
 * (16 KiB at most) per write call at least, and every record costs its own
 * header, tag and cipher set-up on both sides: segments shorter than a
 * record (a frame's header, a run of a few pages) are gathered in @stage
 * with their neighbours until it holds a whole record, and a long segment
 * goes straight to OpenSSL in whole records, its tail gathered. Every
 * record but a frame's last is full. Nothing is zero-copy (x->zc_from is
 * not looked at: the stream has no zerocopy) and no descriptors pass (the
 * connection refuses them: no fds). send_lock held.
 */
static int tls_send(struct gw_conn *c, struct iovec *iov, int iovcnt, const struct gw_stream_send *x)
{
	uint64_t deadline_ns = x->deadline_ns;
	uint8_t stage[TLS_STAGE_BYTES];
	size_t staged = 0, total = 0;
	int ret = 0, on = 1, off = 0;
	bool cork;

	if (gw_tls_own_records(c->tls))
		return send_own_records(c, iov, iovcnt, deadline_ns);

	/*
	 * Records gather in the session's send buffer and leave with the
	 * flush below; where they do not (kTLS: the kernel sends each write),
	 * a large frame is corked so that the kernel sends full segments.
	 */
	for (int i = 0; i < iovcnt; i++)
		total += iov[i].iov_len;
	cork = !gw_tls_buffered(c->tls) && total > TLS_STAGE_BYTES &&
	       !setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &on, sizeof(on));

	for (int i = 0; !ret && i < iovcnt; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;

		while (!ret && len) {
			size_t n;

			if (staged || len < sizeof(stage)) {
				n = len < sizeof(stage) - staged ? len : sizeof(stage) - staged;
				memcpy(stage + staged, p, n);
				staged += n;
				if (staged == sizeof(stage)) {
					ret = tls_write_all(c, stage, staged, deadline_ns);
					staged = 0;
				}
			} else {
				n = len - len % sizeof(stage);
				ret = tls_write_all(c, p, n, deadline_ns);
			}
			p += n;
			len -= n;
		}
	}
	if (!ret && staged)
		ret = tls_write_all(c, stage, staged, deadline_ns);
	while (!ret) {
		short ev = 0;

		ret = gw_tls_flush(c->tls, &ev);
		if (ret != -EAGAIN)
			break;
		ret = gw_conn_wait_fd(c->sock, c->fd, ev, deadline_ns);
	}
	if (cork)
		setsockopt(c->fd, IPPROTO_TCP, TCP_CORK, &off, sizeof(off));
	return ret;
}

/*
 * Our record layer: exactly the iovec @v (consumed in place) by the
 * frame's deadline, records opened across its parts.
 */
static int recv_own_records(struct gw_conn *c, struct iovec *v, int iovcnt)
{
	int i = 0;

	for (;;) {
		short ev = 0;
		ssize_t n;
		int ret;

		while (i < iovcnt && !v[i].iov_len)
			i++;
		if (i == iovcnt)
			return 0;
		n = gw_tls_readv(c->tls, v + i, iovcnt - i, &ev);
		if (n > 0) {
			i = iov_consume(v, i, (size_t)n);
			continue;
		}
		if (n != -EAGAIN)
			return (int)n;
		ret = gw_conn_wait_fd(c->sock, c->fd, ev, c->frame_deadline_ns);
		if (ret)
			return ret;
	}
}

/* Exactly the iovec by the frame's deadline (no descriptors: the connection refuses them). */
static int tls_recv(struct gw_conn *c, struct iovec *iov, int iovcnt, int *fds, int max_fds, int *nr_fds)
{
	(void)fds, (void)max_fds, (void)nr_fds;
	if (gw_tls_own_records(c->tls))
		return recv_own_records(c, iov, iovcnt);
	for (int i = 0; i < iovcnt; i++) {
		uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;

		while (len) {
			short ev = 0;
			ssize_t n = gw_tls_read(c->tls, p, len, &ev);
			int ret;

			if (n > 0) {
				p += n;
				len -= (size_t)n;
				continue;
			}
			if (n != -EAGAIN)
				return (int)n;
			ret = gw_conn_wait_fd(c->sock, c->fd, ev, c->frame_deadline_ns);
			if (ret)
				return ret;
		}
	}
	return 0;
}

/* Decrypted bytes, or whole records, the session holds: poll() would not see them. */
static bool tls_pending(struct gw_conn *c)
{
	return gw_tls_pending(c->tls);
}

/* Non-blocking socket: the session's calls wait with the frame's deadline, not the socket's timeout. */
static int tls_set_timeout(struct gw_conn *c, int opt, uint64_t ms)
{
	(void)c, (void)opt, (void)ms;
	return 0;
}

/* The socket below is shut: a thread waiting in poll() for the session wakes. No close_notify. */
static void tls_shutdown(struct gw_conn *c)
{
	c->sock->shutdown(c->fd, SHUT_RDWR);
}

static void tls_close(struct gw_conn *c)
{
	gw_tls_free(c->tls);
	c->tls = NULL;
	if (c->fd >= 0)
		c->sock->close(c->fd);
}

static const char *tls_error(const struct gw_conn *c)
{
	return c->tls ? gw_tls_error(c->tls) : "";
}

const struct gw_stream_ops gw_stream_tls = {
	.name = "tls",
	.zerocopy = false,		/* every record is an encrypted copy */
	.fds = false,			/* a TLS socket is tcp: or unix: without SCM_RIGHTS on the records */
	.send = tls_send,
	.recv = tls_recv,
	.pending = tls_pending,
	.set_timeout = tls_set_timeout,
	.shutdown = tls_shutdown,
	.close = tls_close,
	.error = tls_error,
};
