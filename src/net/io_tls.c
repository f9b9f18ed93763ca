/* SPDX-License-Identifier: MIT */
/*
 * Starting TLS on a framed connection (see io.h, tls.h): the client's
 * handshake, waited for on the socket below with its own deadline; then
 * the connection's stream is the TLS one (stream_tls.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "net/io.h"
#include "net/io_int.h"
#include "net/stream.h"
#include "net/tls.h"

int gw_conn_start_tls(struct gw_conn *c, struct gw_tls_ctx *ctx, const char *host, uint64_t timeout_ms,
		      char *why, size_t why_len)
{
	uint64_t deadline_ns = gw_conn_deadline_after(timeout_ms);
	struct gw_tls *t;
	int ret;

	if (!c->sock->kernel) {
		/* OpenSSL drives a kernel socket (its own reads and writes); refused before it starts. */
		snprintf(why, why_len, "TLS needs a kernel socket (tcp: or unix:), not this transport's");
		return -EOPNOTSUPP;
	}
	t = gw_tls_new(ctx, c->fd, host, why, why_len);
	if (!t)
		return -errno;
	for (;;) {
		short ev = 0;

		ret = gw_tls_handshake(t, &ev);
		if (ret != -EAGAIN)
			break;
		ret = gw_conn_wait_fd(c->sock, c->fd, ev, deadline_ns);
		if (ret) {
			snprintf(why, why_len, "no TLS handshake with the destination within %llu ms",
				 (unsigned long long)timeout_ms);
			break;
		}
	}
	if (ret && ret != -ETIMEDOUT)
		snprintf(why, why_len, "%s", gw_tls_error(t));
	if (ret) {
		gw_tls_free(t);
		return ret;
	}
	pthread_mutex_lock(&c->send_lock);
	pthread_mutex_lock(&c->fd_lock);
	c->tls = t;
	c->stream = &gw_stream_tls;
	pthread_mutex_unlock(&c->fd_lock);
	pthread_mutex_unlock(&c->send_lock);
	return 0;
}
