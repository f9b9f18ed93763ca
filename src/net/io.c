/* SPDX-License-Identifier: MIT */
/* Framed connections over a byte stream, plain or TLS (see io.h, stream.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>
#include <sys/time.h>
#include <unistd.h>
#include <godwit/log.h>
#include "util/crc32c.h"
#include "net/io.h"
#include "net/io_int.h"
#include "net/stream.h"

void gw_conn_init(struct gw_conn *c, int fd)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->sock = &gw_sock_kernel;
	c->stream = &gw_stream_plain;
	pthread_mutex_init(&c->fd_lock, NULL);
	pthread_mutex_init(&c->send_lock, NULL);
}

void gw_conn_adopt(struct gw_conn *c, int fd, const struct gw_sock_ops *sock, struct gw_tls *tls,
		   uint32_t recv_seq)
{
	if (!sock)
		sock = &gw_sock_kernel;
	/* Plain sockets block (with timeouts); TLS ones do not (tls.h). */
	if (!tls && fd >= 0)
		sock->set_nonblock(fd, false);
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->fd_lock);
	c->fd = fd;
	c->sock = sock;
	c->tls = tls;
	c->stream = tls ? &gw_stream_tls : &gw_stream_plain;
	c->send_seq = 0;
	c->recv_seq = recv_seq;
	c->recv_why[0] = 0;
	__atomic_store_n(&c->bytes_sent, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->bytes_recv, 0, __ATOMIC_RELAXED);
	c->sndtimeo_cut = false;
	__atomic_store_n(&c->rcvtimeo_cut, false, __ATOMIC_RELAXED);
	c->frame_deadline_ns = 0;
#ifdef GW_FAULT_INJECTION
	c->fault_corrupt_next = false;
#endif
	pthread_mutex_unlock(&c->fd_lock);
	pthread_mutex_unlock(&c->send_lock);
}

void gw_conn_set_fd(struct gw_conn *c, int fd, const struct gw_sock_ops *sock)
{
	gw_conn_adopt(c, fd, sock, NULL, 0);
}

const char *gw_conn_tls_error(const struct gw_conn *c)
{
	return c->stream->error(c);
}

void gw_conn_shutdown(struct gw_conn *c)
{
	/* Under fd_lock: never a shutdown of a number that close() recycled. */
	pthread_mutex_lock(&c->fd_lock);
	if (c->fd >= 0)
		c->stream->shutdown(c);
	pthread_mutex_unlock(&c->fd_lock);
}

void gw_conn_close(struct gw_conn *c)
{
	pthread_mutex_lock(&c->send_lock);	/* no send in flight */
	pthread_mutex_lock(&c->fd_lock);
	c->stream->close(c);	/* the socket, if any, and the TLS session */
	c->fd = -1;
	c->tls = NULL;
	c->stream = &gw_stream_plain;
	pthread_mutex_unlock(&c->fd_lock);
	pthread_mutex_unlock(&c->send_lock);
}

/* io_int.h: under fd_lock, never on a recycled number. */
int gw_conn_sock_timeout(struct gw_conn *c, int opt, uint64_t ms)
{
	int ret;

	pthread_mutex_lock(&c->fd_lock);
	ret = c->fd < 0 ? -EBADF : c->stream->set_timeout(c, opt, ms);
	pthread_mutex_unlock(&c->fd_lock);
	return ret;
}

int gw_conn_set_send_timeout(struct gw_conn *c, uint64_t timeout_ms)
{
	int ret;

	pthread_mutex_lock(&c->send_lock);
	c->send_frame_ms = timeout_ms;
	c->sndtimeo_cut = false;
	ret = gw_conn_sock_timeout(c, SO_SNDTIMEO, timeout_ms);
	pthread_mutex_unlock(&c->send_lock);
	return ret;
}

int gw_conn_set_timeout(struct gw_conn *c, uint64_t timeout_ms)
{
	int ret = gw_conn_set_send_timeout(c, timeout_ms);

	__atomic_store_n(&c->recv_frame_ms, timeout_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&c->idle_ms, timeout_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&c->rcvtimeo_cut, false, __ATOMIC_RELAXED);
	return ret ? ret : gw_conn_sock_timeout(c, SO_RCVTIMEO, timeout_ms);
}

