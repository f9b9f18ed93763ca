/* SPDX-License-Identifier: MIT */
/* "scheme:address" URLs, resolved against the transport table. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>
#include "net/transport.h"

static int url_parse(const char *url, bool listen, struct gw_url *out, char *why, size_t why_len)
{
	const char *colon = url ? strchr(url, ':') : NULL;

	memset(out, 0, sizeof(*out));
	if (!colon) {
		snprintf(why, why_len, "URL '%s' is not SCHEME:ADDRESS (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)",
			 url ? url : "");
		return -EINVAL;
	}
	for (unsigned i = 0; gw_transports[i]; i++) {
		const char *scheme = gw_transports[i]->scheme;

		if (strlen(scheme) != (size_t)(colon - url) || strncmp(url, scheme, strlen(scheme)))
			continue;
		if (!colon[1] || strlen(colon + 1) >= sizeof(out->addr)) {
			snprintf(why, why_len, "URL '%s': empty or too long address", url);
			return -EINVAL;
		}
		if (gw_transports[i]->check && gw_transports[i]->check(colon + 1, listen, why, why_len))
			return -EINVAL;
		out->ops = gw_transports[i];
		snprintf(out->addr, sizeof(out->addr), "%s", colon + 1);
		return 0;
	}
	snprintf(why, why_len, "URL '%s': unknown transport (tcp:HOST:PORT, unix:PATH or rdma:HOST:PORT)", url);
	return -EINVAL;
}

int gw_url_parse(const char *url, struct gw_url *out, char *why, size_t why_len)
{
	return url_parse(url, false, out, why, why_len);
}

int gw_url_parse_listen(const char *url, struct gw_url *out, char *why, size_t why_len)
{
	return url_parse(url, true, out, why, why_len);
}

void gw_url_host(const struct gw_url *u, char *host, size_t host_len)
{
	host[0] = 0;
	if (u->ops && u->ops->host)
		u->ops->host(u->addr, host, host_len);
}

/* ---- the kernel's socket calls ---- */

int gw_accept_rest(int fd)
{
	int err = errno;

	if (fd < 0 && (err == EMFILE || err == ENFILE)) {
		poll(NULL, 0, 100);
		errno = err;
	}
	return fd;
}

static int kernel_accept(int listen_fd)
{
	return gw_accept_rest(accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC));
}

static int kernel_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	return setsockopt(fd, level, name, val, len);
}

static int kernel_set_nonblock(int fd, bool on)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0)
		return -1;
	if (!!(flags & O_NONBLOCK) == on)
		return 0;
	return fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK);
}

const struct gw_sock_ops gw_sock_kernel = {
	.sendmsg = sendmsg,
	.recvmsg = recvmsg,
	.shutdown = shutdown,
	.close = close,
	.setsockopt = kernel_setsockopt,
	.poll = poll,
	.accept = kernel_accept,
	.set_nonblock = kernel_set_nonblock,
	.kernel = true,
};
