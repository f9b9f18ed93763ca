/* SPDX-License-Identifier: MIT */
/*
 * The write side of a TLS session once the handshake is done (see
 * net/tls_int.h): records gather in a buffer and leave with send(...,
 * MSG_NOSIGNAL) when it fills or at a flush.
 *
 * OpenSSL's socket BIO writes with write(), which raises SIGPIPE on a
 * closed connection; guarding each call with a blocked signal mask cost
 * four system calls per SSL call, more than the write itself for a page.
 * MSG_NOSIGNAL makes the guard unnecessary, and the buffer makes a few
 * send() calls per frame instead of one per 16 KiB record.
 *
 * Thread ownership: the BIO belongs to its SSL object and is used under
 * the session's lock (net/tls.c), like every SSL call.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "net/tls_int.h"

struct send_buf {
	int fd;
	size_t used_bytes, cap_bytes;
	unsigned char data[];
};

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

/* Send what is buffered. 1 all sent, 0 would block (retry set) or failed (errno). */
static int drain(BIO *b, struct send_buf *s)
{
	size_t off = 0;
	int ret = 1;

	BIO_clear_retry_flags(b);
	while (off < s->used_bytes) {
		ssize_t n = send(s->fd, s->data + off, s->used_bytes - off, MSG_NOSIGNAL);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			BIO_set_retry_write(b);
		ret = 0;
		break;
	}
	memmove(s->data, s->data + off, s->used_bytes - off);
	s->used_bytes -= off;
	return ret;
}

static int bio_write_ex(BIO *b, const char *in, size_t len, size_t *written)
{
	struct send_buf *s = BIO_get_data(b);

	*written = 0;
	BIO_clear_retry_flags(b);
	if (len > s->cap_bytes - s->used_bytes && !drain(b, s))
		return 0;
	if (len > s->cap_bytes - s->used_bytes)	/* larger than the whole buffer: it is empty now */
		len = s->cap_bytes;
	memcpy(s->data + s->used_bytes, in, len);
	s->used_bytes += len;
	*written = len;
	return 1;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct send_buf *s = BIO_get_data(b);

	(void)num;
	(void)ptr;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return drain(b, s);
	case BIO_CTRL_WPENDING:
		return (long)s->used_bytes;
	case BIO_CTRL_PENDING:
		return 0;
	default:		/* no kTLS, no fd to hand out, nothing to push or pop */
		return 0;
	}
}

static int bio_destroy(BIO *b)
{
	free(BIO_get_data(b));
	BIO_set_data(b, NULL);
	BIO_set_init(b, 0);
	return 1;
}

static void method_init(void)
{
	BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "godwit send buffer");

	if (m && BIO_meth_set_write_ex(m, bio_write_ex) && BIO_meth_set_ctrl(m, bio_ctrl) &&
	    BIO_meth_set_destroy(m, bio_destroy)) {
		method = m;
		return;
	}
	BIO_meth_free(m);
}

BIO *gw_tls_send_bio_new(int fd, size_t buffer_bytes)
{
	struct send_buf *s;
	BIO *b;

	pthread_once(&method_once, method_init);
	if (!method || !(b = BIO_new(method)))
		return NULL;
	s = malloc(sizeof(*s) + buffer_bytes);
	if (!s) {
		BIO_free(b);
		return NULL;
	}
	s->fd = fd;
	s->used_bytes = 0;
	s->cap_bytes = buffer_bytes;
	BIO_set_data(b, s);
	BIO_set_init(b, 1);
	return b;
}