void gw_conn_set_idle_timeout(struct gw_conn *c, uint64_t timeout_ms)
{
	__atomic_store_n(&c->idle_ms, timeout_ms, __ATOMIC_RELAXED);
}

int gw_conn_set_recv_timeout(struct gw_conn *c, uint64_t timeout_ms)
{
	__atomic_store_n(&c->idle_ms, timeout_ms, __ATOMIC_RELAXED);
	if (!timeout_ms)
		return 0;	/* a begun frame keeps its deadline */
	__atomic_store_n(&c->recv_frame_ms, timeout_ms, __ATOMIC_RELAXED);
	__atomic_store_n(&c->rcvtimeo_cut, false, __ATOMIC_RELAXED);
	return gw_conn_sock_timeout(c, SO_RCVTIMEO, timeout_ms);
}

void gw_conn_watch_progress(struct gw_conn *c, uint64_t *progress_ns)
{
	c->progress_ns = progress_ns;
	c->progress_stamps = true;
}

void gw_conn_wait_progress(struct gw_conn *c, uint64_t *progress_ns)
{
	c->progress_ns = progress_ns;
	c->progress_stamps = false;
}

void gw_conn_set_wait_end(struct gw_conn *c, uint64_t end_ns)
{
	c->wait_end_ns = end_ns;
}

int gw_conn_peer_alive(struct gw_conn *c)
{
	struct pollfd pfd = { .fd = c->fd, .events = POLLRDHUP };

	if (c->fd < 0)
		return -EPIPE;
	if (c->sock->poll(&pfd, 1, 0) < 0)
		return errno == EINTR ? 0 : -errno;
	return pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL) ? -ECONNRESET : 0;
}

uint64_t gw_conn_queued_bytes(const struct gw_conn *c, bool inbound)
{
	int n = 0;

	if (c->fd < 0 || !c->sock->kernel || ioctl(c->fd, inbound ? SIOCINQ : SIOCOUTQ, &n) < 0 || n < 0)
		return 0;
	return (uint64_t)n;
}

/* io_int.h */
uint64_t gw_conn_deadline_after(uint64_t ms)
{
	return ms ? gw_now_ns() + ms * 1000000ull : 0;
}

/* io_int.h */
int gw_conn_ms_left(uint64_t deadline_ns)
{
	uint64_t now = gw_now_ns(), left;

	if (!deadline_ns)
		return -1;
	if (now >= deadline_ns)
		return 0;
	left = (deadline_ns - now + 999999) / 1000000;
	return left > 0x7fffffff ? 0x7fffffff : (int)left;
}

/* io_int.h */
int gw_conn_wait_fd(const struct gw_sock_ops *sock, int fd, short events, uint64_t deadline_ns)
{
	struct pollfd pfd = { .fd = fd, .events = events };

	for (;;) {
		int left = gw_conn_ms_left(deadline_ns), r;

		if (left == 0)
			return -ETIMEDOUT;
		r = sock->poll(&pfd, 1, left);
		if (r > 0)
			return 0;	/* ready, or an error the next call reports */
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

#define GW_CONN_MAX_IOV (4 + GW_WIRE_MAX_BATCH_PAGES)

/*
 * One frame: header, then @iov; the CRC over the header and the first
 * @crc_iovcnt parts (all of them for every frame but PAGE_CRC ones); the
 * parts after the first @zc_from go with MSG_ZEROCOPY (@zc_from = iovcnt:
 * none) where the stream can (not TLS: records are encrypted copies; then
 * *@zc_calls stays).
 */
static int conn_send(struct gw_conn *c, uint16_t type, const struct iovec *iov, int iovcnt,
		     int crc_iovcnt, int zc_from, const int *fds, int nr_fds, uint32_t *seq,
		     uint32_t *zc_calls)
{
	struct iovec all[GW_CONN_MAX_IOV + 1];
	uint8_t hdr[GW_WIRE_HDR_BYTES];
	struct gw_stream_send x = { .fds = fds, .nr_fds = nr_fds, .zc_calls = zc_calls };
	size_t len = 0;
	uint32_t crc;
	int ret;

	if (iovcnt < 0 || iovcnt > GW_CONN_MAX_IOV || (fds && nr_fds && !c->stream->fds))
		return -EINVAL;
	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (len > gw_frame_max_payload(type))
		return -EMSGSIZE;
	pthread_mutex_lock(&c->send_lock);
	if (c->fd < 0) {
		pthread_mutex_unlock(&c->send_lock);
		return -EPIPE;
	}
	gw_frame_hdr_encode(hdr, type, (uint32_t)len, c->send_seq);
	crc = gw_crc32c(0, hdr, sizeof(hdr));
	for (int i = 0; i < crc_iovcnt; i++)
		crc = gw_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
	gw_frame_hdr_set_crc(hdr, crc);
	all[0].iov_base = hdr;
	all[0].iov_len = sizeof(hdr);
	memcpy(&all[1], iov, sizeof(*iov) * (size_t)iovcnt);
#ifdef GW_FAULT_INJECTION
	uint8_t *corrupt = NULL;

	if (c->fault_corrupt_next && iovcnt > 0 && iov[iovcnt - 1].iov_len &&
	    (corrupt = malloc(iov[iovcnt - 1].iov_len))) {
		/*
		 * The frame leaves with a payload its CRC does not match. A copy
		 * is corrupted, not the part itself: it may be guest memory
		 * (sent live), where a write would be a guest write.
		 */
		memcpy(corrupt, iov[iovcnt - 1].iov_base, iov[iovcnt - 1].iov_len);
		corrupt[iov[iovcnt - 1].iov_len / 2] ^= 0x40;
		all[iovcnt].iov_base = corrupt;
		zc_from = iovcnt;	/* the copy is freed below: never zero-copy */
		c->fault_corrupt_next = false;
	}
#endif
	if (c->sndtimeo_cut) {	/* the last frame cut the socket's timeout: this one has its own */
		gw_conn_sock_timeout(c, SO_SNDTIMEO, c->send_frame_ms);
		c->sndtimeo_cut = false;
	}
	x.deadline_ns = gw_conn_deadline_after(c->send_frame_ms);
	x.zc_from = (zc_calls && c->stream->zerocopy ? zc_from : iovcnt) + 1;	/* all[0] is the header */
	ret = c->stream->send(c, all, iovcnt + 1, &x);
#ifdef GW_FAULT_INJECTION
	free(corrupt);
#endif
	if (!ret) {
		if (seq)
			*seq = c->send_seq;
		c->send_seq++;
		__atomic_fetch_add(&c->bytes_sent, sizeof(hdr) + len, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&c->send_lock);
	return ret;
}

int gw_conn_send(struct gw_conn *c, uint16_t type, const struct iovec *iov, int iovcnt,
		 const int *fds, int nr_fds)
{
	return conn_send(c, type, iov, iovcnt, iovcnt, iovcnt, fds, nr_fds, NULL, NULL);
}

int gw_conn_send_prefix_crc(struct gw_conn *c, uint16_t type, const struct iovec *iov, int iovcnt,
			    int crc_iovcnt, uint32_t *zc_calls, uint32_t *seq)
{
	if (crc_iovcnt < 0 || crc_iovcnt > iovcnt)
		return -EINVAL;
	return conn_send(c, type, iov, iovcnt, crc_iovcnt, zc_calls ? crc_iovcnt : iovcnt, NULL, 0, seq, zc_calls);
}

int gw_conn_send_msg_fds(struct gw_conn *c, uint16_t type, const void *m, const int *fds, int nr_fds)
{
	size_t len = gw_msg_size(type, m);
	uint8_t small[256], *buf = len <= sizeof(small) ? small : malloc(len);
	struct iovec iov = { .iov_base = buf, .iov_len = len };
	struct gw_wbuf w;
	int ret;

	if (!buf)
		return -ENOMEM;
	gw_wbuf_init(&w, buf, len);
	ret = gw_msg_encode(type, m, &w);
	if (!ret)
		ret = gw_conn_send(c, type, &iov, len ? 1 : 0, fds, nr_fds);
	if (buf != small)
		free(buf);
	return ret;
}

int gw_conn_send_msg(struct gw_conn *c, uint16_t type, const void *m)
{
	return gw_conn_send_msg_fds(c, type, m, NULL, 0);
}

int gw_conn_send_error(struct gw_conn *c, int neg_errno, const char *reason)
{
	struct gw_msg_error m = { .code = gw_wire_err_from_errno(neg_errno) };

	snprintf(m.reason, sizeof(m.reason), "%s", reason ? reason : "");
	/* The peer may be gone or not reading: do not wait long for it. */
	gw_conn_set_send_timeout(c, 1000);
	return gw_conn_send_msg(c, GW_MSG_ERROR, &m);
}

/* Exactly @iov (modified in place) from the stream, by the frame's deadline. */
static int recv_all(struct gw_conn *c, struct iovec *iov, int iovcnt, int *fds, int max_fds, int *nr_fds)
{
	if (fds && !c->stream->fds)
		return -EINVAL;
	return c->stream->recv(c, iov, iovcnt, fds, max_fds, nr_fds);
}

/*
 * Until the next frame begins: the idle timeout, or while the session makes
 * progress (gw_conn_watch_progress). 0 (data, or an error the read will
 * report), -ETIMEDOUT.
 */
static int wait_frame(struct gw_conn *c)
{
	uint64_t t0 = gw_now_ns();
	struct pollfd pfd = { .fd = c->fd, .events = POLLIN };

	if (c->stream->pending(c))
		return 0;
	for (;;) {
		uint64_t now = gw_now_ns(), from = t0, end, idle_ms;
		int r;

		if (c->progress_ns) {
			uint64_t last = __atomic_load_n(c->progress_ns, __ATOMIC_RELAXED);

			from = last > t0 ? last : t0;
		}
		idle_ms = __atomic_load_n(&c->idle_ms, __ATOMIC_RELAXED);
		end = idle_ms ? from + idle_ms * 1000000ull : 0;
		if (c->wait_end_ns && (!end || c->wait_end_ns < end))
			end = c->wait_end_ns;
		if (end && now >= end)
			return -ETIMEDOUT;
		r = c->sock->poll(&pfd, 1, end ? gw_conn_ms_left(end) : -1);
		if (r > 0)
			return 0;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

static int conn_recv_hdr_fds(struct gw_conn *c, struct gw_frame_hdr *h, uint32_t *crc_state,
			     int *fds, int max_fds, int *nr_fds)
{
	uint8_t hdr[GW_WIRE_HDR_BYTES];
	struct iovec iov = { .iov_base = hdr, .iov_len = sizeof(hdr) };
	int ret;

	c->frame_deadline_ns = 0;
	ret = wait_frame(c);
	if (ret)
		return ret;
	/* The frame has begun: all of it within the frame timeout. */
	if (__atomic_load_n(&c->rcvtimeo_cut, __ATOMIC_RELAXED)) {
		gw_conn_sock_timeout(c, SO_RCVTIMEO, __atomic_load_n(&c->recv_frame_ms, __ATOMIC_RELAXED));
		__atomic_store_n(&c->rcvtimeo_cut, false, __ATOMIC_RELAXED);
	}
	c->frame_deadline_ns = gw_conn_deadline_after(__atomic_load_n(&c->recv_frame_ms, __ATOMIC_RELAXED));
	ret = recv_all(c, &iov, 1, fds, max_fds, nr_fds);
	if (ret)
		return ret;
	if (c->progress_ns && c->progress_stamps)
		__atomic_store_n(c->progress_ns, gw_now_ns(), __ATOMIC_RELAXED);
	__atomic_store_n(&c->bytes_recv, c->bytes_recv + sizeof(hdr), __ATOMIC_RELAXED);
	ret = gw_frame_hdr_decode(hdr, h);
	if (ret) {
		gw_frame_hdr_why(hdr, c->recv_why, sizeof(c->recv_why));
		return ret;
	}
	if (h->seq != c->recv_seq) {
		snprintf(c->recv_why, sizeof(c->recv_why), "frame sequence number %u where %u was due "
			 "(a frame lost, repeated or inserted)", h->seq, c->recv_seq);
		return -EPROTO;
	}
	c->recv_seq++;
	gw_frame_hdr_set_crc(hdr, 0);
	*crc_state = gw_crc32c(0, hdr, sizeof(hdr));
	return 0;
}

const char *gw_conn_recv_why(const struct gw_conn *c)
{
	return c->recv_why;
}

int gw_conn_recv_hdr(struct gw_conn *c, struct gw_frame_hdr *h, uint32_t *crc_state)
{
	return conn_recv_hdr_fds(c, h, crc_state, NULL, 0, NULL);
}

int gw_conn_recv_iov(struct gw_conn *c, const struct iovec *iov, int iovcnt, uint32_t *crc_state)
{
	struct iovec tmp[GW_CONN_MAX_IOV];
	int ret;

	if (iovcnt < 0 || iovcnt > GW_CONN_MAX_IOV)
		return -EINVAL;
	memcpy(tmp, iov, sizeof(*iov) * (size_t)iovcnt);
	ret = recv_all(c, tmp, iovcnt, NULL, 0, NULL);
	if (ret)
		return ret;
	for (int i = 0; i < iovcnt; i++) {
		if (crc_state)
			*crc_state = gw_crc32c(*crc_state, iov[i].iov_base, iov[i].iov_len);
		__atomic_store_n(&c->bytes_recv, c->bytes_recv + iov[i].iov_len, __ATOMIC_RELAXED);
	}
	return 0;
}

int gw_conn_recv_check(const struct gw_frame_hdr *h, uint32_t crc_state)
{
	return crc_state == h->crc ? 0 : -EBADMSG;
}

ssize_t gw_conn_recv(struct gw_conn *c, struct gw_frame_hdr *h, void *buf, size_t cap,
		     int *fds, int max_fds, int *nr_fds)
{
	struct iovec iov = { .iov_base = buf, .iov_len = 0 };
	uint32_t crc;
	int ret;

	if (nr_fds)
		*nr_fds = 0;
	ret = conn_recv_hdr_fds(c, h, &crc, fds, max_fds, nr_fds);
	if (ret)
		return ret;
	if (h->len > cap)
		return -EPROTO;
	iov.iov_len = h->len;
	ret = gw_conn_recv_iov(c, &iov, 1, &crc);
	if (ret)
		return ret;
	ret = gw_conn_recv_check(h, crc);
	return ret ? ret : (ssize_t)h->len;
}

int gw_conn_recv_msg_fds(struct gw_conn *c, union gw_msg *m, void *buf, size_t cap,
			 int *fds, int max_fds, int *nr_fds, char *why, size_t why_len)
{
	struct gw_frame_hdr h;
	ssize_t n;
	int ret;

	if (why && why_len)
		why[0] = 0;
	n = gw_conn_recv(c, &h, buf, cap, fds, max_fds, nr_fds);
	if (n < 0) {
		const char *stream_why = c->stream->error(c);

		if (stream_why[0] && why)
			snprintf(why, why_len, "%s", stream_why);
		else if (c->recv_why[0] && why)
			snprintf(why, why_len, "%s", c->recv_why);
		else if (n == -EPROTO && why)
			snprintf(why, why_len, "malformed frame header or frame too long");
		return (int)n;
	}
	if (h.type == GW_MSG_PAGES) {
		if (why)
			snprintf(why, why_len, "unexpected PAGES frame");
		return -EPROTO;
	}
	ret = gw_msg_decode(h.type, buf, (size_t)n, m, why, why_len);
	return ret ? ret : h.type;
}

int gw_conn_recv_msg(struct gw_conn *c, union gw_msg *m, void *buf, size_t cap,
		     char *why, size_t why_len)
{
	return gw_conn_recv_msg_fds(c, m, buf, cap, NULL, 0, NULL, why, why_len);
}
